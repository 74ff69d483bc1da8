#include <cuda_runtime.h>

#include "common/cuda_check.h"
#include "kernels/residual_add.h"

namespace oasr::kernels {
namespace {

__global__ void ResidualAddKernel(ResidualAddParams p) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.n;
       i += stride) {
    p.y[i] += p.alpha * p.x[i];
  }
}

}  // namespace

void LaunchResidualAdd(const ResidualAddParams& p, GpuStream stream) {
  if (p.n == 0) return;
  constexpr int kThreads = 256;
  const int64_t wanted = (p.n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < 65535 ? wanted : 65535);
  ResidualAddKernel<<<blocks, kThreads, 0, stream>>>(p);
  OASR_CUDA_LAUNCH_CHECK();
}

}  // namespace oasr::kernels
