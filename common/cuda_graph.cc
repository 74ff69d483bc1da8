#include "common/cuda_graph.h"

#include <utility>

#include "absl/strings/str_cat.h"

#if OASR_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace oasr {

CudaGraph::~CudaGraph() { Reset(); }

CudaGraph::CudaGraph(CudaGraph&& other) noexcept
    : exec_(std::exchange(other.exec_, nullptr)), num_nodes_(std::exchange(other.num_nodes_, 0)) {}

CudaGraph& CudaGraph::operator=(CudaGraph&& other) noexcept {
  if (this != &other) {
    Reset();
    exec_ = std::exchange(other.exec_, nullptr);
    num_nodes_ = std::exchange(other.num_nodes_, 0);
  }
  return *this;
}

void CudaGraph::Reset() {
#if OASR_WITH_CUDA
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
#endif
  exec_ = nullptr;
  num_nodes_ = 0;
}

#if OASR_WITH_CUDA

namespace {

absl::Status CudaError(const char* what, cudaError_t err) {
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(err), ": ",
                                          cudaGetErrorString(err)));
}

}  // namespace

absl::StatusOr<CudaGraph> CudaGraph::Capture(GpuStream stream,
                                             const std::function<absl::Status()>& body) {
  if (stream == nullptr) {
    return absl::UnimplementedError("CUDA graphs need a CUDA stream (the legacy stream cannot capture)");
  }
  if (cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
      err != cudaSuccess) {
    return CudaError("cudaStreamBeginCapture", err);
  }
  const absl::Status status = body();
  cudaGraph_t graph = nullptr;
  // Ending the capture is needed on every path: it takes the stream out of
  // capture mode (and reports an invalidated capture).
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!status.ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    (void)cudaGetLastError();  // Clears what an invalidated capture reported.
    return status;
  }
  if (ended != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return CudaError("cudaStreamEndCapture", ended);
  }
  size_t nodes = 0;
  cudaGraphGetNodes(graph, nullptr, &nodes);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (made != cudaSuccess) return CudaError("cudaGraphInstantiate", made);
  CudaGraph g;
  g.exec_ = exec;
  g.num_nodes_ = static_cast<int>(nodes);
  return g;
}

absl::Status CudaGraph::Launch(GpuStream stream) const {
  if (exec_ == nullptr) return absl::FailedPreconditionError("CudaGraph::Launch: nothing captured");
  if (cudaError_t err = cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), stream);
      err != cudaSuccess) {
    return CudaError("cudaGraphLaunch", err);
  }
  return absl::OkStatus();
}

#else

absl::StatusOr<CudaGraph> CudaGraph::Capture(GpuStream, const std::function<absl::Status()>&) {
  return absl::UnimplementedError("CUDA graphs: this build has no CUDA");
}

absl::Status CudaGraph::Launch(GpuStream) const {
  return absl::FailedPreconditionError("CudaGraph::Launch: nothing captured (no CUDA)");
}

#endif

}  // namespace oasr
