#include "common/gpu_event.h"

#include <utility>

#include "absl/strings/str_cat.h"

#if OASR_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace oasr {

GpuEvent::~GpuEvent() {
#if OASR_WITH_CUDA
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
#endif
}

GpuEvent::GpuEvent(GpuEvent&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)),
      recorded_(std::exchange(other.recorded_, false)) {}

GpuEvent& GpuEvent::operator=(GpuEvent&& other) noexcept {
  if (this != &other) {
    std::swap(event_, other.event_);
    std::swap(recorded_, other.recorded_);
  }
  return *this;
}

absl::Status GpuEvent::Record(GpuStream stream) {
  if (stream == nullptr) return absl::OkStatus();
#if OASR_WITH_CUDA
  if (event_ == nullptr) {
    cudaEvent_t event = nullptr;
    if (cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming); e != cudaSuccess) {
      return absl::InternalError(absl::StrCat("cudaEventCreate: ", cudaGetErrorString(e)));
    }
    event_ = event;
  }
  if (cudaError_t e = cudaEventRecord(static_cast<cudaEvent_t>(event_), stream); e != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaEventRecord: ", cudaGetErrorString(e)));
  }
  recorded_ = true;
#endif
  return absl::OkStatus();
}

absl::Status GpuEvent::Synchronize() const {
#if OASR_WITH_CUDA
  if (!recorded_) return absl::OkStatus();
  if (cudaError_t e = cudaEventSynchronize(static_cast<cudaEvent_t>(event_)); e != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaEventSynchronize: ", cudaGetErrorString(e)));
  }
#endif
  return absl::OkStatus();
}

}  // namespace oasr
