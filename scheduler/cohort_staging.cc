#include "scheduler/cohort_staging.h"

#include <algorithm>

#include "common/status.h"

namespace oasr::scheduler {

absl::StatusOr<std::unique_ptr<CohortStaging>> CohortStaging::Create(int capacity,
                                                                     int64_t window_frames,
                                                                     int feature_dim, Device device,
                                                                     int64_t pcm_stride,
                                                                     bool pcm_ring) {
  const int64_t feature_floats = window_frames * feature_dim;
  const bool ring = pcm_ring && pcm_stride > 0;
  const int64_t row_floats = ring ? 0 : pcm_stride > 0 ? pcm_stride : feature_floats;
  const int64_t words = kArrays * int64_t{capacity} + int64_t{capacity} * row_floats;
  static_assert(sizeof(float) == sizeof(int32_t));
  OASR_ASSIGN_OR_RETURN(Tensor host, device.is_cuda() ? Tensor::EmptyPinned({words}, DType::kInt32)
                                                      : Tensor::Empty({words}, DType::kInt32));
  ZeroTensor(host.view());
  Tensor dev, feats, pcm;
  if (device.is_cuda()) {
    OASR_ASSIGN_OR_RETURN(dev, Tensor::Zeros({words}, DType::kInt32, device));
  }
  if (pcm_stride > 0) {
    OASR_ASSIGN_OR_RETURN(
        feats, Tensor::Zeros({int64_t{capacity} * feature_floats}, DType::kFloat32, device));
  }
  if (ring) {
    OASR_ASSIGN_OR_RETURN(pcm, Tensor::Zeros({capacity, pcm_stride}, DType::kFloat32, device));
  }
  return std::unique_ptr<CohortStaging>(
      new CohortStaging(capacity, window_frames, feature_dim, pcm_stride, row_floats,
                        std::move(host), std::move(dev), std::move(feats), std::move(pcm)));
}

CohortStaging::CohortStaging(int capacity, int64_t window_frames, int feature_dim,
                             int64_t pcm_stride, int64_t row_floats, Tensor host, Tensor device,
                             Tensor feats, Tensor pcm)
    : capacity_(capacity),
      window_frames_(window_frames),
      feature_dim_(feature_dim),
      pcm_stride_(pcm_stride),
      row_floats_(row_floats),
      host_(std::move(host)),
      device_(std::move(device)),
      feats_(std::move(feats)),
      pcm_(std::move(pcm)) {}

absl::Status CohortStaging::Upload(int batch, GpuStream stream) {
  if (device_.empty()) return absl::OkStatus();
  const int64_t words = kArrays * int64_t{capacity_} + int64_t{batch} * row_floats_;
  return CopyTensorAsync(device_.view().Slice(0, words), host_.view().Slice(0, words), stream);
}

TensorView CohortStaging::DeviceInts(int64_t at, int batch) const {
  const Tensor& buf = device_buffer();
  return TensorView(static_cast<int32_t*>(buf.data()) + at, DType::kInt32, {batch}, buf.device());
}

TensorView CohortStaging::DeviceWindows(Shape shape) const {
  const Tensor& buf = device_buffer();
  return TensorView(static_cast<int32_t*>(buf.data()) + kArrays * capacity_, DType::kFloat32,
                    std::move(shape), buf.device());
}

TensorView CohortStaging::device_feats(int batch) const {
  const Shape shape{batch, window_frames_, feature_dim_};
  if (!has_pcm()) return DeviceWindows(shape);
  return TensorView(feats_.data(), DType::kFloat32, shape, feats_.device());
}

TensorView CohortStaging::device_pcm(int batch) const {
  if (!has_pcm()) return TensorView();
  if (pcm_ring()) {
    return TensorView(pcm_.data(), DType::kFloat32, Shape{batch, pcm_stride_}, pcm_.device());
  }
  return DeviceWindows(Shape{batch, pcm_stride_});
}

std::vector<int> GraphLadder(int capacity) {
  constexpr int kDoublingUpTo = 64, kAlign = 16;
  std::vector<int> widths;
  for (int w = 1; w < capacity;) {
    widths.push_back(w);
    w = w < kDoublingUpTo ? 2 * w : (w + w / 4 + kAlign - 1) / kAlign * kAlign;
  }
  widths.push_back(capacity);
  return widths;
}

size_t FilledRows(std::span<const int> widths, size_t rows, size_t fill_from) {
  if (fill_from == 0 || rows < fill_from || widths.empty()) return rows;
  const auto above = std::upper_bound(widths.begin(), widths.end(), static_cast<int>(rows));
  return above == widths.begin() ? rows : static_cast<size_t>(*(above - 1));
}

CohortPlan MakeCohortPlan(const CohortStaging& staging, int batch, int chunk,
                          const cache::BlockPool& pool, const cache::BlockTableMirror& tables,
                          std::span<const TensorView> states, const TensorView& pcm_ring) {
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
  if (staging.has_pcm()) {
    plan.pcm = staging.device_pcm(batch);
    plan.feat_frames = staging.device_feat_frames(batch);
    if (staging.pcm_ring()) {
      plan.pcm_ring = pcm_ring;
      plan.pcm_ring_starts = staging.device_ring_starts(batch);
    }
  }
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
