// The tensor-core path of PagedAttention for 16-bit storage (bfloat16,
// float16) and head dims that are multiples of 16: one warp per (row, head),
// mma.sync m16n8k16 with float32 accumulation for both score terms and for
// P V, an online softmax over tiles of 16 keys held in registers (the score
// fragments become the P V operands without a trip through shared memory,
// as FlashAttention-2 does). The tiles are double-buffered: the next tile's
// K, V and position rows are in flight (cp.async) while the warp computes on
// the current one. Each load instruction of the warp moves whole rows (32
// lanes x 16 bytes: 512 contiguous bytes, four keys' rows at d_k = 64), not
// 16 bytes of 32 different rows. V's fragments come out transposed through
// ldmatrix.trans. With a float8 pool (kFp8) the history's rows arrive as
// e4m3 bytes at the tail of their 16-bit rows and each lane widens the
// chunks it copied before the tile is used; the chunk's K/V are rounded to
// e4m3 as they go into the pool. Included by rel_pos_attention.cu only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>

#include "kernels/cuda_common.cuh"
#include "kernels/rel_pos_attention.h"

namespace oasr::kernels {

// linear_pos(pe[pos]) for column e of `head`, from the sinusoid (the
// reference's float32 angle, sin/cos in float64) and linear_pos: the rare
// path for positions past the table.
__device__ inline float ProjectPosition(const float* linear_pos, int d, int dk, int head, int e,
                                        int64_t pos) {
  const double step = -log(10000.0) / d;
  const float fpos = static_cast<float>(pos);
  const float* w = linear_pos + static_cast<int64_t>(head * dk + e) * d;
  float acc = 0.0f;
  for (int i = 0; i < d / 2; ++i) {
    const float freq = static_cast<float>(exp(static_cast<double>(2 * i) * step));
    const double angle = static_cast<double>(fpos * freq);
    double s, c;
    sincos(angle, &s, &c);
    acc += w[2 * i] * static_cast<float>(s) + w[2 * i + 1] * static_cast<float>(c);
  }
  return acc;
}

namespace mma_attention {

constexpr int kQueries = 16;  // The mma's M: a chunk of at most 16 frames.
constexpr int kKeys = 16;     // Keys per tile: the K of one P V mma.
constexpr int kStages = 2;    // Tiles in flight per warp.
constexpr int kWarps = 4;     // (row, head) items per block.

// One tile of 16 keys: their K, position and V rows, row-major. A float8
// row's kDk bytes arrive at byte kFp8At of its K (V) row, 16-byte aligned.
template <int kDk>
struct Tile {
  static constexpr int kRow = kDk + 8;  // Row stride in elements (16-byte aligned, no conflicts).
  static constexpr int kFp8At = 2 * kRow - kDk;
  uint16_t k[kKeys * kRow];
  uint16_t p[kKeys * kRow];
  uint16_t v[kKeys * kRow];
};
template <int kDk>
struct WarpSmem {
  Tile<kDk> stage[kStages];
};

template <typename T>
__device__ __forceinline__ uint16_t Bits(T x) {
  return *reinterpret_cast<uint16_t*>(&x);
}
__device__ __forceinline__ uint32_t Load32(const uint16_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}
template <typename T>
__device__ __forceinline__ float2 Unpack(uint32_t v) {
  T lo, hi;
  *reinterpret_cast<uint16_t*>(&lo) = static_cast<uint16_t>(v & 0xffffu);
  *reinterpret_cast<uint16_t*>(&hi) = static_cast<uint16_t>(v >> 16);
  return make_float2(cuda::ToFloat(lo), cuda::ToFloat(hi));
}

// Eight T values (one 16-byte chunk) as eight e4m3 bytes, and back:
// round to nearest even, saturating (host: FloatToFloat8E4M3).
template <typename T>
__device__ __forceinline__ uint2 ToFp8x8(uint4 v) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t b[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    b[i] = __nv_cvt_float2_to_fp8x2(Unpack<T>(w[i]), __NV_SATFINITE, __NV_E4M3);
  }
  return make_uint2(b[0] | (b[1] << 16), b[2] | (b[3] << 16));
}
template <typename T>
__device__ __forceinline__ uint4 FromFp8x8(uint2 v) {
  const uint32_t in[2] = {v.x, v.y};
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const auto pair = static_cast<__nv_fp8x2_storage_t>((in[i / 2] >> (16 * (i % 2))) & 0xffffu);
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
    if constexpr (std::is_same_v<T, __half>) {
      w[i] = static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
    } else {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
      w[i] = cuda::PackPair<T>(f.x, f.y);  // Exact: e4m3 values are bfloat16 values.
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

template <typename T, int kDk, bool kFp8>
__device__ void AttendOne(const PagedAttentionParams& p, WarpSmem<kDk>& s, int b, int head,
                          int lane) {
  using S = Tile<kDk>;
  constexpr int kVec = 8;              // Elements per 16-byte load.
  constexpr int kChunks = kDk / kVec;  // 16-byte chunks of a row (even: kDk % 16 == 0).
  const int g = lane >> 2, t = lane & 3;
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
  uint8_t* k8 = static_cast<uint8_t*>(p.k_pool);
  uint8_t* v8 = static_cast<uint8_t*>(p.v_pool);
  const T* qkv = static_cast<const T*>(p.qkv) + static_cast<int64_t>(b) * p.chunk * p.ld_qkv;
  T* out = static_cast<T*>(p.out) + static_cast<int64_t>(b) * p.chunk * p.ldo + head * kDk;
  const T* pos_table = static_cast<const T*>(p.pos_table);
  auto pool_row = [&](int pos) {
    return ((static_cast<int64_t>(__ldg(table + pos / bs)) * bs + pos % bs) * heads + head) * kDk;
  };
  // Starts the copies of the keys [start, start + 16) into `tile`, lane i
  // taking 16-byte chunks i, i + 32, ... of the tile's rows (so that a warp's
  // load reads consecutive chunks of a row, then the next key's): the
  // history's K and V from the pool, the chunk's own from its projections
  // (the same values the pool receives below), the position row from the
  // table; zeros past the last key (never NaN into P V).
  auto load_tile = [&](S& tile, int start) {
#pragma unroll
    for (int i = 0; i < kChunks / 2; ++i) {
      const int idx = lane + 32 * i;
      const int key = idx / kChunks, e = (idx % kChunks) * kVec;
      const int pos = start + key;
      uint16_t* ks = tile.k + key * S::kRow + e;
      uint16_t* ps = tile.p + key * S::kRow + e;
      uint16_t* vs = tile.v + key * S::kRow + e;
      if (pos >= total) {
        *reinterpret_cast<uint4*>(ks) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(ps) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(vs) = make_uint4(0, 0, 0, 0);
        continue;
      }
      if (pos < t1) {
        const int64_t at = pool_row(pos) + e;
        if constexpr (kFp8) {
          const int row = key * S::kRow * 2 + S::kFp8At + e;
          cuda::CopyAsync8(reinterpret_cast<unsigned char*>(tile.k) + row, k8 + at);
          cuda::CopyAsync8(reinterpret_cast<unsigned char*>(tile.v) + row, v8 + at);
        } else {
          cuda::CopyAsync16(ks, k_pool + at);
          cuda::CopyAsync16(vs, v_pool + at);
        }
      } else {
        const T* kg = qkv + (pos - t1) * p.ld_qkv + d + head * kDk + e;
        cuda::CopyAsync16(ks, kg);
        cuda::CopyAsync16(vs, kg + d);
      }
      const int64_t abs_pos = first_pos + pos;
      if (abs_pos < p.pos_rows) {
        cuda::CopyAsync16(ps, pos_table + abs_pos * d + head * kDk + e);
      } else {
#pragma unroll 1
        for (int j = 0; j < kVec; ++j) {
          ps[j] =
              Bits(cuda::FromFloat<T>(ProjectPosition(p.linear_pos, d, kDk, head, e + j, abs_pos)));
        }
      }
    }
  };
  // kFp8: the history chunks this lane copied into `tile` (keys from
  // `start`), widened in place once they have landed: all read, then all
  // written (a row's bytes tail overlaps its 16-bit head).
  auto widen_tile = [&](S& tile, int start) {
    uint2 kw[kChunks / 2], vw[kChunks / 2];
#pragma unroll
    for (int i = 0; i < kChunks / 2; ++i) {
      const int idx = lane + 32 * i;
      const int key = idx / kChunks, e = (idx % kChunks) * kVec;
      if (start + key >= t1) continue;
      const int row = key * S::kRow * 2 + S::kFp8At + e;
      kw[i] = *reinterpret_cast<const uint2*>(reinterpret_cast<const unsigned char*>(tile.k) + row);
      vw[i] = *reinterpret_cast<const uint2*>(reinterpret_cast<const unsigned char*>(tile.v) + row);
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < kChunks / 2; ++i) {
      const int idx = lane + 32 * i;
      const int key = idx / kChunks, e = (idx % kChunks) * kVec;
      if (start + key >= t1) continue;
      *reinterpret_cast<uint4*>(tile.k + key * S::kRow + e) = FromFp8x8<T>(kw[i]);
      *reinterpret_cast<uint4*>(tile.v + key * S::kRow + e) = FromFp8x8<T>(vw[i]);
    }
  };
  // The first two tiles go out before anything else.
  load_tile(s.stage[0], 0);
  cuda::CommitAsync();
  if (kKeys < total) load_tile(s.stage[1], kKeys);
  cuda::CommitAsync();

  // The chunk's keys and values into the pool (lane i: 16-byte chunks i,
  // i + 32, ... of the frames' rows), and zeros for its output rows past the
  // frames.
  for (int idx = lane; idx < c * kChunks; idx += 32) {
    const int i = idx / kChunks, e = (idx % kChunks) * kVec;
    const int64_t dst = pool_row(t1 + i) + e;
    const T* kq = qkv + i * p.ld_qkv + d + head * kDk + e;
    if constexpr (kFp8) {
      *reinterpret_cast<uint2*>(k8 + dst) = ToFp8x8<T>(*reinterpret_cast<const uint4*>(kq));
      *reinterpret_cast<uint2*>(v8 + dst) = ToFp8x8<T>(*reinterpret_cast<const uint4*>(kq + d));
    } else {
      *reinterpret_cast<uint4*>(k_pool + dst) = *reinterpret_cast<const uint4*>(kq);
      *reinterpret_cast<uint4*>(v_pool + dst) = *reinterpret_cast<const uint4*>(kq + d);
    }
  }
  for (int idx = lane; idx < (p.chunk - c) * (kDk / 2); idx += 32) {
    const int i = c + idx / (kDk / 2), e = 2 * (idx % (kDk / 2));
    *reinterpret_cast<uint32_t*>(out + i * p.ldo + e) = 0u;
  }

  // The queries with their two biases as the A fragments of every k-step,
  // straight from the projections: rows g and g + 8, columns kk * 16 + 2t
  // (+ 8); zero rows past the frames.
  uint32_t qu[kDk / 16][4], qv[kDk / 16][4];
  {
    const T* q = qkv + head * kDk;
    const float* bu = p.pos_bias_u + head * kDk;
    const float* bv = p.pos_bias_v + head * kDk;
#pragma unroll
    for (int kk = 0; kk < kDk / 16; ++kk) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = g + (r & 1) * 8;
        const int col = kk * 16 + 2 * t + (r >> 1) * 8;
        const float2 x =
            row < c ? Unpack<T>(*reinterpret_cast<const uint32_t*>(q + row * p.ld_qkv + col))
                    : make_float2(0.0f, 0.0f);
        const float2 u = *reinterpret_cast<const float2*>(bu + col);
        const float2 w = *reinterpret_cast<const float2*>(bv + col);
        qu[kk][r] = cuda::PackPair<T>(x.x + u.x, x.y + u.y);
        qv[kk][r] = cuda::PackPair<T>(x.x + w.x, x.y + w.y);
      }
    }
  }

  constexpr int kOut = kDk / 8;  // Output n-blocks of 8 dims.
  float o[kOut][4];
#pragma unroll
  for (int nb = 0; nb < kOut; ++nb) o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // Rows g and g + 8.
  const float scale = rsqrtf(static_cast<float>(kDk));

  for (int start = 0, tile = 0; start < total; start += kKeys, ++tile) {
    const int n = min(kKeys, total - start);
    S& cur = s.stage[tile & 1];
    cuda::WaitAsync<1>();  // This tile's group; the next one's may be in flight.
    if constexpr (kFp8) {
      if (start < t1) widen_tile(cur, start);
    }
    __syncwarp();

    // Scores for the 4 n-blocks of 8 keys: (q + u) k + (q + v) p.
    float sc[kKeys / 8][4];
#pragma unroll
    for (int nb = 0; nb < kKeys / 8; ++nb) sc[nb][0] = sc[nb][1] = sc[nb][2] = sc[nb][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kDk / 16; ++kk) {
#pragma unroll
      for (int nb = 0; nb < kKeys / 8; ++nb) {
        const uint16_t* kr = cur.k + (nb * 8 + g) * S::kRow + kk * 16 + t * 2;
        const uint16_t* pr = cur.p + (nb * 8 + g) * S::kRow + kk * 16 + t * 2;
        cuda::Mma<T>(sc[nb], qu[kk], Load32(kr), Load32(kr + 8));
        cuda::Mma<T>(sc[nb], qv[kk], Load32(pr), Load32(pr + 8));
      }
    }
    // Online softmax per row (the 4 lanes of a group share rows g and g + 8).
    float tmax0 = -INFINITY, tmax1 = -INFINITY;
#pragma unroll
    for (int nb = 0; nb < kKeys / 8; ++nb) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool valid = nb * 8 + t * 2 + e < n;
        sc[nb][e] = valid ? sc[nb][e] * scale : -INFINITY;
        sc[nb][2 + e] = valid ? sc[nb][2 + e] * scale : -INFINITY;
        tmax0 = fmaxf(tmax0, sc[nb][e]);
        tmax1 = fmaxf(tmax1, sc[nb][2 + e]);
      }
    }
    for (int o2 = 1; o2 < 4; o2 <<= 1) {
      tmax0 = fmaxf(tmax0, __shfl_xor_sync(0xffffffffu, tmax0, o2));
      tmax1 = fmaxf(tmax1, __shfl_xor_sync(0xffffffffu, tmax1, o2));
    }
    const float n0 = fmaxf(m0, tmax0), n1 = fmaxf(m1, tmax1);
    const float r0 = expf(m0 - n0), r1 = expf(m1 - n1);  // 0 on the first tile.
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int nb = 0; nb < kKeys / 8; ++nb) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        sc[nb][e] = expf(sc[nb][e] - n0);
        sc[nb][2 + e] = expf(sc[nb][2 + e] - n1);
        sum0 += sc[nb][e];
        sum1 += sc[nb][2 + e];
      }
    }
    for (int o2 = 1; o2 < 4; o2 <<= 1) {
      sum0 += __shfl_xor_sync(0xffffffffu, sum0, o2);
      sum1 += __shfl_xor_sync(0xffffffffu, sum1, o2);
    }
    l0 = l0 * r0 + sum0;
    l1 = l1 * r1 + sum1;
    m0 = n0;
    m1 = n1;
