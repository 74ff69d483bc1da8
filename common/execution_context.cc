#include "common/execution_context.h"

#include "absl/strings/str_cat.h"

#if OASR_WITH_CUDA
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#endif

namespace oasr {

absl::Status ExecutionContextOptions::Validate() const {
  if (cpu_threads < 1 || cpu_threads > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu_threads: ", cpu_threads, " is outside [1, 256]"));
  }
  if (gemm_workspace_bytes > (size_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm_workspace_bytes: ", gemm_workspace_bytes, " is above 1 GiB"));
  }
  return absl::OkStatus();
}

ExecutionContext::ExecutionContext(const ExecutionContextOptions& options)
    : options_(options), threads_(std::make_unique<ThreadPool>(options.cpu_threads)) {}

absl::StatusOr<std::unique_ptr<ExecutionContext>> ExecutionContext::Create(
    const ExecutionContextOptions& options) {
  if (absl::Status status = options.Validate(); !status.ok()) return status;
  std::unique_ptr<ExecutionContext> ctx(new ExecutionContext(options));
  if (options.device.is_cpu()) return ctx;
#if OASR_WITH_CUDA
  const int index = options.device.index;
  if (index >= CudaDeviceCount()) {
    return absl::UnavailableError(absl::StrCat(options.device.ToString(), " is not present (",
                                               CudaDeviceCount(), " CUDA devices)"));
  }
  absl::StatusOr<std::string> name = CudaDeviceName(index);
  ctx->device_name_ = name.ok() ? *name : std::string("unknown GPU");
  OASR_CUDA_CHECK(cudaSetDevice(index));
  cudaDeviceProp prop{};
  OASR_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  ctx->multiprocessors_ = prop.multiProcessorCount;
  cudaStream_t stream = nullptr;
  if (cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      err != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(absl::StrCat("cudaStreamCreate: ", cudaGetErrorString(err)));
  }
  ctx->stream_ = stream;
  cublasLtHandle_t handle = nullptr;
  if (cublasStatus_t st = cublasLtCreate(&handle); st != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("cublasLtCreate failed with status ", static_cast<int>(st)));
  }
  ctx->cublaslt_ = handle;
  if (options.gemm_workspace_bytes > 0) {
    absl::StatusOr<Tensor> ws = Tensor::Empty({static_cast<int64_t>(options.gemm_workspace_bytes)},
                                              DType::kUInt8, options.device);
    if (!ws.ok()) return ws.status();
    ctx->gemm_workspace_ = std::move(*ws);
  }
  return ctx;
#else
  return absl::UnavailableError(
      absl::StrCat("cannot compute on ", options.device.ToString(), ": built without CUDA"));
#endif
}

ExecutionContext::~ExecutionContext() {
#if OASR_WITH_CUDA
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (cublaslt_ != nullptr) cublasLtDestroy(static_cast<cublasLtHandle_t>(cublaslt_));
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
#endif
}

absl::Status ExecutionContext::ReserveWorkspace(size_t device_bytes, size_t host_bytes) {
  if (absl::Status s = workspace_.Reserve(device_bytes, device()); !s.ok()) return s;
  return host_workspace_.Reserve(host_bytes, Device::Cpu(), /*pinned=*/is_cuda());
}

absl::Status ExecutionContext::Synchronize() const {
#if OASR_WITH_CUDA
  if (stream_ != nullptr) {
    if (cudaError_t err = cudaStreamSynchronize(stream_); err != cudaSuccess) {
      return absl::InternalError(absl::StrCat("CUDA stream synchronize on ", device().ToString(),
                                              ": ", cudaGetErrorString(err)));
    }
  }
#endif
  return absl::OkStatus();
}

std::string ExecutionContext::Describe() const {
  if (!is_cuda()) return absl::StrCat("cpu (", threads_->threads(), " threads)");
  return absl::StrCat(device().ToString(), " (", device_name_, ")");
}

}  // namespace oasr
