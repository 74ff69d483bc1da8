// The native Conformer (encoder/) as the engine's StreamingModel: a thin
// translation of the engine's cohort plan (slots, offsets, frames, the paged
// K/V pool, its tables and the slot-addressed conv state) into the encoder's
// cohort forward, on the device of the model's ExecutionContext.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/execution_context.h"
#include "encoder/conformer_encoder.h"
#include "encoder/conformer_model.h"
#include "scheduler/streaming_model.h"

namespace oasr::scheduler {

struct ConformerModelOptions {
  Device device = Device::Cpu();
  // CPU compute threads (the context's pool and OpenBLAS).
  int cpu_threads = 1;
  encoder::EncoderOptions encoder;
};

class ConformerStreamingModel final : public StreamingModel {
 public:
  // Loads the model directory `dir` (docs/model-format.md) onto
  // options.device, with an execution context of its own. Errors are the
  // loader's (they name the file, tensor or field), the context's and the
  // encoder's.
  static absl::StatusOr<std::unique_ptr<ConformerStreamingModel>> Load(
      const std::string& dir, const ConformerModelOptions& options = {});

  const ModelGeometry& geometry() const override { return geometry_; }
  // The attention geometry in the encoder's dtype on its device.
  cache::CacheConfig BaseCacheConfig() const override;
  // One state, "cnn": the conv module's left context, per slot
  // (layers, K - 1, d) in the encoder's dtype, slot axis 1.
  std::vector<cache::StreamStateSpec> StreamStates() const override;
  ExecutionContext& context() const override { return *ctx_; }
  size_t WorkspaceBytes(int max_batch) const override;
  absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> CreateFrontEnd(
      int sample_rate) const override;
  // The same fbank and CMVN as CreateFrontEnd's, computed by kernels::LogMel
  // on the model's device (the CPU too) from a plan's PCM.
  bool has_device_front_end() const override { return true; }
  absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> CreateDeviceFrontEnd(
      int sample_rate) const override;
  // Computes feats from the plan's PCM first when it has one.
  absl::Status ForwardCohort(const CohortPlan& plan, const TensorView& log_probs) override;

  const encoder::ConformerModel& model() const { return *model_; }
  encoder::ConformerEncoder& encoder() const { return *encoder_; }

 private:
  // 16 kHz zeros the front ends append at the end of a stream.
  int TailPaddingSamples() const;
  ConformerStreamingModel(std::unique_ptr<ExecutionContext> ctx,
                          std::unique_ptr<encoder::ConformerModel> model);

  std::unique_ptr<ExecutionContext> ctx_;
  std::unique_ptr<encoder::ConformerModel> model_;
  // The device front end's float32 tables on the model's device: the
  // window, the dense mel weights, the CMVN mean and istd, in that order.
  absl::Status UploadFrontEndTables();
  absl::Status ComputeFeatures(const CohortPlan& plan);

  std::unique_ptr<encoder::ConformerEncoder> encoder_;
  ModelGeometry geometry_;
  Tensor front_end_tables_;
  Tensor front_end_spans_;  // int32 [bins, 2]: kernels::MelSpans of the mel table.
};

}  // namespace oasr::scheduler
