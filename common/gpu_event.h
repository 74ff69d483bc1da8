// GpuEvent: a point in a stream's work the host can wait for, without
// waiting for what was enqueued after it (no device-wide synchronisation).
// Without CUDA, or never recorded, Synchronize returns at once.
//
// Thread-safety: none; the thread that owns the stream.
#pragma once

#include "absl/status/status.h"
#include "common/gpu_stream.h"

namespace oasr {

class GpuEvent {
 public:
  GpuEvent() = default;
  ~GpuEvent();
  GpuEvent(GpuEvent&& other) noexcept;
  GpuEvent& operator=(GpuEvent&& other) noexcept;
  GpuEvent(const GpuEvent&) = delete;
  GpuEvent& operator=(const GpuEvent&) = delete;

  // Marks everything enqueued on `stream` so far (created on first use; a
  // no-op for a null stream). INTERNAL with the CUDA error.
  absl::Status Record(GpuStream stream);
  // Waits until the recorded work has run. INTERNAL with the CUDA error.
  absl::Status Synchronize() const;

 private:
  void* event_ = nullptr;  // cudaEvent_t
  bool recorded_ = false;
};

}  // namespace oasr
