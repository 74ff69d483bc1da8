// Row-wise log_softmax in float32 (the CTC head), and the per-row top-k over
// the vocabulary (argmax is k = 1) that GPU-side pruning of the beam search
// builds on.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "common/execution_context.h"
#include "common/gpu_stream.h"

namespace oasr::kernels {

struct LogSoftmaxParams {
  float* x = nullptr;  // [rows, n], stride ld >= n; replaced by log_softmax(x).
  int64_t rows = 0;
  int64_t n = 0;
  int64_t ld = 0;
};

// The largest k TopK selects.
inline constexpr int kMaxTopK = 64;

struct TopKParams {
  const float* x = nullptr;  // [rows, n], stride ld >= n.
  int64_t rows = 0;
  int64_t n = 0;
  int64_t ld = 0;
  int k = 1;                   // In [1, min(n, kMaxTopK)].
  float* values = nullptr;     // [rows, k]: the k largest, descending.
  int32_t* indices = nullptr;  // [rows, k]: their columns; ties go to the lower column.
  // NaN is never chosen: a row with fewer than k other values ends with
  // (-inf, INT32_MAX) entries.
  // Optional: gathered[row] = x[row, gather_column] (the CTC blank's
  // log-prob, which pruned decoding reads besides the top k).
  float* gathered = nullptr;
  int64_t gather_column = 0;  // In [0, n).
};

// The ops on ctx's device (asynchronous on CUDA). INVALID_ARGUMENT for null
// pointers, a stride below n, or k outside [1, min(n, 64)].
absl::Status LogSoftmax(ExecutionContext& ctx, const LogSoftmaxParams& p);
absl::Status TopK(ExecutionContext& ctx, const TopKParams& p);

// CPU implementations (host pointers).
void LogSoftmaxCpu(const LogSoftmaxParams& p, ThreadPool* pool);
void TopKCpu(const TopKParams& p);

#if OASR_WITH_CUDA
void LaunchLogSoftmax(const LogSoftmaxParams& p, GpuStream stream);
void LaunchTopK(const TopKParams& p, GpuStream stream);
#endif

}  // namespace oasr::kernels
