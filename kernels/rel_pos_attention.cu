#include "kernels/cuda_common.cuh"
#include "kernels/rel_pos_attention.h"
#include "kernels/rel_pos_attention_mma.cuh"

namespace oasr::kernels {
namespace {

using cuda::FromFloat;
using cuda::ToFloat;

constexpr int kQueries = 16;   // Queries (chunk frames) per block, at most.
constexpr int kThreads = 128;  // 8 threads per query row.

// Shared memory of one (row, head) block; rows padded by one float so the
// 4 query rows of a warp, and the 8 keys a thread group reads, fall in
// different banks.
template <int kDk, int kKeys>
struct Smem {
  static constexpr int kPad = kDk + 1;
  float q_u[kQueries][kPad];
  float q_v[kQueries][kPad];
  float k[kKeys][kPad];
  float p[kKeys][kPad];
  float v[kKeys][kPad];
  float prob[kQueries][kKeys];
};

// One block per (row, head). First the row's new K/V rows of this head go to
// the pool; then an online softmax over key tiles read back from the pool
// through the block table, with the position rows from the table (or
// projected past it).
template <typename T, typename P, int kDk, int kKeys>
__global__ void __launch_bounds__(kThreads) PagedAttentionKernel(PagedAttentionParams p) {
  constexpr int kPerThreadKeys = kKeys / 8;
  constexpr int kPerThreadDims = kDk / 8;
  __shared__ Smem<kDk, kKeys> s;
  const int b = blockIdx.x, head = blockIdx.y, tid = threadIdx.x;
  const int heads = p.heads, d = heads * kDk;
  const int32_t slot = p.slots[b];
  const int t1 = p.cache_lens[slot];
  const int c = p.frames[b];
  const int total = t1 + c;
  const int64_t first_pos = static_cast<int64_t>(p.offsets[b]) - t1;
  const int32_t* table = p.block_table + static_cast<int64_t>(slot) * p.table_stride;
  const int bs = p.block_size;
  T* k_pool = static_cast<T*>(p.k_pool);
  T* v_pool = static_cast<T*>(p.v_pool);
  const T* qkv = static_cast<const T*>(p.qkv) + static_cast<int64_t>(b) * p.chunk * p.ld_qkv;
  T* out = static_cast<T*>(p.out) + static_cast<int64_t>(b) * p.chunk * p.ldo + head * kDk;

  // The chunk's keys and values, then its queries with the two biases.
  for (int idx = tid; idx < c * kDk; idx += kThreads) {
    const int i = idx / kDk, e = idx % kDk;
    const int pos = t1 + i;
    const int64_t dst =
        ((static_cast<int64_t>(table[pos / bs]) * bs + pos % bs) * heads + head) * kDk + e;
    k_pool[dst] = qkv[i * p.ld_qkv + d + head * kDk + e];
    v_pool[dst] = qkv[i * p.ld_qkv + 2 * d + head * kDk + e];
  }
  for (int idx = tid; idx < kQueries * kDk; idx += kThreads) {
    const int i = idx / kDk, e = idx % kDk;
    const float q = i < c ? ToFloat(qkv[i * p.ld_qkv + head * kDk + e]) : 0.0f;
    s.q_u[i][e] = q + p.pos_bias_u[head * kDk + e];
    s.q_v[i][e] = q + p.pos_bias_v[head * kDk + e];
  }
  for (int idx = tid; idx < (p.chunk - c) * kDk; idx += kThreads) {
    out[(c + idx / kDk) * p.ldo + idx % kDk] = FromFloat<T>(0.0f);
  }
  __syncthreads();  // The pool writes above are read back below.

  // Thread layout: query row i = tid / 8; for scores, keys sub + 8 k; for
  // the output, dims sub * kPerThreadDims onwards.
  const int i = tid >> 3, sub = tid & 7;
  const float scale = rsqrtf(static_cast<float>(kDk));
  float m = -INFINITY, l = 0.0f;
  float acc[kPerThreadDims];
#pragma unroll
  for (int k = 0; k < kPerThreadDims; ++k) acc[k] = 0.0f;
  const P* pos_table = static_cast<const P*>(p.pos_table);

  for (int start = 0; start < total; start += kKeys) {
    const int n = min(kKeys, total - start);
    for (int idx = tid; idx < kKeys * kDk; idx += kThreads) {
      const int j = idx / kDk, e = idx % kDk;
      float kv = 0.0f, vv = 0.0f, pv = 0.0f;
      if (j < n) {
        const int pos = start + j;
        const int64_t at =
            ((static_cast<int64_t>(table[pos / bs]) * bs + pos % bs) * heads + head) * kDk + e;
        kv = ToFloat(k_pool[at]);
        vv = ToFloat(v_pool[at]);
        const int64_t abs_pos = first_pos + pos;
        pv = abs_pos < p.pos_rows ? ToFloat(pos_table[abs_pos * d + head * kDk + e])
                                  : ProjectPosition(p.linear_pos, d, kDk, head, e, abs_pos);
      }
      s.k[j][e] = kv;
      s.v[j][e] = vv;
      s.p[j][e] = pv;
    }
    __syncthreads();
    float sc[kPerThreadKeys];
    float tile_max = -INFINITY;
#pragma unroll
    for (int k = 0; k < kPerThreadKeys; ++k) {
      const int j = sub + 8 * k;
      float dot = 0.0f;
#pragma unroll 8
      for (int e = 0; e < kDk; ++e) dot += s.q_u[i][e] * s.k[j][e] + s.q_v[i][e] * s.p[j][e];
      sc[k] = j < n ? dot * scale : -INFINITY;
      tile_max = fmaxf(tile_max, sc[k]);
    }
    // The 8 threads of a row are 8 consecutive lanes.
    for (int o = 4; o > 0; o >>= 1)
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
    const float m_new = fmaxf(m, tile_max);
    const float rescale = expf(m - m_new);  // 0 on the first tile (m = -inf).
    float tile_sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerThreadKeys; ++k) {
      const float e = expf(sc[k] - m_new);
      s.prob[i][sub + 8 * k] = e;
      tile_sum += e;
    }
    for (int o = 4; o > 0; o >>= 1) tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, o);
    l = l * rescale + tile_sum;
    m = m_new;
    __syncwarp();
#pragma unroll
    for (int k = 0; k < kPerThreadDims; ++k) acc[k] *= rescale;
    for (int j = 0; j < n; ++j) {
      const float w = s.prob[i][j];
#pragma unroll
      for (int k = 0; k < kPerThreadDims; ++k) acc[k] += w * s.v[j][sub * kPerThreadDims + k];
    }
    __syncthreads();  // The tiles are reloaded next.
  }
  if (i < c) {
    const float inv = 1.0f / l;
#pragma unroll
    for (int k = 0; k < kPerThreadDims; ++k) {
      out[i * p.ldo + sub * kPerThreadDims + k] = FromFloat<T>(acc[k] * inv);
    }
  }
}

