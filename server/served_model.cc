#include "server/served_model.h"

#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

namespace oasr::server {
namespace {

constexpr int kModelSampleRate = 16000;

}  // namespace

absl::StatusOr<std::unique_ptr<ServedModel>> ServedModel::Load(ServedModelOptions options) {
  const std::string& dir = options.model.model_dir;
  OASR_ASSIGN_OR_RETURN(scheduler::LoadedModel loaded, scheduler::LoadModel(options.model));
  const scheduler::ModelGeometry geometry = loaded.geometry;
  options.engine.decoder = loaded.decoder_config;
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<encoder::AttentionRescorer> rescorer,
                        scheduler::CreateRescorer(*loaded.model, options.engine));
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<scheduler::Engine> engine,
                        scheduler::Engine::Create(options.engine, std::move(loaded.model),
                                                  std::move(loaded.decoder), std::move(rescorer)));

  auto served = std::unique_ptr<ServedModel>(new ServedModel());
  served->engine_ = std::move(engine);
  asr::v1::ModelInfo& info = served->info_;
  std::string name = options.name;
  if (name.empty()) {
    name = std::filesystem::path(dir).lexically_normal().filename().string();
    if (name.empty()) name = std::filesystem::path(dir).parent_path().filename().string();
  }
  info.set_name(name);
  info.set_language_code(options.language_code);
  info.set_sample_rate_hertz(kModelSampleRate);
  info.set_chunk_frames(geometry.chunk_size);
  info.set_chunk_ms(static_cast<int>(geometry.chunk_size * geometry.FrameShiftMs()));
  // The last feature frame a chunk reads ends (right_context - subsampling)
  // frames and one 25 ms fbank window past the chunk's end.
  info.set_lookahead_ms(static_cast<int>(std::lround(
      (geometry.right_context - geometry.subsampling) * geometry.feature_shift_ms + 25.0)));
  info.set_vocabulary_size(geometry.vocab_size);
  // With eviction a stream keeps only the history attention sees, so no
  // length ends it: 0, the proto's "unbounded".
  const cache::CacheConfig& cache = served->engine_->cache_config();
  info.set_max_stream_seconds(cache.eviction_enabled() ? 0.0 : cache.max_stream_seconds());
  info.set_max_active_streams(options.engine.max_batch_size);
  info.set_max_waiting_streams(options.engine.max_waiting);
  info.set_model_dir(dir);
  return served;
}

}  // namespace oasr::server
