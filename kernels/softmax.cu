#include "kernels/cuda_common.cuh"
#include "kernels/softmax.h"

namespace oasr::kernels {
namespace {

constexpr int kWarps = 8;  // Rows per block: one warp each.

__global__ void LogSoftmaxKernel(LogSoftmaxParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= p.rows) return;
  float* x = p.x + row * p.ld;
  float mx = -INFINITY;
  for (int64_t i = lane; i < p.n; i += 32) mx = fmaxf(mx, x[i]);
  mx = cuda::WarpMax(mx);
  float sum = 0.0f;
  for (int64_t i = lane; i < p.n; i += 32) sum += expf(x[i] - mx);
  const float lse = mx + logf(cuda::WarpSum(sum));
  for (int64_t i = lane; i < p.n; i += 32) x[i] -= lse;
}

// Whether (v, i) ranks before (w, j): larger value first, lower column on ties.
__device__ __forceinline__ bool Before(float v, int i, float w, int j) {
  return v > w || (v == w && i < j);
}

// k passes per row: each finds the best element ranking after the last one
// taken. O(k * n) reads of a row that stays in L1.
__global__ void TopKKernel(TopKParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= p.rows) return;
  const float* x = p.x + row * p.ld;
  float last_v = INFINITY;
  int last_i = -1;
  for (int k = 0; k < p.k; ++k) {
    float best_v = -INFINITY;
    int best_i = INT_MAX;
    for (int64_t i = lane; i < p.n; i += 32) {
      const float v = x[i];
      const int ii = static_cast<int>(i);
      if (Before(last_v, last_i, v, ii) && Before(v, ii, best_v, best_i)) {
        best_v = v;
        best_i = ii;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best_v, o);
      const int oi = __shfl_xor_sync(0xffffffffu, best_i, o);
      if (Before(ov, oi, best_v, best_i)) {
        best_v = ov;
        best_i = oi;
      }
    }
    if (lane == 0) {
      p.values[row * p.k + k] = best_v;
      p.indices[row * p.k + k] = best_i;
    }
    last_v = best_v;
    last_i = best_i;
  }
  if (p.gathered != nullptr && lane == 0) p.gathered[row] = x[p.gather_column];
}

}  // namespace

void LaunchLogSoftmax(const LogSoftmaxParams& p, GpuStream stream) {
  if (p.rows == 0) return;
  const int blocks = static_cast<int>((p.rows + kWarps - 1) / kWarps);
  LogSoftmaxKernel<<<blocks, 32 * kWarps, 0, stream>>>(p);
  OASR_CUDA_LAUNCH_CHECK();
}

void LaunchTopK(const TopKParams& p, GpuStream stream) {
  if (p.rows == 0) return;
  const int blocks = static_cast<int>((p.rows + kWarps - 1) / kWarps);
  TopKKernel<<<blocks, 32 * kWarps, 0, stream>>>(p);
  OASR_CUDA_LAUNCH_CHECK();
}

}  // namespace oasr::kernels
