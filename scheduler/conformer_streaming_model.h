// The native Conformer (encoder/) as the engine's StreamingModel: attention
// history read straight from the paged K/V pool, new K/V written into the
// blocks each stream prepared, conv state read and written in its slot.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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
  cache::CacheConfig BaseCacheConfig() const override;
  absl::StatusOr<std::unique_ptr<encoder::FeaturePipeline>> CreateFrontEnd(
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
  std::vector<float> new_kv_;  // [layers, M, 2d]
};

}  // namespace oasr::scheduler