#pragma unroll
    for (int nb = 0; nb < kOut; ++nb) {
      o[nb][0] *= r0;
      o[nb][1] *= r0;
      o[nb][2] *= r1;
      o[nb][3] *= r1;
    }
    // P V: the probabilities of keys [kk * 16, kk * 16 + 16) as A fragments,
    // V's fragments two n-blocks at a time through ldmatrix.trans (lane i:
    // key kk * 16 + i % 16, dims of n-block 2 nb2 + i / 16).
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      uint32_t a[4];
      a[0] = cuda::PackPair<T>(sc[2 * kk][0], sc[2 * kk][1]);
      a[1] = cuda::PackPair<T>(sc[2 * kk][2], sc[2 * kk][3]);
      a[2] = cuda::PackPair<T>(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
      a[3] = cuda::PackPair<T>(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
      for (int nb2 = 0; nb2 < kOut / 2; ++nb2) {
        uint32_t v[4];
        cuda::LoadMatrixT4(cur.v + (kk * 16 + (lane & 15)) * S::kRow + (2 * nb2 + (lane >> 4)) * 8,
                           v);
        cuda::Mma<T>(o[2 * nb2], a, v[0], v[1]);
        cuda::Mma<T>(o[2 * nb2 + 1], a, v[2], v[3]);
      }
    }
    __syncwarp();  // Every lane is done with this tile: it takes the one after next.
    if (start + 2 * kKeys < total) load_tile(s.stage[tile & 1], start + 2 * kKeys);
    cuda::CommitAsync();  // Empty past the last tile: the wait above counts groups.
  }
  const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
