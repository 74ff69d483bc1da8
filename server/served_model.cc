#include "server/served_model.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "encoder/conformer_encoder.h"
#include "scheduler/conformer_streaming_model.h"
#include "spdlog/spdlog.h"

namespace oasr::server {
namespace {

// Feature frames are 10 ms apart (the Kaldi fbank front end at 16 kHz).
constexpr int kFeatureFrameMs = 10;
constexpr int kModelSampleRate = 16000;

}  // namespace

absl::StatusOr<std::unique_ptr<ServedModel>> ServedModel::Load(ServedModelOptions options) {
  const std::string& dir = options.model_dir;
  encoder::EncoderOptions encoder_options;
  encoder_options.num_threads = options.num_threads;
  if (absl::Status status = encoder_options.Validate(); !status.ok()) return status;
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<scheduler::ConformerStreamingModel> model,
                        scheduler::ConformerStreamingModel::Load(dir, encoder_options));
  OASR_ASSIGN_OR_RETURN(decoder::SymbolTable units, decoder::SymbolTable::Load(dir + "/units.txt"));
  decoder::PrefixBeamSearchOptions& search = options.engine.decoder.search;
  if (options.use_lm && options.engine.decoder.method == decoder::SearchMethod::kPrefixBeam) {
    OASR_RETURN_IF_ERROR(decoder::UseModelLanguageModel(dir, units, &search).status());
    if (search.lm != nullptr) {
      if (options.lm_weight >= 0.0f) search.lm_weight = options.lm_weight;
      spdlog::info("language model: order {}, {} n-grams, {:.1f} MiB, weight {}, token bonus {}",
                   search.lm->order(), search.lm->num_ngrams_total(),
                   search.lm->memory_bytes() / 1048576.0, search.lm_weight, search.lm_token_bonus);
    }
    if (search.word_lm != nullptr) {
      const decoder::NgramLm& words = search.word_lm->ngram();
      spdlog::info(
          "word language model: order {}, {} words, {} n-grams, {:.1f} MiB, weight {}, word bonus "
          "{}, unknown word penalty {}",
          words.order(), search.word_lm->num_words(), words.num_ngrams_total(),
          search.word_lm->memory_bytes() / 1048576.0, search.word_lm_weight, search.word_bonus,
          search.unknown_word_penalty);
    }
  }
  OASR_ASSIGN_OR_RETURN(
      std::unique_ptr<decoder::CtcDecoder> ctc,
      decoder::CtcDecoder::Create(options.engine.decoder,
                                  std::make_shared<const decoder::SymbolTable>(std::move(units))));
  const scheduler::ModelGeometry geometry = model->geometry();
  OASR_ASSIGN_OR_RETURN(
      std::unique_ptr<scheduler::Engine> engine,
      scheduler::Engine::Create(options.engine, std::move(model), std::move(ctc)));

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
  info.set_chunk_ms(geometry.chunk_size * geometry.subsampling * kFeatureFrameMs);
  info.set_vocabulary_size(geometry.vocab_size);
  info.set_max_stream_seconds(served->engine_->cache_config().max_stream_seconds());
  info.set_max_active_streams(options.engine.max_batch_size);
  info.set_max_waiting_streams(options.engine.max_waiting);
  info.set_model_dir(dir);
  return served;
}

}  // namespace oasr::server
