#include "kernels/causal_conv.h"
#include "kernels/cuda_common.cuh"

namespace oasr::kernels {
namespace {

using cuda::FromFloat;
using cuda::ToFloat;

// One block per row, one thread per channel. Shared memory holds g, the left
// context then the chunk's GLU outputs, [k1 + chunk][d] floats; the conv
// output of frame t overwrites g[t] once frame t + 1 no longer needs it
// (output t reads g[t .. t + k1]), so the same buffer then feeds the norm.
template <typename T>
__global__ void CausalConvKernel(CausalConvParams p) {
  extern __shared__ float smem[];
  float* taps = smem;  // [kernel][d]
  float* g = smem + static_cast<int64_t>(p.kernel) * p.d;
  for (int i = threadIdx.x; i < p.kernel * p.d; i += blockDim.x) taps[i] = p.taps[i];
  __syncthreads();
  const int b = blockIdx.x;
  const int c = threadIdx.x;
  const int d = p.d, k1 = p.kernel - 1, chunk = p.chunk;
  const int frames = p.frames[b];
  T* state = static_cast<T*>(p.state) + static_cast<int64_t>(p.slots[b]) * p.state_slot_stride;
  const T* in = static_cast<const T*>(p.in) + static_cast<int64_t>(b) * chunk * p.ld_in;
  T* out = static_cast<T*>(p.out) + static_cast<int64_t>(b) * chunk * p.ldo;
  if (c < d) {
    const float g0 = p.glu0[c];
    for (int j = 0; j < k1; ++j) g[j * d + c] = ToFloat(state[j * d + c]) + g0;
    for (int t = 0; t < frames; ++t) {
      const float a = ToFloat(in[t * p.ld_in + c]);
      const float gate = ToFloat(in[t * p.ld_in + d + c]);
      g[(k1 + t) * d + c] = a * cuda::Sigmoid(gate);
    }
    // The new context: the last k1 of the k1 + frames GLU outputs (read by
    // this thread only, so in place).
    for (int j = 0; j < k1; ++j) state[j * d + c] = FromFloat<T>(g[(frames + j) * d + c] - g0);
    const float bias = p.tap_bias[c];
    for (int t = 0; t < frames; ++t) {
      float acc = bias;
      for (int j = 0; j <= k1; ++j) acc += taps[j * d + c] * g[(t + j) * d + c];
      g[t * d + c] = acc;
    }
    if (!p.layer_norm) {
      const float scale = p.norm_scale[c], shift = p.norm_shift[c];
      for (int t = 0; t < frames; ++t) {
        const float y = g[t * d + c] * scale + shift;
        out[t * p.ldo + c] = FromFloat<T>(y * cuda::Sigmoid(y));
      }
    }
    for (int t = frames; t < chunk; ++t) out[t * p.ldo + c] = FromFloat<T>(0.0f);
  }
  if (!p.layer_norm) return;
  __syncthreads();
  // Layer norm per frame: one warp per frame.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int t = warp; t < frames; t += warps) {
    const float* y = g + t * d;
    float sum = 0.0f;
    for (int i = lane; i < d; i += 32) sum += y[i];
    const float mean = cuda::WarpSum(sum) / d;
    float sq = 0.0f;
    for (int i = lane; i < d; i += 32) {
      const float v = y[i] - mean;
      sq += v * v;
    }
    const float inv = rsqrtf(cuda::WarpSum(sq) / d + p.eps);
    for (int i = lane; i < d; i += 32) {
      const float v = (y[i] - mean) * inv * p.norm_scale[i] + p.norm_shift[i];
      out[t * p.ldo + i] = FromFloat<T>(v * cuda::Sigmoid(v));
    }
  }
}

template <typename T>
void Launch(const CausalConvParams& p, GpuStream stream) {
  const int threads = (p.d + 31) / 32 * 32;
  const size_t smem = static_cast<size_t>(2 * p.kernel - 1 + p.chunk) * p.d * sizeof(float);
  static size_t raised = 48 << 10;  // Per instantiation: the default limit.
  if (smem > raised) {
    OASR_CUDA_CHECK(cudaFuncSetAttribute(
        CausalConvKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    raised = smem;
  }
  CausalConvKernel<T><<<p.batch, threads, smem, stream>>>(p);
}

}  // namespace

void LaunchCausalConv(const CausalConvParams& p, GpuStream stream) {
  if (p.batch == 0) return;
  OASR_DISPATCH_FLOAT(p.dtype, T, { Launch<T>(p, stream); });
  OASR_CUDA_LAUNCH_CHECK();
}

}  // namespace oasr::kernels
