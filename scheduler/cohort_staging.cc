#include "scheduler/cohort_staging.h"

#include "common/status.h"

namespace oasr::scheduler {

absl::StatusOr<std::unique_ptr<CohortStaging>> CohortStaging::Create(int capacity,
                                                                     int64_t window_frames,
                                                                     int feature_dim,
                                                                     Device device) {
  const int64_t words = 3 * int64_t{capacity} + int64_t{capacity} * window_frames * feature_dim;
  static_assert(sizeof(float) == sizeof(int32_t));
  OASR_ASSIGN_OR_RETURN(Tensor host, device.is_cuda() ? Tensor::EmptyPinned({words}, DType::kInt32)
                                                      : Tensor::Empty({words}, DType::kInt32));
  ZeroTensor(host.view());
  Tensor dev;
  if (device.is_cuda()) {
    OASR_ASSIGN_OR_RETURN(dev, Tensor::Zeros({words}, DType::kInt32, device));
  }
  return std::unique_ptr<CohortStaging>(
      new CohortStaging(capacity, window_frames, feature_dim, std::move(host), std::move(dev)));
}

CohortStaging::CohortStaging(int capacity, int64_t window_frames, int feature_dim, Tensor host,
                             Tensor device)
    : capacity_(capacity),
      window_frames_(window_frames),
      feature_dim_(feature_dim),
      window_floats_(window_frames * feature_dim),
      host_(std::move(host)),
      device_(std::move(device)) {}

absl::Status CohortStaging::Upload(int batch, GpuStream stream) {
  if (device_.empty()) return absl::OkStatus();
  const int64_t words = 3 * int64_t{capacity_} + int64_t{batch} * window_floats_;
  return CopyTensorAsync(device_.view().Slice(0, words), host_.view().Slice(0, words), stream);
}

TensorView CohortStaging::DeviceInts(int64_t at, int batch) const {
  const Tensor& buf = device_buffer();
  return TensorView(static_cast<int32_t*>(buf.data()) + at, DType::kInt32, {batch}, buf.device());
}

TensorView CohortStaging::device_feats(int batch) const {
  const Tensor& buf = device_buffer();
  return TensorView(static_cast<int32_t*>(buf.data()) + 3 * capacity_, DType::kFloat32,
                    {batch, window_frames_, feature_dim_}, buf.device());
}

CohortPlan MakeCohortPlan(const CohortStaging& staging, int batch, int chunk,
                          const cache::BlockPool& pool, const cache::BlockTableMirror& tables,
                          std::span<const TensorView> states) {
  CohortPlan plan;
  plan.batch = batch;
  plan.chunk = chunk;
  plan.slots = staging.device_slots(batch);
  plan.frames = staging.device_frames(batch);
  plan.offsets = staging.device_offsets(batch);
  plan.host_slots = {staging.slots(), static_cast<size_t>(batch)};
  plan.host_frames = {staging.frames(), static_cast<size_t>(batch)};
  plan.host_offsets = {staging.offsets(), static_cast<size_t>(batch)};
  plan.feats = staging.device_feats(batch);
  plan.k_pool = pool.k_pool();
  plan.v_pool = pool.v_pool();
  plan.block_table = tables.block_table();
  plan.cache_lens = tables.cache_seqlens();
  plan.host_block_table = tables.host_block_table();
  plan.host_cache_lens = tables.host_cache_seqlens();
  plan.states = states;
  return plan;
}

}  // namespace oasr::scheduler
