// The tensor-core path of PagedAttention for 16-bit storage (bfloat16,
// float16) and head dims that are multiples of 16: one warp per (row, head),
// mma.sync m16n8k16 with float32 accumulation for both score terms and for
// P V, an online softmax over tiles of 32 keys held in registers (the score
// fragments become the P V operands without a trip through shared memory,
// as FlashAttention-2 does). Each lane loads one key of a tile (its K, V and
// position rows, 16 bytes at a time) through the block table; V is stored
// transposed so its fragments are single 32-bit reads. Included by
// rel_pos_attention.cu only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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
constexpr int kKeys = 32;     // Keys per tile: one per lane.
constexpr int kWarps = 2;     // (row, head) items per block.

template <int kDk>
struct WarpSmem {
  static constexpr int kRow = kDk + 8;  // Row stride in elements (16-byte aligned, no conflicts).
  static constexpr int kVRow = kKeys + 8;  // V^T row stride.
  uint16_t q_u[kQueries * kRow];
  uint16_t q_v[kQueries * kRow];
  uint16_t k[kKeys * kRow];
  uint16_t p[kKeys * kRow];
  uint16_t vt[kDk * kVRow];
};

template <typename T>
__device__ __forceinline__ uint16_t Bits(T x) {
  return *reinterpret_cast<uint16_t*>(&x);
}
template <typename T>
__device__ __forceinline__ uint32_t Pack(float lo, float hi) {
  return static_cast<uint32_t>(Bits(cuda::FromFloat<T>(lo))) |
         (static_cast<uint32_t>(Bits(cuda::FromFloat<T>(hi))) << 16);
}
__device__ __forceinline__ uint32_t Load32(const uint16_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// d (+)= a b for one 16x8x16 tile.
template <typename T>
__device__ __forceinline__ void Mma(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// The A fragment of rows [0, 16), columns [kk * 16, kk * 16 + 16) of a
// row-major [16][kRow] tile.
template <int kRow>
__device__ __forceinline__ void LoadA(const uint16_t* m, int kk, int g, int t, uint32_t* a) {
  const uint16_t* r0 = m + g * kRow + kk * 16 + t * 2;
  const uint16_t* r1 = r0 + 8 * kRow;
  a[0] = Load32(r0);
  a[1] = Load32(r1);
  a[2] = Load32(r0 + 8);
  a[3] = Load32(r1 + 8);
}

template <typename T, int kDk>
__device__ void AttendOne(const PagedAttentionParams& p, WarpSmem<kDk>& s, int b, int head,
                          int lane) {
  using S = WarpSmem<kDk>;
  constexpr int kVec = 8;  // Elements per 16-byte load.
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
  const T* qkv = static_cast<const T*>(p.qkv) + static_cast<int64_t>(b) * p.chunk * p.ld_qkv;
  T* out = static_cast<T*>(p.out) + static_cast<int64_t>(b) * p.chunk * p.ldo + head * kDk;
  auto pool_row = [&](int pos) {
    return ((static_cast<int64_t>(table[pos / bs]) * bs + pos % bs) * heads + head) * kDk;
  };

  // The chunk's keys and values into the pool (lane i: frame i, 16 bytes at
  // a time), the queries with their two biases, zeros for unused rows.
  for (int i = lane; i < c; i += 32) {
    const int64_t dst = pool_row(t1 + i);
    const uint4* kq = reinterpret_cast<const uint4*>(qkv + i * p.ld_qkv + d + head * kDk);
    const uint4* vq = reinterpret_cast<const uint4*>(qkv + i * p.ld_qkv + 2 * d + head * kDk);
#pragma unroll
    for (int v = 0; v < kDk / kVec; ++v) {
      reinterpret_cast<uint4*>(k_pool + dst)[v] = kq[v];
      reinterpret_cast<uint4*>(v_pool + dst)[v] = vq[v];
    }
  }
  for (int idx = lane; idx < kQueries * kDk; idx += 32) {
    const int i = idx / kDk, e = idx % kDk;
    const float q = i < c ? cuda::ToFloat(qkv[i * p.ld_qkv + head * kDk + e]) : 0.0f;
    s.q_u[i * S::kRow + e] = Bits(cuda::FromFloat<T>(q + p.pos_bias_u[head * kDk + e]));
    s.q_v[i * S::kRow + e] = Bits(cuda::FromFloat<T>(q + p.pos_bias_v[head * kDk + e]));
  }
  for (int idx = lane; idx < (p.chunk - c) * kDk; idx += 32) {
    out[(c + idx / kDk) * p.ldo + idx % kDk] = cuda::FromFloat<T>(0.0f);
  }
  __syncwarp();

  constexpr int kOut = kDk / 8;  // Output n-blocks of 8 dims.
  float o[kOut][4];
#pragma unroll
  for (int nb = 0; nb < kOut; ++nb) o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // Rows g and g + 8.
  const float scale = rsqrtf(static_cast<float>(kDk));
  const T* pos_table = static_cast<const T*>(p.pos_table);

  for (int start = 0; start < total; start += kKeys) {
    const int n = min(kKeys, total - start);
    // Lane j loads key start + j: its K and position rows and V (transposed).
    {
      uint16_t* ks = s.k + lane * S::kRow;
      uint16_t* ps = s.p + lane * S::kRow;
      if (lane < n) {
        const int pos = start + lane;
        const int64_t at = pool_row(pos);
        const int64_t abs_pos = first_pos + pos;
        const uint4* kg = reinterpret_cast<const uint4*>(k_pool + at);
        const uint4* vg = reinterpret_cast<const uint4*>(v_pool + at);
#pragma unroll
        for (int v = 0; v < kDk / kVec; ++v) {
          reinterpret_cast<uint4*>(ks)[v] = kg[v];
          const uint4 vv = vg[v];
          const uint16_t* ve = reinterpret_cast<const uint16_t*>(&vv);
#pragma unroll
          for (int e = 0; e < kVec; ++e) s.vt[(v * kVec + e) * S::kVRow + lane] = ve[e];
        }
        if (abs_pos < p.pos_rows) {
          const uint4* pg = reinterpret_cast<const uint4*>(pos_table + abs_pos * d + head * kDk);
#pragma unroll
          for (int v = 0; v < kDk / kVec; ++v) reinterpret_cast<uint4*>(ps)[v] = pg[v];
        } else {
          for (int e = 0; e < kDk; ++e) {
            ps[e] =
                Bits(cuda::FromFloat<T>(ProjectPosition(p.linear_pos, d, kDk, head, e, abs_pos)));
          }
        }
      } else {
        // Past the last key: zeros (never NaN into the products).
#pragma unroll
        for (int v = 0; v < kDk / kVec; ++v) {
          reinterpret_cast<uint4*>(ks)[v] = make_uint4(0, 0, 0, 0);
          reinterpret_cast<uint4*>(ps)[v] = make_uint4(0, 0, 0, 0);
        }
        for (int e = 0; e < kDk; ++e) s.vt[e * S::kVRow + lane] = 0;
      }
    }
    __syncwarp();

    // Scores for the 4 n-blocks of 8 keys: (q + u) k + (q + v) p.
    float sc[kKeys / 8][4];
#pragma unroll
    for (int nb = 0; nb < kKeys / 8; ++nb) sc[nb][0] = sc[nb][1] = sc[nb][2] = sc[nb][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kDk / 16; ++kk) {
      uint32_t au[4], av[4];
      LoadA<S::kRow>(s.q_u, kk, g, t, au);
      LoadA<S::kRow>(s.q_v, kk, g, t, av);
#pragma unroll
      for (int nb = 0; nb < kKeys / 8; ++nb) {
        const uint16_t* kr = s.k + (nb * 8 + g) * S::kRow + kk * 16 + t * 2;
        const uint16_t* pr = s.p + (nb * 8 + g) * S::kRow + kk * 16 + t * 2;
        Mma<T>(sc[nb], au, Load32(kr), Load32(kr + 8));
        Mma<T>(sc[nb], av, Load32(pr), Load32(pr + 8));
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
    // P V: the probabilities of keys [kk * 16, kk * 16 + 16) as A fragments.
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      uint32_t a[4];
      a[0] = Pack<T>(sc[2 * kk][0], sc[2 * kk][1]);
      a[1] = Pack<T>(sc[2 * kk][2], sc[2 * kk][3]);
      a[2] = Pack<T>(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
      a[3] = Pack<T>(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
      for (int nb = 0; nb < kOut; ++nb) {
        const uint16_t* vr = s.vt + (nb * 8 + g) * S::kVRow + kk * 16 + t * 2;
        Mma<T>(o[nb], a, Load32(vr), Load32(vr + 8));
      }
    }
    __syncwarp();  // The tiles are reloaded next.
  }
  const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
#pragma unroll
  for (int nb = 0; nb < kOut; ++nb) {
    const int col = nb * 8 + t * 2;
    if (g < c) {
      *reinterpret_cast<uint32_t*>(out + g * p.ldo + col) =
          Pack<T>(o[nb][0] * inv0, o[nb][1] * inv0);
    }
    if (g + 8 < c) {
      *reinterpret_cast<uint32_t*>(out + (g + 8) * p.ldo + col) =
          Pack<T>(o[nb][2] * inv1, o[nb][3] * inv1);
    }
  }
}

template <typename T, int kDk>
__global__ void __launch_bounds__(32 * kWarps) Kernel(PagedAttentionParams p, int items) {
  extern __shared__ __align__(16) unsigned char raw[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int item = blockIdx.x * kWarps + warp;
  if (item >= items) return;
  auto* s = reinterpret_cast<WarpSmem<kDk>*>(raw) + warp;
  AttendOne<T, kDk>(p, *s, item / p.heads, item % p.heads, lane);
}

template <typename T, int kDk>
void Launch(const PagedAttentionParams& p, GpuStream stream) {
  const int items = p.batch * p.heads;
  const size_t smem = sizeof(WarpSmem<kDk>) * kWarps;
  static size_t raised = 48 << 10;  // Per instantiation: the default limit.
  if (smem > raised) {
    OASR_CUDA_CHECK(cudaFuncSetAttribute(
        Kernel<T, kDk>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    raised = smem;
  }
  Kernel<T, kDk><<<(items + kWarps - 1) / kWarps, 32 * kWarps, smem, stream>>>(p, items);
}

}  // namespace mma_attention
}  // namespace oasr::kernels