template <typename T, typename P, int kDk>
void LaunchForHeadDim(const PagedAttentionParams& p, GpuStream stream) {
  // 16-bit storage with a table in the same dtype and head dims that are
  // multiples of 16: the tensor cores.
  if constexpr (!std::is_same_v<T, float> && std::is_same_v<T, P> && kDk % 16 == 0) {
    if (p.pool_fp8) {
      mma_attention::Launch<T, kDk, true>(p, stream);
    } else {
      mma_attention::Launch<T, kDk, false>(p, stream);
    }
    return;
  }
  // Otherwise (float32, odd head dims) FMA over shared-memory tiles: key
  // tiles of 32, 16 past 64 dims (the tiles' shared memory stays static).
  constexpr int kKeys = kDk <= 64 ? 32 : 16;
  const dim3 grid(p.batch, p.heads);
  PagedAttentionKernel<T, P, kDk, kKeys><<<grid, kThreads, 0, stream>>>(p);
}

template <typename T, typename P>
void LaunchTyped(const PagedAttentionParams& p, GpuStream stream) {
  switch (p.d_k) {
    case 16:
      return LaunchForHeadDim<T, P, 16>(p, stream);
    case 24:
      return LaunchForHeadDim<T, P, 24>(p, stream);
    case 32:
      return LaunchForHeadDim<T, P, 32>(p, stream);
    case 48:
      return LaunchForHeadDim<T, P, 48>(p, stream);
    case 64:
      return LaunchForHeadDim<T, P, 64>(p, stream);
    case 80:
      return LaunchForHeadDim<T, P, 80>(p, stream);
    case 96:
      return LaunchForHeadDim<T, P, 96>(p, stream);
    case 128:
      return LaunchForHeadDim<T, P, 128>(p, stream);
    default:
      OASR_CHECK(false, "paged attention: unsupported head dim");
  }
}

}  // namespace

bool PagedAttentionCudaSupports(int d_k, int chunk) {
  const bool dims = d_k == 16 || d_k == 24 || d_k == 32 || d_k == 48 || d_k == 64 || d_k == 80 ||
                    d_k == 96 || d_k == 128;
  return dims && chunk <= kQueries;
}

void LaunchPagedAttention(const PagedAttentionParams& p, GpuStream stream) {
  if (p.batch == 0) return;
  OASR_CHECK(PagedAttentionCudaSupports(p.d_k, p.chunk), "paged attention: head dim or chunk");
  OASR_CHECK(
      !p.pool_fp8 || (p.dtype != DType::kFloat32 && p.pos_dtype == p.dtype && p.d_k % 16 == 0),
      "paged attention: a float8 pool needs the tensor-core path");
  OASR_DISPATCH_FLOAT(p.dtype, T, {
    if (p.pos_dtype == DType::kFloat32) {
      LaunchTyped<T, float>(p, stream);
    } else {
      LaunchTyped<T, T>(p, stream);
    }
  });
  OASR_CUDA_LAUNCH_CHECK();
}

}  // namespace oasr::kernels