#pragma unroll
  for (int nb = 0; nb < kOut; ++nb) {
    const int col = nb * 8 + t * 2;
    if (g < c) {
      *reinterpret_cast<uint32_t*>(out + g * p.ldo + col) =
          cuda::PackPair<T>(o[nb][0] * inv0, o[nb][1] * inv0);
    }
    if (g + 8 < c) {
      *reinterpret_cast<uint32_t*>(out + (g + 8) * p.ldo + col) =
          cuda::PackPair<T>(o[nb][2] * inv1, o[nb][3] * inv1);
    }
  }
}

template <typename T, int kDk, bool kFp8>
__global__ void __launch_bounds__(32 * kWarps, kDk <= 64 ? 4 : 2)
    Kernel(PagedAttentionParams p, int items) {
  extern __shared__ __align__(16) unsigned char raw[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int item = blockIdx.x * kWarps + warp;
  if (item >= items) return;
  auto* s = reinterpret_cast<WarpSmem<kDk>*>(raw) + warp;
  AttendOne<T, kDk, kFp8>(p, *s, item / p.heads, item % p.heads, lane);
}

template <typename T, int kDk, bool kFp8>
void Launch(const PagedAttentionParams& p, GpuStream stream) {
  const int items = p.batch * p.heads;
  const size_t smem = sizeof(WarpSmem<kDk>) * kWarps;
  static size_t raised = 48 << 10;  // Per instantiation: the default limit.
  if (smem > raised) {
    OASR_CUDA_CHECK(cudaFuncSetAttribute(
        Kernel<T, kDk, kFp8>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    raised = smem;
  }
  Kernel<T, kDk, kFp8><<<(items + kWarps - 1) / kWarps, 32 * kWarps, smem, stream>>>(p, items);
}

}  // namespace mma_attention
}  // namespace oasr::kernels
