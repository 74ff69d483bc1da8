#include "cache/block_table_mirror.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status.h"

#if OASR_WITH_CUDA
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#endif

namespace oasr::cache {

absl::StatusOr<std::unique_ptr<BlockTableMirror>> BlockTableMirror::Create(int rows, int width,
                                                                           int cohort_capacity,
                                                                           Device device) {
  if (rows <= 0 || width <= 0 || cohort_capacity <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("BlockTableMirror: rows ", rows, ", width ",
                                                   width, ", cohort_capacity ", cohort_capacity,
                                                   " must all be positive"));
  }
  const int64_t n = int64_t{cohort_capacity} + rows + int64_t{rows} * width;
  OASR_ASSIGN_OR_RETURN(Tensor host, Tensor::Zeros({n}, DType::kInt32, Device::Cpu()));
  Tensor dev;
  if (device.is_cuda()) {
    OASR_ASSIGN_OR_RETURN(dev, Tensor::Zeros({n}, DType::kInt32, device));
  }
  std::unique_ptr<BlockTableMirror> mirror(
      new BlockTableMirror(rows, width, cohort_capacity, std::move(host), std::move(dev)));
#if OASR_WITH_CUDA
  if (device.is_cuda()) {
    int previous = 0;
    OASR_CUDA_CHECK(cudaGetDevice(&previous));
    OASR_CUDA_CHECK(cudaSetDevice(device.index));
    absl::Status status;
    for (int i = 0; i < kStagingDepth && status.ok(); ++i) {
      if (cudaHostAlloc(&mirror->staging_[i], n * sizeof(int32_t), cudaHostAllocPortable) !=
          cudaSuccess) {
        cudaGetLastError();
        mirror->staging_[i] = nullptr;
        status = absl::ResourceExhaustedError(
            absl::StrCat("BlockTableMirror: pinned staging of ", n * sizeof(int32_t), " bytes"));
        break;
      }
      cudaEvent_t event = nullptr;
      OASR_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      mirror->events_[i] = event;
    }
    OASR_CUDA_CHECK(cudaSetDevice(previous));
    OASR_RETURN_IF_ERROR(status);
  }
#endif
  return mirror;
}

BlockTableMirror::BlockTableMirror(int rows, int width, int cohort_capacity, Tensor host,
                                   Tensor device)
    : rows_(rows),
      width_(width),
      cohort_capacity_(cohort_capacity),
      host_(std::move(host)),
      device_(std::move(device)) {
  cohort_host_ = host_.data<int32_t>();
  seqlens_host_ = cohort_host_ + cohort_capacity_;
  table_host_ = seqlens_host_ + rows_;
}

BlockTableMirror::~BlockTableMirror() {
#if OASR_WITH_CUDA
  for (int i = 0; i < kStagingDepth; ++i) {
    // A copy still queued reads the staging buffer: let it finish first.
    if (events_[i] != nullptr) {
      if (in_flight_[i]) cudaEventSynchronize(static_cast<cudaEvent_t>(events_[i]));
      cudaEventDestroy(static_cast<cudaEvent_t>(events_[i]));
    }
    if (staging_[i] != nullptr) cudaFreeHost(staging_[i]);
  }
#endif
}

int32_t* BlockTableMirror::MutableRow(int row) {
  OASR_DCHECK(row >= 0 && row < rows_);
  dirty_rows_end_ = std::max(dirty_rows_end_, row + 1);
  return table_host_ + static_cast<int64_t>(row) * width_;
}

void BlockTableMirror::SetSeqlen(int row, int32_t frames) {
  OASR_DCHECK(row >= 0 && row < rows_);
  seqlens_host_[row] = frames;
  header_dirty_ = true;
}

void BlockTableMirror::ClearCohort() {
  cohort_size_ = 0;
  header_dirty_ = true;
}

void BlockTableMirror::AppendCohort(int32_t slot) {
  OASR_CHECK(cohort_size_ < cohort_capacity_, "cohort above its capacity");
  cohort_host_[cohort_size_++] = slot;
  header_dirty_ = true;
}

void BlockTableMirror::Sync(GpuStream stream) {
  if (!header_dirty_ && dirty_rows_end_ == 0) return;
  const int64_t count = int64_t{cohort_capacity_} + rows_ + int64_t{dirty_rows_end_} * width_;
  header_dirty_ = false;
  dirty_rows_end_ = 0;
  if (device_.empty()) return;  // CPU: the host buffer is the mirror.
#if OASR_WITH_CUDA
  const size_t bytes = static_cast<size_t>(count) * sizeof(int32_t);
  const int i = next_staging_;
  next_staging_ = (next_staging_ + 1) % kStagingDepth;
  auto event = static_cast<cudaEvent_t>(events_[i]);
  if (in_flight_[i]) OASR_CUDA_CHECK(cudaEventSynchronize(event));
  std::memcpy(staging_[i], host_.data(), bytes);
  OASR_CUDA_CHECK(
      cudaMemcpyAsync(device_.data(), staging_[i], bytes, cudaMemcpyHostToDevice, stream));
  OASR_CUDA_CHECK(cudaEventRecord(event, stream));
  in_flight_[i] = true;
  ++num_copies_;
  bytes_copied_ += static_cast<int64_t>(bytes);
#else
  (void)stream;
  (void)count;
  OASR_CHECK(false, "BlockTableMirror: device copy in a build without CUDA");
#endif
}

TensorView BlockTableMirror::Region(const Tensor& buffer, int64_t offset,
                                    const Shape& shape) const {
  return TensorView(buffer.data<int32_t>() + offset, DType::kInt32, shape, buffer.device());
}

TensorView BlockTableMirror::block_table() const {
  const Tensor& b = device_.empty() ? host_ : device_;
  return Region(b, int64_t{cohort_capacity_} + rows_, {rows_, width_});
}

TensorView BlockTableMirror::cache_seqlens() const {
  const Tensor& b = device_.empty() ? host_ : device_;
  return Region(b, cohort_capacity_, {rows_});
}

TensorView BlockTableMirror::cohort_slots() const {
  const Tensor& b = device_.empty() ? host_ : device_;
  return Region(b, 0, {cohort_size_});
}

TensorView BlockTableMirror::host_block_table() const {
  return Region(host_, int64_t{cohort_capacity_} + rows_, {rows_, width_});
}

TensorView BlockTableMirror::host_cache_seqlens() const {
  return Region(host_, cohort_capacity_, {rows_});
}

}  // namespace oasr::cache
