#include <type_traits>

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

// The fast path for 16-bit storage (the model's dtype on a GPU): a row is
// d / 2 threads, each owning two adjacent channels (4-byte loads and
// stores), with the taps and the whole window -- the left context and up to
// kMaxChunk GLU outputs -- in registers, so the conv reads no shared memory
// and loads no taps per row. The layer norm's per-frame sums are reduced
// across a warp for all frames at once (a butterfly that halves the values
// each lane holds at every step), then across the row's warps in shared
// memory. Rows with K taps (a compile-time constant), chunk <= kMaxChunk and
// d a multiple of 64 take it; the rest, and float32, the kernel above.
constexpr int kMaxChunk = 16;
constexpr int kFastThreads = 256;

template <typename T>
struct Pair;
template <>
struct Pair<__nv_bfloat16> {
  using Type = __nv_bfloat162;
  static __device__ __forceinline__ float2 ToFloat2(Type v) { return __bfloat1622float2(v); }
  static __device__ __forceinline__ Type FromFloat2(float2 v) { return __float22bfloat162_rn(v); }
};
template <>
struct Pair<__half> {
  using Type = __half2;
  static __device__ __forceinline__ float2 ToFloat2(Type v) { return __half22float2(v); }
  static __device__ __forceinline__ Type FromFloat2(float2 v) { return __float22half2_rn(v); }
};

// v[0 .. kMaxChunk) of every lane summed over the warp: lane l ends with the
// sum of value (l >> 1) in v[0].
template <int kHalf, int kOffset>
__device__ __forceinline__ void HalveFrames(float (&v)[kMaxChunk], int lane) {
  const bool upper = (lane & kOffset) != 0;
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    const float send = upper ? v[i] : v[i + kHalf];
    const float keep = upper ? v[i + kHalf] : v[i];
    v[i] = keep + __shfl_xor_sync(0xffffffffu, send, kOffset);
  }
}

__device__ __forceinline__ void WarpSumFrames(float (&v)[kMaxChunk], int lane) {
  static_assert(kMaxChunk == 16, "the butterfly below halves 16 values");
  HalveFrames<8, 16>(v, lane);
  HalveFrames<4, 8>(v, lane);
  HalveFrames<2, 4>(v, lane);
  HalveFrames<1, 2>(v, lane);
  v[0] += __shfl_xor_sync(0xffffffffu, v[0], 1);
}

// The per-frame totals of every thread's v over its row: the warps' sums
// through `scratch` ([rows per block][warps per row][kMaxChunk]) into
// `total` ([kMaxChunk] of this row), which every thread then reads.
__device__ __forceinline__ void RowSumFrames(float (&v)[kMaxChunk], float* scratch, float* total,
                                             int row_in_block, int warp_in_row, int warps_per_row,
                                             int lane, int tid_in_row) {
  WarpSumFrames(v, lane);
  if ((lane & 1) == 0) {
    scratch[(row_in_block * warps_per_row + warp_in_row) * kMaxChunk + (lane >> 1)] = v[0];
  }
  __syncthreads();
  if (tid_in_row < kMaxChunk) {
    float s = 0.0f;
    for (int w = 0; w < warps_per_row; ++w) {
      s += scratch[(row_in_block * warps_per_row + w) * kMaxChunk + tid_in_row];
    }
    total[tid_in_row] = s;
  }
  __syncthreads();
}

// A sigmoid within a few float ulps (the outputs are 16-bit), in a few
// instructions rather than expf's and a division's dozens.
__device__ __forceinline__ float FastSigmoid(float x) { return __frcp_rn(1.0f + __expf(-x)); }

