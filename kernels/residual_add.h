// y += alpha * x over n float32 elements: the scaled residual connection of
// the Conformer's macaron feed-forward blocks (alpha = 0.5) and plain
// residuals (alpha = 1).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "common/execution_context.h"
#include "common/gpu_stream.h"

namespace oasr::kernels {

struct ResidualAddParams {
  float* y = nullptr;        // [n], read and written.
  const float* x = nullptr;  // [n]
  float alpha = 1.0f;
  int64_t n = 0;
};

// The op on ctx's device (asynchronous on CUDA). INVALID_ARGUMENT for null
// pointers with n > 0.
absl::Status ResidualAdd(ExecutionContext& ctx, const ResidualAddParams& p);

// CPU reference. `p.y` and `p.x` are host pointers.
void ResidualAddCpu(const ResidualAddParams& p);

#if OASR_WITH_CUDA
// Enqueues the kernel on `stream`; `p.y` and `p.x` are device pointers.
// Asynchronous; checks the launch.
void LaunchResidualAdd(const ResidualAddParams& p, GpuStream stream);
#endif

}  // namespace oasr::kernels
