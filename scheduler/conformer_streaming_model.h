// The native Conformer (encoder/) as the engine's StreamingModel: a thin
// translation of the cache managers' views (paged K/V pool, block-table rows,
// cache lengths, conv state) into the encoder's paged entry point, which
// reads history straight from the pool and writes the new K/V into the
// blocks each stream prepared.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/slot_state_cache.h"
#include "encoder/conformer_encoder.h"
#include "encoder/conformer_model.h"
#include "scheduler/streaming_model.h"

namespace oasr::scheduler {

class ConformerStreamingModel final : public StreamingModel {
 public:
  // Loads the model directory `dir` (docs/model-format.md) for the CPU.
  // Errors are the loader's (they name the file, tensor or field).
  static absl::StatusOr<std::unique_ptr<ConformerStreamingModel>> Load(
      const std::string& dir, const encoder::EncoderOptions& options);

  const ModelGeometry& geometry() const override { return geometry_; }
  // The attention geometry, plus the conv cache sized from StreamStates().
  cache::CacheConfig BaseCacheConfig() const override;

  // The per-stream fixed-extent states the model carries between chunks, as
  // the slot-addressed caches (cache/slot_state_cache.h) declare them: the
  // conv module's left context "cnn", per slot (layers, K - 1, d) float32,
  // slot axis 1 (CnnCacheManager's layout). Zero is a new stream's state.
  std::vector<cache::StreamStateSpec> StreamStates() const;
  absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> CreateFrontEnd(
      int sample_rate) const override;
  absl::Status ForwardCohort(std::span<const CohortRow> rows, float* log_probs) override;

  const encoder::ConformerModel& model() const { return *model_; }

 private:
  ConformerStreamingModel(std::unique_ptr<encoder::ConformerModel> model,
                          std::unique_ptr<encoder::ConformerEncoder> encoder);

  std::unique_ptr<encoder::ConformerModel> model_;
  std::unique_ptr<encoder::ConformerEncoder> encoder_;
  ModelGeometry geometry_;
  // Scratch reused every cohort (grown, never shrunk).
  std::vector<encoder::PagedKvLayer> pool_;
  std::vector<encoder::PagedChunkInput> inputs_;
};

}  // namespace oasr::scheduler