template <typename T, int K>
__global__ void __launch_bounds__(kFastThreads, 2) CausalConvPairKernel(CausalConvParams p) {
  using P = Pair<T>;
  using T2 = typename P::Type;
  constexpr int k1 = K - 1;
  constexpr int W = k1 + kMaxChunk;  // The window: left context, then the chunk.
  __shared__ float scratch[kFastThreads / 32 * kMaxChunk];
  __shared__ float sum_mean[kFastThreads / 32 * kMaxChunk];
  __shared__ float sum_var[kFastThreads / 32 * kMaxChunk];
  const int d = p.d;
  const float inv_d = 1.0f / static_cast<float>(d);
  const int threads_per_row = d / 2;
  const int rows_per_block = kFastThreads / threads_per_row;
  const int row_in_block = threadIdx.x / threads_per_row;
  const int tid_in_row = threadIdx.x % threads_per_row;
  const int b = blockIdx.x * rows_per_block + row_in_block;
  const bool live = row_in_block < rows_per_block && b < p.batch;
  const int c = 2 * tid_in_row;
  const int lane = threadIdx.x & 31;
  const int warps_per_row = threads_per_row / 32;
  const int warp_in_row = tid_in_row / 32;
  const int frames = live ? p.frames[b] : 0;

  float2 taps[K];
#pragma unroll
  for (int j = 0; j < K; ++j) taps[j] = *reinterpret_cast<const float2*>(p.taps + j * d + c);
  const float2 g0 = *reinterpret_cast<const float2*>(p.glu0 + c);
  const float2 bias = *reinterpret_cast<const float2*>(p.tap_bias + c);

  float2 g[W];
  T2* state = nullptr;
  if (live) {
    state = reinterpret_cast<T2*>(static_cast<T*>(p.state) +
                                  static_cast<int64_t>(p.slots[b]) * p.state_slot_stride + c);
    const T* in = static_cast<const T*>(p.in) + static_cast<int64_t>(b) * p.chunk * p.ld_in + c;
    // Every load first, so that all of them are in flight at once (their
    // uses below would otherwise order them one after another).
    T2 raw_state[k1], raw_a[kMaxChunk], raw_gate[kMaxChunk];
#pragma unroll
    for (int j = 0; j < k1; ++j) raw_state[j] = state[j * (d / 2)];
#pragma unroll
    for (int t = 0; t < kMaxChunk; ++t) {
      if (t < frames) {
        raw_a[t] = *reinterpret_cast<const T2*>(in + t * p.ld_in);
        raw_gate[t] = *reinterpret_cast<const T2*>(in + t * p.ld_in + d);
      }
    }
#pragma unroll
    for (int j = 0; j < k1; ++j) {
      const float2 s = P::ToFloat2(raw_state[j]);
      g[j] = make_float2(s.x + g0.x, s.y + g0.y);
    }
#pragma unroll
    for (int t = 0; t < kMaxChunk; ++t) {
      if (t < frames) {
        const float2 a = P::ToFloat2(raw_a[t]);
        const float2 gate = P::ToFloat2(raw_gate[t]);
        g[k1 + t] = make_float2(a.x * FastSigmoid(gate.x), a.y * FastSigmoid(gate.y));
      } else {
        g[k1 + t] = make_float2(0.0f, 0.0f);
      }
    }
    // The new context: the last k1 of the k1 + frames GLU outputs. A full
    // chunk (the common case) with constant indices; a short one picks its
    // rows by comparison, so that g stays in registers.
    if (frames == kMaxChunk) {
#pragma unroll
      for (int j = 0; j < k1; ++j) {
        state[j * (d / 2)] =
            P::FromFloat2(make_float2(g[kMaxChunk + j].x - g0.x, g[kMaxChunk + j].y - g0.y));
      }
    } else {
#pragma unroll
      for (int j = 0; j < k1; ++j) {
        float2 v = g[j];
#pragma unroll
        for (int f = 1; f < kMaxChunk; ++f) v = f == frames ? g[f + j] : v;
        state[j * (d / 2)] = P::FromFloat2(make_float2(v.x - g0.x, v.y - g0.y));
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < W; ++i) g[i] = make_float2(0.0f, 0.0f);
  }
  // The conv: y[t] replaces g[t], which no later output reads.
#pragma unroll
  for (int t = 0; t < kMaxChunk; ++t) {
    float2 acc = bias;
#pragma unroll
    for (int j = 0; j < K; ++j) {
      acc.x = fmaf(taps[j].x, g[t + j].x, acc.x);
      acc.y = fmaf(taps[j].y, g[t + j].y, acc.y);
    }
    g[t] = acc;
  }
  const float2 scale = *reinterpret_cast<const float2*>(p.norm_scale + c);
  const float2 shift = *reinterpret_cast<const float2*>(p.norm_shift + c);
  // Per frame y * scale + shift, or with the layer norm (y - mean) * inv *
  // scale + shift: the row's means and inverse deviations in shared memory.
  float* mean = nullptr;
  float* inv = nullptr;
  if (p.layer_norm) {
    // Mean, then the variance about it, per frame over the row's d channels.
    mean = sum_mean + row_in_block * kMaxChunk;
    inv = sum_var + row_in_block * kMaxChunk;
    float v[kMaxChunk];
#pragma unroll
    for (int t = 0; t < kMaxChunk; ++t) v[t] = g[t].x + g[t].y;
    RowSumFrames(v, scratch, mean, row_in_block, warp_in_row, warps_per_row, lane, tid_in_row);
#pragma unroll
    for (int t = 0; t < kMaxChunk; ++t) {
      const float m = mean[t] * inv_d;
      const float a = g[t].x - m, e = g[t].y - m;
      v[t] = a * a + e * e;
    }
    RowSumFrames(v, scratch, inv, row_in_block, warp_in_row, warps_per_row, lane, tid_in_row);
  }
  if (!live) return;
  T* out = static_cast<T*>(p.out) + static_cast<int64_t>(b) * p.chunk * p.ldo + c;
#pragma unroll
  for (int t = 0; t < kMaxChunk; ++t) {
    if (t >= p.chunk) break;
    float2 y = make_float2(0.0f, 0.0f);
    if (t < frames) {
      float2 mul = scale, add = shift;
      if (p.layer_norm) {
        const float m = mean[t] * inv_d;
        const float r = rsqrtf(inv[t] * inv_d + p.eps);
        mul = make_float2(r * scale.x, r * scale.y);
        add = make_float2(shift.x - m * mul.x, shift.y - m * mul.y);
      }
      y.x = fmaf(g[t].x, mul.x, add.x);
      y.y = fmaf(g[t].y, mul.y, add.y);
      y.x *= FastSigmoid(y.x);
      y.y *= FastSigmoid(y.y);
    }
    *reinterpret_cast<T2*>(out + t * p.ldo) = P::FromFloat2(y);
  }
}

// Whether the pair kernel takes `p` (T a 16-bit type).
bool PairKernelFits(const CausalConvParams& p) {
  return (p.kernel == 15 || p.kernel == 8) && p.chunk <= kMaxChunk && p.d % 64 == 0 &&
         p.d / 2 <= kFastThreads && p.ld_in % 2 == 0 && p.ldo % 2 == 0 &&
         p.state_slot_stride % 2 == 0;
}

template <typename T, int K>
void LaunchPair(const CausalConvParams& p, GpuStream stream) {
  const int rows_per_block = kFastThreads / (p.d / 2);
  const int blocks = (p.batch + rows_per_block - 1) / rows_per_block;
  CausalConvPairKernel<T, K><<<blocks, kFastThreads, 0, stream>>>(p);
}

template <typename T>
void Launch(const CausalConvParams& p, GpuStream stream) {
  if constexpr (!std::is_same_v<T, float>) {
    if (PairKernelFits(p)) {
      if (p.kernel == 15) {
        LaunchPair<T, 15>(p, stream);
      } else {
        LaunchPair<T, 8>(p, stream);
      }
      return;
    }
  }
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
