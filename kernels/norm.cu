#include "kernels/cuda_common.cuh"
#include "kernels/norm.h"

namespace oasr::kernels {
namespace {

using cuda::FromFloat;
using cuda::ToFloat;

constexpr int kRowsPerBlock = 8;  // One warp per row.

// kPerLane values of a row per lane, element i = j * 32 + lane (coalesced).
template <typename X, typename R, typename O, int kPerLane>
__global__ void LayerNormKernel(LayerNormParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  if (row >= p.rows) return;
  const X* x = static_cast<const X*>(p.x) + row * p.ldx;
  float v[kPerLane];
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t i = j * 32 + lane;
    v[j] = i < p.d ? ToFloat(x[i]) : 0.0f;
  }
  if (p.residual != nullptr) {
    const R* r = static_cast<const R*>(p.residual) + row * p.ld_residual;
    X* s = p.sum_out != nullptr ? static_cast<X*>(p.sum_out) + row * p.ld_sum : nullptr;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t i = j * 32 + lane;
      if (i < p.d) {
        v[j] += p.residual_scale * ToFloat(r[i]);
        if (s != nullptr) s[i] = FromFloat<X>(v[j]);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) sum += v[j];
  const float mean = cuda::WarpSum(sum) / static_cast<float>(p.d);
  float sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t i = j * 32 + lane;
    const float c = i < p.d ? v[j] - mean : 0.0f;
    sq += c * c;
  }
  const float inv = rsqrtf(cuda::WarpSum(sq) / static_cast<float>(p.d) + p.eps);
  O* out = static_cast<O*>(p.out) + row * p.ldo;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t i = j * 32 + lane;
    if (i < p.d) out[i] = FromFloat<O>((v[j] - mean) * inv * p.scale[i] + p.shift[i]);
  }
}

template <typename X, typename R, typename O>
void Launch(const LayerNormParams& p, GpuStream stream) {
  const int blocks = static_cast<int>((p.rows + kRowsPerBlock - 1) / kRowsPerBlock);
  const int threads = 32 * kRowsPerBlock;
  const int64_t per_lane = (p.d + 31) / 32;
  if (per_lane <= 1) {
    LayerNormKernel<X, R, O, 1><<<blocks, threads, 0, stream>>>(p);
  } else if (per_lane <= 2) {
    LayerNormKernel<X, R, O, 2><<<blocks, threads, 0, stream>>>(p);
  } else if (per_lane <= 4) {
    LayerNormKernel<X, R, O, 4><<<blocks, threads, 0, stream>>>(p);
  } else if (per_lane <= 8) {
    LayerNormKernel<X, R, O, 8><<<blocks, threads, 0, stream>>>(p);
  } else if (per_lane <= 16) {
    LayerNormKernel<X, R, O, 16><<<blocks, threads, 0, stream>>>(p);
  } else {
    LayerNormKernel<X, R, O, 32><<<blocks, threads, 0, stream>>>(p);
  }
}

}  // namespace

void LaunchLayerNorm(const LayerNormParams& p, GpuStream stream) {
  if (p.rows == 0) return;
  OASR_DISPATCH_FLOAT(p.x_dtype, X, {
    OASR_DISPATCH_FLOAT(p.out_dtype, O, {
      if (p.residual == nullptr) {
        Launch<X, X, O>(p, stream);
      } else {
        OASR_DISPATCH_FLOAT(p.residual_dtype, R, { Launch<X, R, O>(p, stream); });
      }
    });
  });
  OASR_CUDA_LAUNCH_CHECK();
}

}  // namespace oasr::kernels
