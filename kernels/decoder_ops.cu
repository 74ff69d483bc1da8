#include "kernels/cuda_common.cuh"
#include "kernels/decoder_ops.h"

namespace oasr::kernels {
namespace {

constexpr int kThreads = 128;  // SpanAttention's block: one (row, head) each.
constexpr int kWarps = 8;      // TargetLogProbs: rows per block, one warp each.

__global__ void EmbedKernel(EmbedParams p) {
  const int64_t total = p.rows * p.d;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / p.d, j = e - r * p.d;
    p.out[e] = p.table[static_cast<int64_t>(p.tokens[r]) * p.d + j] * p.scale +
               p.positions[static_cast<int64_t>(p.steps[r]) * p.d + j];
  }
}

__device__ float BlockReduce(float v, float* red, bool is_max) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = is_max ? cuda::WarpMax(v) : cuda::WarpSum(v);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < kThreads / 32 ? red[lane] : (is_max ? -INFINITY : 0.0f);
    w = is_max ? cuda::WarpMax(w) : cuda::WarpSum(w);
    if (lane == 0) red[0] = w;
  }
  __syncthreads();
  const float out = red[0];
  __syncthreads();
  return out;
}

// One block per (query row, head): the span's scores into the row's scratch,
// its softmax, then each output dimension summed over the span by several
// threads (parts of the span) and added up in shared memory.
__global__ void SpanAttentionKernel(SpanAttentionParams p) {
  extern __shared__ float smem[];
  float* q = smem;              // [dk]
  float* acc = smem + p.dk;     // [kThreads] partial sums (dk <= kThreads)
  float* red = acc + kThreads;  // [32]
  const int64_t r = blockIdx.x;
  const int h = blockIdx.y;
  const int64_t off = static_cast<int64_t>(h) * p.dk;
  const int64_t begin = p.key_begin[r], end = p.key_end[r];
  float* s = p.scores + (r * p.heads + h) * p.score_ld;
  for (int i = threadIdx.x; i < p.dk; i += kThreads) q[i] = p.q[r * p.ldq + off + i];
  __syncthreads();
  float mx = -INFINITY;
  for (int64_t j = begin + threadIdx.x; j < end; j += kThreads) {
    const float* k = p.k + j * p.ldkv + off;
    float dot = 0.0f;
    for (int i = 0; i < p.dk; ++i) dot = fmaf(q[i], k[i], dot);
    dot *= p.scale;
    s[j - begin] = dot;
    mx = fmaxf(mx, dot);
  }
  mx = BlockReduce(mx, red, true);
  float sum = 0.0f;
  for (int64_t j = begin + threadIdx.x; j < end; j += kThreads) {
    const float e = expf(s[j - begin] - mx);
    s[j - begin] = e;
    sum += e;
  }
  const float inv = 1.0f / BlockReduce(sum, red, false);  // Also orders the writes above.
  float* o = p.out + r * p.ldo + off;
  if (p.dk <= kThreads) {
    const int parts = kThreads / p.dk;
    const int i = threadIdx.x % p.dk, part = threadIdx.x / p.dk;
    float a = 0.0f;
    if (part < parts) {
      for (int64_t j = begin + part; j < end; j += parts)
        a = fmaf(s[j - begin], p.v[j * p.ldkv + off + i], a);
    }
    acc[threadIdx.x] = a;
    __syncthreads();
    if (part == 0) {
      float t = 0.0f;
      for (int k = 0; k < parts; ++k) t += acc[k * p.dk + i];
      o[i] = t * inv;
    }
  } else {
    for (int i = threadIdx.x; i < p.dk; i += kThreads) {
      float a = 0.0f;
      for (int64_t j = begin; j < end; ++j) a = fmaf(s[j - begin], p.v[j * p.ldkv + off + i], a);
      o[i] = a * inv;
    }
  }
}

__global__ void TargetLogProbsKernel(TargetLogProbParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= p.rows) return;
  const float* x = p.logits + row * p.ld;
  float mx = -INFINITY;
  for (int64_t i = lane; i < p.n; i += 32) mx = fmaxf(mx, x[i]);
  mx = cuda::WarpMax(mx);
  float sum = 0.0f;
  for (int64_t i = lane; i < p.n; i += 32) sum += expf(x[i] - mx);
  sum = cuda::WarpSum(sum);
  if (lane == 0) p.out[row] = x[p.targets[row]] - (mx + logf(sum));
}

__global__ void CopyRowRunsKernel(CopyRowRunsParams p) {
  const int32_t* run = p.runs + 3 * static_cast<int64_t>(blockIdx.x);
  const float* src = p.src + static_cast<int64_t>(run[0]) * p.width;
  float* dst = p.dst + static_cast<int64_t>(run[1]) * p.width;
  const int64_t n = static_cast<int64_t>(run[2]) * p.width;
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x) dst[e] = src[e];
}

}  // namespace

void LaunchEmbedTokens(const EmbedParams& p, GpuStream stream) {
  if (p.rows == 0) return;
  EmbedKernel<<<cuda::Blocks(p.rows * p.d, 256), 256, 0, stream>>>(p);
  OASR_CUDA_LAUNCH_CHECK();
}

void LaunchSpanAttention(const SpanAttentionParams& p, GpuStream stream) {
  if (p.rows == 0) return;
  const dim3 grid(static_cast<unsigned>(p.rows), static_cast<unsigned>(p.heads));
  const size_t smem = (static_cast<size_t>(p.dk) + kThreads + 32) * sizeof(float);
  SpanAttentionKernel<<<grid, kThreads, smem, stream>>>(p);
  OASR_CUDA_LAUNCH_CHECK();
}

void LaunchTargetLogProbs(const TargetLogProbParams& p, GpuStream stream) {
  if (p.rows == 0) return;
  const int blocks = static_cast<int>((p.rows + kWarps - 1) / kWarps);
  TargetLogProbsKernel<<<blocks, 32 * kWarps, 0, stream>>>(p);
  OASR_CUDA_LAUNCH_CHECK();
}

void LaunchCopyRowRuns(const CopyRowRunsParams& p, GpuStream stream) {
  if (p.num_runs == 0) return;
  CopyRowRunsKernel<<<static_cast<unsigned>(p.num_runs), 256, 0, stream>>>(p);
  OASR_CUDA_LAUNCH_CHECK();
}

}  // namespace oasr::kernels
