// CudaGraph: one captured sequence of work on a stream, replayed with one
// launch. Capture runs `body` with the stream in capture mode (thread-local:
// other threads may use CUDA meanwhile), so every kernel, copy and cuBLASLt
// call `body` enqueues on that stream becomes a node; nothing runs until
// Launch. A replay reads and writes exactly the addresses the capture saw,
// so everything the body touches must live at fixed addresses.
//
// Without CUDA (or on the CPU) Capture returns UNIMPLEMENTED.
//
// Thread-safety: none; the thread that owns the stream.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/gpu_stream.h"

namespace oasr {

class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph();
  CudaGraph(CudaGraph&& other) noexcept;
  CudaGraph& operator=(CudaGraph&& other) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Captures what `body` enqueues on `stream` and instantiates it. The
  // body's error, or INTERNAL with the CUDA error when the capture is
  // invalidated (a synchronising call inside the body, work on another
  // stream) or cannot be instantiated; the stream leaves capture mode
  // either way. UNIMPLEMENTED without CUDA or for a null stream.
  static absl::StatusOr<CudaGraph> Capture(GpuStream stream,
                                           const std::function<absl::Status()>& body);

  // Enqueues one replay on `stream` (any stream of the capture's device).
  // FAILED_PRECONDITION for an empty graph; INTERNAL with the CUDA error.
  absl::Status Launch(GpuStream stream) const;

  bool empty() const { return exec_ == nullptr; }
  // Kernel, copy and memset nodes of the captured graph.
  int num_nodes() const { return num_nodes_; }

 private:
  void Reset();

  void* exec_ = nullptr;  // cudaGraphExec_t.
  int num_nodes_ = 0;
};

}  // namespace oasr
