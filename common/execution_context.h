// ExecutionContext: everything one device needs to run a model's ops, made
// once per device at start-up and passed to every op and every forward. On
// the CPU it is the compute thread pool; on CUDA the device, the stream all
// of a step's work is enqueued on, the cuBLASLt handle and its workspace.
// Both carry a scratch arena on the device and a (page-locked) host arena for
// staging, reserved once (ReserveWorkspace) so that the steady-state chunk
// loop allocates nothing.
//
// Thread-safety: none. A context belongs to the thread that drives its
// device (the engine's scheduler thread); ops enqueued on it run in order.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/arena.h"
#include "common/device.h"
#include "common/gpu_stream.h"
#include "common/thread_pool.h"

namespace oasr {

struct ExecutionContextOptions {
  Device device = Device::Cpu();
  // Threads of the CPU compute pool (the caller plus workers). On CUDA the
  // pool serves host-side work only.
  int cpu_threads = 1;
  // cuBLASLt's workspace (CUDA only); split-K and stream-K kernels need it.
  size_t gemm_workspace_bytes = size_t{32} << 20;

  // INVALID_ARGUMENT naming the field: cpu_threads in [1, 256],
  // gemm_workspace_bytes at most 1 GiB.
  absl::Status Validate() const;
};

class ExecutionContext {
 public:
  // UNAVAILABLE for a CUDA device the build or the machine does not have;
  // INVALID_ARGUMENT for bad options; RESOURCE_EXHAUSTED or INTERNAL when a
  // stream, handle or workspace cannot be created.
  static absl::StatusOr<std::unique_ptr<ExecutionContext>> Create(
      const ExecutionContextOptions& options);
  ~ExecutionContext();
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  Device device() const { return options_.device; }
  bool is_cuda() const { return options_.device.is_cuda(); }
  ThreadPool& threads() const { return *threads_; }

  // The stream every op of this context is enqueued on (null on the CPU).
  GpuStream stream() const { return stream_; }
  // cublasLtHandle_t (CUDA; null on the CPU), opaque here so that code built
  // without CUDA headers can pass it along.
  void* cublaslt() const { return cublaslt_; }
  void* gemm_workspace() const { return gemm_workspace_.data(); }
  size_t gemm_workspace_bytes() const { return gemm_workspace_.nbytes(); }
  // Multiprocessors of the device (0 on the CPU), for sizing grids.
  int multiprocessors() const { return multiprocessors_; }

  // Scratch on the device, and page-locked host scratch for staging copies.
  Arena& workspace() { return workspace_; }
  Arena& host_workspace() { return host_workspace_; }
  // Reserves both arenas (see Arena::Reserve). Called at start-up, once the
  // model and the batch capacity are known.
  absl::Status ReserveWorkspace(size_t device_bytes, size_t host_bytes);

  // Waits until every op enqueued so far has run (no-op on the CPU).
  // INTERNAL with the CUDA error when the device reports one.
  absl::Status Synchronize() const;

  // "cpu (4 threads)" or "cuda:0 (NVIDIA H200, 139.8 GiB, sm_90)".
  std::string Describe() const;

 private:
  explicit ExecutionContext(const ExecutionContextOptions& options);

  ExecutionContextOptions options_;
  std::unique_ptr<ThreadPool> threads_;
  GpuStream stream_ = nullptr;
  void* cublaslt_ = nullptr;
  Tensor gemm_workspace_;
  int multiprocessors_ = 0;
  std::string device_name_;
  Arena workspace_;
  Arena host_workspace_;
};

}  // namespace oasr
