#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "kernels/cuda_common.cuh"
#include "kernels/wgmma_gemm.h"

namespace oasr::kernels {
namespace {

// Rows of x a block computes.
constexpr int kBM = kWgmmaTileRows;
constexpr int kBN = 256;       // columns of y a block computes
constexpr int kBK = 64;        // 64 16-bit elements: one 128-byte swizzle span
constexpr int kStages = 4;     // shared-memory ring depth
constexpr int kThreads = 384;  // producer warpgroup + two consumer warpgroups
constexpr int kTileBytes = (kBM + kBN) * kBK * 2;
// The epilogue's staging area of one consumer warp: 8 rows of the block's
// 256 16-bit columns, so that a warp's output leaves in whole 512-byte rows
// (16 bytes a lane) instead of the accumulators' 4-byte pairs. Rows are 16
// bytes longer than their data, so both the pairs going in and the rows
// coming out are free of bank conflicts, and a lane's 32 pairs sit at fixed
// offsets from one address.
constexpr int kStageRowBytes = kBN * 2 + 16;
constexpr int kStageBytes = 8 * kStageRowBytes;
constexpr int kConsumerWarps = 8;

struct alignas(1024) Smem {
  uint16_t a[kStages][kBM * kBK];
  uint16_t b[kStages][kBN * kBK];
  uint8_t stage[kConsumerWarps][kStageBytes];
  uint64_t full[kStages];
  uint64_t empty[kStages];
};
constexpr size_t kSmemBytes = sizeof(Smem) + 1024;  // + room to align the base
static_assert(kSmemBytes <= 227 * 1024, "over Hopper's shared memory a block");

// The weight-stationary kernel (k <= kStationaryMaxK): W's 256 x k slice
// resident, 64-row tiles of x through an 8-stage ring (two tiles of
// k = 256), one consumer warpgroup a tile.
constexpr int kSBM = 64;
constexpr int kSKBlocks = kStationaryMaxK / kBK;
constexpr int kSStages = 8;
struct alignas(1024) StationarySmem {
  uint16_t w[kSKBlocks][kBN * kBK];
  uint16_t a[kSStages][kSBM * kBK];
  uint8_t stage[kConsumerWarps][kStageBytes];
  uint64_t full[kSStages];
  uint64_t empty[kSStages];
  uint64_t w_full;
  uint64_t turn[2];  // turn[c]: warpgroup c may issue its products
};
constexpr size_t kStationarySmemBytes = sizeof(StationarySmem) + 1024;
static_assert(kStationarySmemBytes <= 227 * 1024, "over Hopper's shared memory a block");

// The im2col geometry of an implicit-GEMM x (LaunchWgmmaConv): output
// pixels per image row and image, 64-channel blocks per tap, taps a side
// and the stride. Unused (zero) for a plain x.
struct ConvGeometry {
  int ho = 0, wo = 0;
  int c_blocks = 0;
  int kernel = 0;
  int stride = 0;
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define OASR_WGMMA_DEVICE 1
#endif

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

#ifdef OASR_WGMMA_DEVICE
__device__ __forceinline__ void BarInit(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddr(bar)), "r"(count));
}
__device__ __forceinline__ void BarWait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = SmemAddr(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void BarArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(SmemAddr(bar)) : "memory");
}
__device__ __forceinline__ void BarExpectBytes(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}
// One box of a 2-D tensor map (inner coordinate first) into shared memory,
// counted on `bar`'s transaction bytes.
__device__ __forceinline__ void TmaLoad(void* dst, const CUtensorMap* map, int inner, int outer,
                                        uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(outer), "r"(SmemAddr(bar))
      : "memory");
}
// One column of an im2col tensor map (NHWC): pixelsPerColumn pixels from
// (n, h + off_h, w + off_w) on, stepping by the map's traversal stride
// within the image and on into the next, channels c.. of each.
__device__ __forceinline__ void TmaLoadIm2col(void* dst, const CUtensorMap* map, int c, int w,
                                              int h, int n, uint16_t off_w, uint16_t off_h,
                                              uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};\n" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c), "r"(w), "r"(h), "r"(n), "r"(SmemAddr(bar)),
      "h"(off_w), "h"(off_h)
      : "memory");
}

// The wgmma descriptor of a K-major tile in 128-byte-swizzled shared memory
// (rows of 128 bytes, 8-row atoms 1,024 bytes apart, 1,024-aligned base).
__device__ __forceinline__ uint64_t Desc(const void* p) {
  const uint64_t addr = SmemAddr(p);
  return ((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

// d (+)= a b, 64 x 256 x 16; a and b from shared memory; scale_d 0 starts
// from zero. T: __nv_bfloat16 or __half.
template <typename T>
__device__ __forceinline__ void Wgmma(float* d, uint64_t a, uint64_t b, int scale_d) {
#define OASR_WGMMA_OPERANDS                                                                    \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                    \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "           \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "           \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "           \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "           \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "           \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "     \
  "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, " \
  "%126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
#define OASR_WGMMA_D8(i)                                                                      \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define OASR_WGMMA_D                                                                           \
  OASR_WGMMA_D8(0), OASR_WGMMA_D8(8), OASR_WGMMA_D8(16), OASR_WGMMA_D8(24), OASR_WGMMA_D8(32), \
      OASR_WGMMA_D8(40), OASR_WGMMA_D8(48), OASR_WGMMA_D8(56), OASR_WGMMA_D8(64),              \
      OASR_WGMMA_D8(72), OASR_WGMMA_D8(80), OASR_WGMMA_D8(88), OASR_WGMMA_D8(96),              \
      OASR_WGMMA_D8(104), OASR_WGMMA_D8(112), OASR_WGMMA_D8(120)
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        // clang-format off
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " OASR_WGMMA_OPERANDS
        : OASR_WGMMA_D
        : "l"(a), "l"(b), "r"(scale_d));
    // clang-format on
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        // clang-format off
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " OASR_WGMMA_OPERANDS
        : OASR_WGMMA_D
        : "l"(a), "l"(b), "r"(scale_d));
    // clang-format on
  }
#undef OASR_WGMMA_D
#undef OASR_WGMMA_D8
#undef OASR_WGMMA_OPERANDS
}
__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// The accumulators stay live across the asynchronous products: tell the
// compiler so that it neither moves nor reuses them (CUTLASS's fence idea).
__device__ __forceinline__ void KeepLive(float* d) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// x sigmoid(x) = x/2 + x/2 tanh(x/2): one special-function op (tanh.approx,
// relative error ~2^-11, under 16-bit rounding) instead of exp and a divide.
__device__ __forceinline__ float Swish(float x) {
  const float h = 0.5f * x;
  float t;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(t) : "f"(h));
  return fmaf(h, t, h);
}
// The epilogue's activation of a pair of values.
template <Activation kAct>
__device__ __forceinline__ void Activate(float& v0, float& v1) {
  if constexpr (kAct == Activation::kSwish) {
    v0 = Swish(v0);
    v1 = Swish(v1);
  } else if constexpr (kAct == Activation::kRelu) {
    v0 = fmaxf(v0, 0.0f);
    v1 = fmaxf(v1, 0.0f);
  }
}
#endif  // OASR_WGMMA_DEVICE

// What the epilogue writes, by value.
struct Epilogue {
  const float* bias;
  void* y;
  int64_t ldy;
  const float* y_norm_scale;
  const float* y_norm_shift;
  const float* out_norm_scale;
  const float* out_norm_shift;
  void* out;
  int64_t ldo;
  float eps;
  // 16-bit results leave the staging rows by bulk asynchronous copies, a
  // row each (cp.async.bulk), instead of the warp's 16-byte stores.
  bool bulk_store;
  // A float32 y's norms epilogue writes its 16-bit out through the staging
  // rows (then whole rows by bulk copies where bulk_store) instead of the
  // lanes' 4-byte stores.
  bool staged_norm_out;
};

#ifdef OASR_WGMMA_DEVICE
// Two values of one row into TY's storage (float2 or a 16-bit pair).
template <typename TY>
__device__ __forceinline__ void StorePair(TY* at, float v0, float v1) {
  if constexpr (std::is_same_v<TY, float>) {
    *reinterpret_cast<float2*>(at) = make_float2(v0, v1);
  } else {
    *reinterpret_cast<uint32_t*>(at) = cuda::PackPair<TY>(v0, v1);
  }
}
template <typename TY>
__device__ __forceinline__ float2 LoadPair(const TY* at) {
  if constexpr (std::is_same_v<TY, float>) {
    return *reinterpret_cast<const float2*>(at);
  } else {
    const uint32_t w = *reinterpret_cast<const uint32_t*>(at);
    const TY* e = reinterpret_cast<const TY*>(&w);
    return make_float2(cuda::ToFloat(e[0]), cuda::ToFloat(e[1]));
  }
}
// Layer norm of the 256 values of a row held 64 a lane by the 4 lanes of a
// quad, in place: d[4 i + 2 kHalf + e] is column 8 i + 2 (lane % 4) + e.
// Every lane of the warp must call it (the quad's sums are shuffles).
template <int kHalf>
__device__ __forceinline__ void NormRow(float* d, int lane, const float* scale, const float* shift,
                                        float eps) {
  float sum = 0;
#pragma unroll
  for (int i = 0; i < 32; ++i) sum += d[4 * i + 2 * kHalf] + d[4 * i + 2 * kHalf + 1];
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  const float mean = sum * (1.0f / 256);
  float sq = 0;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float c = d[4 * i + 2 * kHalf + e] - mean;
      sq += c * c;
    }
  }
  sq += __shfl_xor_sync(0xffffffffu, sq, 1);
  sq += __shfl_xor_sync(0xffffffffu, sq, 2);
  const float inv = rsqrtf(sq * (1.0f / 256) + eps);
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int c = i * 8 + 2 * (lane % 4);
    const float2 g = *reinterpret_cast<const float2*>(scale + c);
    const float2 b = *reinterpret_cast<const float2*>(shift + c);
    d[4 * i + 2 * kHalf] = (d[4 * i + 2 * kHalf] - mean) * inv * g.x + b.x;
    d[4 * i + 2 * kHalf + 1] = (d[4 * i + 2 * kHalf + 1] - mean) * inv * g.y + b.y;
  }
}

template <int kHalf, typename TY>
__device__ __forceinline__ void WriteHalf(const float* d, uint8_t* stage, TY* y, int64_t ldy,
                                          int row0, int col0, int m, int n, int lane, bool bulk);

// The norms epilogue of one of a lane's two rows (kHalf: r or r + 8; row0:
// the first of the warp's 8 rows of this half). With e.staged_norm_out the
// 16-bit out leaves through the warp's staging rows (WriteHalf) instead of
// the lanes' 4-byte stores.
template <int kHalf, typename T, typename TY, bool kAccumulate>
__device__ __forceinline__ void NormEpilogue(float* d, const Epilogue& e, uint8_t* stage, int row,
                                             int row0, int m, int lane) {
  const bool live = row < m;
  TY* y = static_cast<TY*>(e.y) + static_cast<int64_t>(row) * e.ldy;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int c = i * 8 + 2 * (lane % 4);
    if (e.bias != nullptr) {
      const float2 b = *reinterpret_cast<const float2*>(e.bias + c);
      d[4 * i + 2 * kHalf] += b.x;
      d[4 * i + 2 * kHalf + 1] += b.y;
    }
    if (kAccumulate && live) {
      const float2 old = LoadPair(y + c);
      d[4 * i + 2 * kHalf] += old.x;
      d[4 * i + 2 * kHalf + 1] += old.y;
    }
  }
  if (e.y_norm_scale != nullptr) NormRow<kHalf>(d, lane, e.y_norm_scale, e.y_norm_shift, e.eps);
  if (live) {
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      StorePair(y + i * 8 + 2 * (lane % 4), d[4 * i + 2 * kHalf], d[4 * i + 2 * kHalf + 1]);
    }
  }
  if (e.out_norm_scale != nullptr) {
    NormRow<kHalf>(d, lane, e.out_norm_scale, e.out_norm_shift, e.eps);
    if (e.staged_norm_out) {
      WriteHalf<kHalf>(d, stage, static_cast<T*>(e.out), e.ldo, row0, 0, m, kBN, lane,
                       e.bulk_store);
    } else if (live) {
      T* out = static_cast<T*>(e.out) + static_cast<int64_t>(row) * e.ldo;
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        StorePair(out + i * 8 + 2 * (lane % 4), d[4 * i + 2 * kHalf], d[4 * i + 2 * kHalf + 1]);
      }
    }
  }
}

// A consumer warpgroup's epilogue: its 64 x 256 accumulators (rows row0..,
// columns col0..) through bias, activation or += and the norms into y (and
// out). d[4i + {0,1}] is (r, c..c+1), d[4i + {2,3}] is (r + 8, c..c+1), for
// r = row0 + 16 warp + lane / 4 and c = col0 + 8 i + 2 (lane % 4).
template <typename T, typename TY, Activation kAct, bool kAccumulate, bool kNorms>
__device__ __forceinline__ void StoreTile(float* d, const Epilogue& e, uint8_t* stage, int row0,
                                          int col0, int m, int n) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
  const int r = row0 + warp * 16 + lane / 4;
  TY* y = static_cast<TY*>(e.y);
  if constexpr (kNorms) {
    // n == 256: the block's columns are whole rows (col0 == 0).
    NormEpilogue<0, T, TY, kAccumulate>(d, e, stage, r, row0 + warp * 16, m, lane);
    NormEpilogue<1, T, TY, kAccumulate>(d, e, stage, r + 8, row0 + warp * 16 + 8, m, lane);
  } else {
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int c = col0 + i * 8 + 2 * (lane % 4);
      if (c >= n) continue;
      const float b0 = e.bias != nullptr ? e.bias[c] : 0.0f;
      const float b1 = e.bias != nullptr ? e.bias[c + 1] : 0.0f;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = r + 8 * h;
        if (row >= m) continue;
        float v0 = d[4 * i + 2 * h] + b0, v1 = d[4 * i + 2 * h + 1] + b1;
        Activate<kAct>(v0, v1);
        TY* at = y + static_cast<int64_t>(row) * e.ldy + c;
        if constexpr (kAccumulate) {
          const float2 old = LoadPair(at);
          v0 += old.x;
          v1 += old.y;
        }
        StorePair(at, v0, v1);
      }
    }
  }
}

// Byte `byte` (0..511) of staging row `row` (0..7).
__device__ __forceinline__ int StageOffset(int row, int byte) {
  return row * kStageRowBytes + byte;
}
// Bulk copies of staging rows to global memory (cp.async.bulk, the copy
// engine reading shared memory on its own): the staging rows may be written
// again only once this lane's copies have read them (StageFree).
__device__ __forceinline__ void BulkStore(void* to, const void* from, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(to),
               "r"(SmemAddr(from)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void BulkCommit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Until the warp's bulk copies have read the staging rows; then the warp may
// write them.
__device__ __forceinline__ void StageFree() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
  __syncwarp();
}
// Until the warp's bulk copies are complete (before the block ends).
__device__ __forceinline__ void BulkDrain() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
// The warp's 8 staged rows out to y's rows row0.. (columns col0 + 8 lane ..
// + 7 for each lane), whole 16-byte chunks where they are in range and
// aligned, else pair by pair; rows past m are not written.
template <typename TY>
__device__ __forceinline__ void StageToGlobal(const uint8_t* stage, TY* y, int64_t ldy, int row0,
                                              int col0, int m, int n, int lane) {
  const int c = col0 + lane * 8;
  if (c >= n) return;
#pragma unroll 2
  for (int rr = 0; rr < 8; ++rr) {
    if (row0 + rr < m) {
      const uint4 v = *reinterpret_cast<const uint4*>(stage + StageOffset(rr, lane * 16));
      TY* at = y + static_cast<int64_t>(row0 + rr) * ldy + c;
      if (c + 8 <= n && (reinterpret_cast<uintptr_t>(at) & 15) == 0) {
        *reinterpret_cast<uint4*>(at) = v;
      } else {
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (c + 2 * j < n) *reinterpret_cast<uint32_t*>(at + 2 * j) = w[j];
        }
      }
    }
  }
}
// Starts copying y's rows row0..row0 + 7 (columns col0..col0 + 255) into
// the staging rows, the way StageToGlobal writes them, as one group of
// cp.async (no registers held: the copies fly while the warp computes);
// what is out of range reads 0. WaitStage makes them visible to the warp.
template <typename TY>
__device__ __forceinline__ void IssueGlobalToStage(uint8_t* stage, const TY* y, int64_t ldy,
                                                   int row0, int col0, int m, int n, int lane) {
  const int c = col0 + lane * 8;
  StageFree();  // the warp's last reads of the staging rows are done
#pragma unroll
  for (int rr = 0; rr < 8; ++rr) {
    uint8_t* to = stage + StageOffset(rr, lane * 16);
    const TY* at = y + static_cast<int64_t>(row0 + rr) * ldy + c;
    if (row0 + rr < m && c + 8 <= n && (reinterpret_cast<uintptr_t>(at) & 15) == 0) {
      cuda::CopyAsync16(to, at);
    } else {
      uint32_t w[4] = {0, 0, 0, 0};
      if (row0 + rr < m) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (c + 2 * j < n) w[j] = *reinterpret_cast<const uint32_t*>(at + 2 * j);
        }
      }
      *reinterpret_cast<uint4*>(to) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
  cuda::CommitAsync();
}
__device__ __forceinline__ void WaitStage() {
  cuda::WaitAsync<0>();
  __syncwarp();
}
// A lane's 32 pairs of one of its rows (kHalf: r or r + 8) into the staging
// rows as 16-bit values, then the warp's 8 rows out to y's rows row0...
template <int kHalf, typename TY>
__device__ __forceinline__ void WriteHalf(const float* d, uint8_t* stage, TY* y, int64_t ldy,
                                          int row0, int col0, int m, int n, int lane, bool bulk) {
  const int r = lane / 4, q = lane % 4;
  StageFree();  // the warp's last reads of the staging rows are done
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    *reinterpret_cast<uint32_t*>(stage + StageOffset(r, 16 * i + 4 * q)) =
        cuda::PackPair<TY>(d[4 * i + 2 * kHalf], d[4 * i + 2 * kHalf + 1]);
  }
  // Whole rows of 16-byte aligned columns go as one bulk copy each (lane rr
  // row rr), the rest as the warp's stores.
  const bool whole = bulk && col0 + kBN <= n && (ldy * sizeof(TY)) % 16 == 0 &&
                     (reinterpret_cast<uintptr_t>(y + col0) & 15) == 0;
  if (whole) {
    // The pairs were written through the generic proxy; the copy engine
    // reads through the async proxy.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncwarp();
    if (lane < 8 && row0 + lane < m) {
      BulkStore(y + static_cast<int64_t>(row0 + lane) * ldy + col0, stage + StageOffset(lane, 0),
                kBN * sizeof(TY));
      BulkCommit();
    }
  } else {
    __syncwarp();
    StageToGlobal(stage, y, ldy, row0, col0, m, n, lane);
  }
}

// StoreTile for 16-bit y through the warp's staging rows: the same values,
// written (and, for +=, read) in whole rows. `stage` is the warp's area;
// for +=, half 0's rows of y were issued into it before the tile's
// products (PrefetchOld), half 1's are issued here.
template <int kHalf, typename TY, Activation kAct, bool kAccumulate, bool kNorms>
__device__ __forceinline__ void StoreHalfStaged(float* d, const Epilogue& e, uint8_t* stage,
                                                int row0, int col0, int m, int n, int lane) {
  const int r = lane / 4, q = lane % 4;
  TY* y = static_cast<TY*>(e.y);
  if constexpr (kAccumulate) {
    if constexpr (kHalf == 1) IssueGlobalToStage(stage, y, e.ldy, row0, col0, m, n, lane);
    WaitStage();
  }
  // The register path's order: bias, then the activation or +=.
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int c = col0 + i * 8 + 2 * q;
    float v0 = d[4 * i + 2 * kHalf], v1 = d[4 * i + 2 * kHalf + 1];
    if (e.bias != nullptr && c < n) {
      const float2 b = *reinterpret_cast<const float2*>(e.bias + c);
      v0 += b.x;
      v1 += b.y;
    }
    Activate<kAct>(v0, v1);
    if constexpr (kAccumulate) {
      const uint32_t w = *reinterpret_cast<const uint32_t*>(stage + StageOffset(r, 16 * i + 4 * q));
      const TY* old = reinterpret_cast<const TY*>(&w);
      v0 += cuda::ToFloat(old[0]);
      v1 += cuda::ToFloat(old[1]);
    }
    d[4 * i + 2 * kHalf] = v0;
    d[4 * i + 2 * kHalf + 1] = v1;
  }
  if constexpr (kNorms) {
    if (e.y_norm_scale != nullptr) NormRow<kHalf>(d, lane, e.y_norm_scale, e.y_norm_shift, e.eps);
  }
  WriteHalf<kHalf>(d, stage, y, e.ldy, row0, col0, m, n, lane, e.bulk_store);
  if constexpr (kNorms) {
    if (e.out_norm_scale != nullptr) {
      NormRow<kHalf>(d, lane, e.out_norm_scale, e.out_norm_shift, e.eps);
      WriteHalf<kHalf>(d, stage, static_cast<TY*>(e.out), e.ldo, row0, col0, m, n, lane,
                       e.bulk_store);
    }
  }
}

// Before a tile's products, for +=: starts reading the first 8 of the
// warp's 16 rows of y (row0: the consumer warpgroup's first row) into its
// staging rows, so that the read overlaps the products.
template <typename TY, bool kAccumulate>
__device__ __forceinline__ void PrefetchOld(const Epilogue& e, uint8_t* stage, int row0, int col0,
                                            int m, int n) {
  if constexpr (kAccumulate && sizeof(TY) == 2) {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
    IssueGlobalToStage(stage, static_cast<const TY*>(e.y), e.ldy, row0 + warp * 16, col0, m, n,
                       lane);
  }
}

// A consumer warpgroup's epilogue (as StoreTile): 16-bit y through the
// warp's staging rows, float32 y straight from registers.
template <typename T, typename TY, Activation kAct, bool kAccumulate, bool kNorms>
__device__ __forceinline__ void EpilogueTile(float* d, const Epilogue& e, uint8_t* stage, int row0,
                                             int col0, int m, int n) {
  if constexpr (sizeof(TY) == 2) {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
    StoreHalfStaged<0, TY, kAct, kAccumulate, kNorms>(d, e, stage, row0 + warp * 16, col0, m, n,
                                                      lane);
    StoreHalfStaged<1, TY, kAct, kAccumulate, kNorms>(d, e, stage, row0 + warp * 16 + 8, col0, m, n,
                                                      lane);
  } else {
    StoreTile<T, TY, kAct, kAccumulate, kNorms>(d, e, stage, row0, col0, m, n);
  }
}
#endif  // OASR_WGMMA_DEVICE

// kIm2col: x is an NHWC activation read through an im2col tensor map
// (geometry g): k-block kb of the tile at row0 is tap kb / g.c_blocks,
// channels (kb % g.c_blocks) * 64.. of the tile's 128 output pixels.
template <typename T, typename TY, Activation kAct, bool kAccumulate, bool kNorms,
          bool kIm2col = false>
__global__ void __launch_bounds__(kThreads, 1)
    WgmmaGemmKernel(const __grid_constant__ CUtensorMap map_x,
                    const __grid_constant__ CUtensorMap map_w, const Epilogue e, int m, int n,
                    int k, const ConvGeometry g) {
#ifdef OASR_WGMMA_DEVICE
  extern __shared__ uint8_t smem_raw[];
  Smem& s =
      *reinterpret_cast<Smem*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  const int tiles_n = (n + kBN - 1) / kBN;
  const int tiles = ((m + kBM - 1) / kBM) * tiles_n;
  const int k_blocks = (k + kBK - 1) / kBK;
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      BarInit(&s.full[i], 1);
      BarInit(&s.empty[i], 8);  // lane 0 of each consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int row0 = (tile / tiles_n) * kBM, col0 = (tile % tiles_n) * kBN;
        // kIm2col: the tile's first output pixel (img, oh, ow).
        int img = 0, oh = 0, ow = 0;
        if constexpr (kIm2col) {
          const int per_image = g.ho * g.wo;
          img = row0 / per_image;
          oh = (row0 % per_image) / g.wo;
          ow = row0 % g.wo;
        }
        for (int kb = 0; kb < k_blocks; ++kb) {
          BarWait(&s.empty[stage], phase ^ 1);
          BarExpectBytes(&s.full[stage], kTileBytes);
          if constexpr (kIm2col) {
            const int tap = kb / g.c_blocks;
            TmaLoadIm2col(s.a[stage], &map_x, (kb % g.c_blocks) * kBK, ow * g.stride,
                          oh * g.stride, img, static_cast<uint16_t>(tap % g.kernel),
                          static_cast<uint16_t>(tap / g.kernel), &s.full[stage]);
          } else {
            TmaLoad(s.a[stage], &map_x, kb * kBK, row0, &s.full[stage]);
          }
          TmaLoad(s.b[stage], &map_w, kb * kBK, col0, &s.full[stage]);
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int consumer = warpgroup - 1;
    const int lane = threadIdx.x % 32;
    float d[128];
    int stage = 0;
    uint32_t phase = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const int row0 = (tile / tiles_n) * kBM, col0 = (tile % tiles_n) * kBN;
      PrefetchOld<TY, kAccumulate>(e, s.stage[threadIdx.x / 32 - 4], row0 + consumer * 64, col0, m,
                                   n);
      int prev = -1;
      for (int kb = 0; kb < k_blocks; ++kb) {
        BarWait(&s.full[stage], phase);
        WgmmaFence();
        KeepLive(d);
        const uint16_t* a = s.a[stage] + consumer * 64 * kBK;
        const uint16_t* b = s.b[stage];
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
          Wgmma<T>(d, Desc(a + kk * 16), Desc(b + kk * 16), kb > 0 || kk > 0);
        }
        WgmmaCommit();
        KeepLive(d);
        // The previous stage's products are done once at most this one is
        // in flight: hand its buffers back to the producer.
        WgmmaWait<1>();
        KeepLive(d);
        if (prev >= 0 && lane == 0) BarArrive(&s.empty[prev]);
        prev = stage;
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1;
        }
      }
      WgmmaWait<0>();
      KeepLive(d);
      if (prev >= 0 && lane == 0) BarArrive(&s.empty[prev]);

      EpilogueTile<T, TY, kAct, kAccumulate, kNorms>(d, e, s.stage[threadIdx.x / 32 - 4],
                                                     row0 + consumer * 64, col0, m, n);
    }
    BulkDrain();
  }
#endif  // OASR_WGMMA_DEVICE
}

// The weight-stationary kernel for k <= 256 (most of the model's products):
// a block owns one 256-column slice of W, loaded into shared memory once,
// and streams 64-row tiles of x through a ring; its two consumer warpgroups
// take alternate tiles and turns on the tensor cores (one issues its
// products once the other's are issued), so each one's epilogue overlaps
// the other's products. Block b computes column slice b % tiles_n and row
// tiles b / tiles_n, + per_n, ...: the blocks of every slice walk the rows
// together, so a tile of x is read from DRAM about once.
template <typename T, typename TY, Activation kAct, bool kAccumulate, bool kNorms>
__global__ void __launch_bounds__(kThreads, 1)
    WgmmaStationaryKernel(const __grid_constant__ CUtensorMap map_x,
                          const __grid_constant__ CUtensorMap map_w, const Epilogue e, int m, int n,
                          int k, int per_n) {
#ifdef OASR_WGMMA_DEVICE
  extern __shared__ uint8_t smem_raw[];
  StationarySmem& s = *reinterpret_cast<StationarySmem*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  const int tiles_n = (n + kBN - 1) / kBN;
  const int tiles_m = (m + kSBM - 1) / kSBM;
  const int k_blocks = (k + kBK - 1) / kBK;
  const int col0 = (blockIdx.x % tiles_n) * kBN;
  const int first = blockIdx.x / tiles_n;
  const int count = first < tiles_m ? (tiles_m - first + per_n - 1) / per_n : 0;
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int i = 0; i < kSStages; ++i) {
      BarInit(&s.full[i], 1);
      BarInit(&s.empty[i], 4);  // lane 0 of each warp of the consuming warpgroup
    }
    BarInit(&s.w_full, 1);
    BarInit(&s.turn[0], 4);
    BarInit(&s.turn[1], 4);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (threadIdx.x == 0 && count > 0) {
      BarExpectBytes(&s.w_full, k_blocks * kBN * kBK * 2);
      for (int kb = 0; kb < k_blocks; ++kb) TmaLoad(s.w[kb], &map_w, kb * kBK, col0, &s.w_full);
      for (int i = 0; i < count; ++i) {
        const int row0 = (first + i * per_n) * kSBM;
        for (int kb = 0; kb < k_blocks; ++kb) {
          const int seq = i * k_blocks + kb, stage = seq % kSStages;
          BarWait(&s.empty[stage], ((seq / kSStages) & 1) ^ 1);
          BarExpectBytes(&s.full[stage], kSBM * kBK * 2);
          TmaLoad(s.a[stage], &map_x, kb * kBK, row0, &s.full[stage]);
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int consumer = warpgroup - 1;
    const int lane = threadIdx.x % 32;
    float d[128];
    if (count > 0) BarWait(&s.w_full, 0);
    int turn = 0;
    for (int i = consumer; i < count; i += 2, ++turn) {
      // Turns: the second warpgroup's products follow the first's, and each
      // warpgroup's next ones follow the other's last.
      if (consumer == 1) {
        BarWait(&s.turn[1], turn & 1);
      } else if (turn > 0) {
        BarWait(&s.turn[0], (turn - 1) & 1);
      }
      PrefetchOld<TY, kAccumulate>(e, s.stage[threadIdx.x / 32 - 4], (first + i * per_n) * kSBM,
                                   col0, m, n);
      int prev = -1;
      for (int kb = 0; kb < k_blocks; ++kb) {
        const int seq = i * k_blocks + kb, stage = seq % kSStages;
        BarWait(&s.full[stage], (seq / kSStages) & 1);
        WgmmaFence();
        KeepLive(d);
        const uint16_t* a = s.a[stage];
        const uint16_t* b = s.w[kb];
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
          Wgmma<T>(d, Desc(a + kk * 16), Desc(b + kk * 16), kb > 0 || kk > 0);
        }
        WgmmaCommit();
        KeepLive(d);
        WgmmaWait<1>();
        KeepLive(d);
        if (prev >= 0 && lane == 0) BarArrive(&s.empty[prev]);
        prev = stage;
      }
      // Every product of this tile is issued: the other warpgroup's turn.
      if (lane == 0) BarArrive(&s.turn[consumer ^ 1]);
      WgmmaWait<0>();
      KeepLive(d);
      if (lane == 0) BarArrive(&s.empty[prev]);
      EpilogueTile<T, TY, kAct, kAccumulate, kNorms>(d, e, s.stage[threadIdx.x / 32 - 4],
                                                     (first + i * per_n) * kSBM, col0, m, n);
    }
    BulkDrain();
  }
#endif  // OASR_WGMMA_DEVICE
}

// The driver's entry point `name` (CUDA 12.0's signature Fn), looked up
// through the runtime; null when the driver lacks it.
template <typename Fn>
Fn DriverEntry(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Fn>(p);
}

PFN_cuTensorMapEncodeTiled_v12000 EncodeFn() {
  static const auto fn = DriverEntry<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled");
  return fn;
}

PFN_cuTensorMapEncodeIm2col_v12000 EncodeIm2colFn() {
  static const auto fn =
      DriverEntry<PFN_cuTensorMapEncodeIm2col_v12000>("cuTensorMapEncodeIm2col");
  return fn;
}

// A [rows, cols] 16-bit matrix of row stride ld, read in boxes of
// box_rows x 64 with the 128-byte swizzle; out-of-range elements read 0.
bool EncodeMap(CUtensorMap* map, DType dtype, const void* base, int64_t rows, int64_t cols,
               int64_t ld, int box_rows) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = EncodeFn();
  if (encode == nullptr) return false;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld * 2)};
  const cuuint32_t box[2] = {kBK, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = encode(map,
                            dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                      : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                            2, const_cast<void*>(base), dims, strides, box, element_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

// The NHWC activation of a convolution as an im2col tensor map: columns of
// kBM output pixels (the window of a tap's top-left corners: the image less
// kernel - 1 at the far edges, stepped by the stride) by 64 channels, with
// the 128-byte swizzle; pixels past the last image read 0.
bool EncodeIm2colMap(CUtensorMap* map, const WgmmaConvParams& p) {
  const PFN_cuTensorMapEncodeIm2col_v12000 encode = EncodeIm2colFn();
  if (encode == nullptr) return false;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(p.c), static_cast<cuuint64_t>(p.w),
                              static_cast<cuuint64_t>(p.h), static_cast<cuuint64_t>(p.n)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(p.c * 2),
                                 static_cast<cuuint64_t>(p.w * p.c * 2),
                                 static_cast<cuuint64_t>(p.h * p.w * p.c * 2)};
  const int lower[2] = {0, 0};
  const int upper[2] = {-(p.kernel - 1), -(p.kernel - 1)};
  const cuuint32_t element_strides[4] = {1, static_cast<cuuint32_t>(p.stride),
                                         static_cast<cuuint32_t>(p.stride), 1};
  const CUresult r = encode(map,
                            p.dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                        : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                            4, const_cast<void*>(p.x), dims, strides, lower, upper, kBK, kBM,
                            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

bool DeviceIsSm90() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  static std::mutex mu;
  static int known[64];  // 0 unknown, 1 yes, 2 no
  std::lock_guard<std::mutex> lock(mu);
  if (device < 0 || device >= 64) return false;
  if (known[device] == 0) {
    int major = 0, minor = 0;
    const bool ok =
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess;
    if (!ok) cudaGetLastError();
    known[device] = ok && major == 9 && minor == 0 ? 1 : 2;
  }
  return known[device] == 1;
}

// Sets the kernel's shared-memory size once; false when it cannot be.
template <typename Kernel>
bool AllowSmem(Kernel kernel, size_t bytes) {
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes)) == cudaSuccess) {
    return true;
  }
  cudaGetLastError();
  return false;
}

template <typename T, typename TY, Activation kAct, bool kAccumulate, bool kNorms>
bool Launch(const WgmmaGemmParams& p, int max_blocks, GpuStream stream) {
  const Epilogue e{
      p.bias,           p.y,   p.ldy, p.y_norm_scale, p.y_norm_shift,   p.out_norm_scale,
      p.out_norm_shift, p.out, p.ldo, p.eps,          WgmmaBulkStore(), WgmmaStagedNormOut()};
  const int64_t tiles_n = (p.n + kBN - 1) / kBN;
  CUtensorMap map_x, map_w;
  if (p.k <= kStationaryMaxK && max_blocks >= tiles_n && WgmmaWeightStationary()) {
    if (!EncodeMap(&map_x, p.dtype, p.x, p.m, p.k, p.ldx, kSBM) ||
        !EncodeMap(&map_w, p.dtype, p.w, p.n, p.k, p.k, kBN)) {
      return false;
    }
    auto kernel = WgmmaStationaryKernel<T, TY, kAct, kAccumulate, kNorms>;
    static const bool attr_ok = AllowSmem(kernel, kStationarySmemBytes);
    if (!attr_ok) return false;
    const int64_t tiles_m = (p.m + kSBM - 1) / kSBM;
    const int64_t per_n = std::min<int64_t>(tiles_m, max_blocks / tiles_n);
    kernel<<<static_cast<int>(per_n * tiles_n), kThreads, kStationarySmemBytes, stream>>>(
        map_x, map_w, e, static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k),
        static_cast<int>(per_n));
    OASR_CUDA_LAUNCH_CHECK();
    return true;
  }
  if (!EncodeMap(&map_x, p.dtype, p.x, p.m, p.k, p.ldx, kBM) ||
      !EncodeMap(&map_w, p.dtype, p.w, p.n, p.k, p.k, kBN)) {
    return false;
  }
  auto kernel = WgmmaGemmKernel<T, TY, kAct, kAccumulate, kNorms>;
  static const bool attr_ok = AllowSmem(kernel, kSmemBytes);
  if (!attr_ok) return false;
  const int64_t tiles = ((p.m + kBM - 1) / kBM) * tiles_n;
  const int blocks = static_cast<int>(tiles < max_blocks ? tiles : max_blocks);
  kernel<<<blocks, kThreads, kSmemBytes, stream>>>(map_x, map_w, e, static_cast<int>(p.m),
                                                   static_cast<int>(p.n), static_cast<int>(p.k),
                                                   ConvGeometry{});
  OASR_CUDA_LAUNCH_CHECK();
  return true;
}

template <typename T, typename TY>
bool LaunchTyped(const WgmmaGemmParams& p, int max_blocks, GpuStream stream) {
  const bool norms = p.y_norm_scale != nullptr || p.out_norm_scale != nullptr;
  if (norms) {
    return p.accumulate ? Launch<T, TY, Activation::kNone, true, true>(p, max_blocks, stream)
                        : Launch<T, TY, Activation::kNone, false, true>(p, max_blocks, stream);
  }
  if (p.accumulate) return Launch<T, TY, Activation::kNone, true, false>(p, max_blocks, stream);
  switch (p.activation) {
    case Activation::kSwish:
      return Launch<T, TY, Activation::kSwish, false, false>(p, max_blocks, stream);
    case Activation::kRelu:
      return Launch<T, TY, Activation::kRelu, false, false>(p, max_blocks, stream);
    default:
      return Launch<T, TY, Activation::kNone, false, false>(p, max_blocks, stream);
  }
}

template <typename T>
bool LaunchOperands(const WgmmaGemmParams& p, int max_blocks, GpuStream stream) {
  if (p.y_dtype == DType::kFloat32) return LaunchTyped<T, float>(p, max_blocks, stream);
  return LaunchTyped<T, T>(p, max_blocks, stream);
}

// Initially on, unless OASR_WGMMA_STATIONARY is set to "0".
std::atomic<bool> g_weight_stationary{[] {
  const char* env = std::getenv("OASR_WGMMA_STATIONARY");
  return env == nullptr || std::string_view(env) != "0";
}()};

// Initially on, unless OASR_WGMMA_BULK_STORE is set to "0".
std::atomic<bool> g_bulk_store{[] {
  const char* env = std::getenv("OASR_WGMMA_BULK_STORE");
  return env == nullptr || std::string_view(env) != "0";
}()};

// Initially on, unless OASR_WGMMA_STAGED_NORM_OUT is set to "0".
std::atomic<bool> g_staged_norm_out{[] {
  const char* env = std::getenv("OASR_WGMMA_STAGED_NORM_OUT");
  return env == nullptr || std::string_view(env) != "0";
}()};

}  // namespace

void SetWgmmaStagedNormOut(bool on) { g_staged_norm_out.store(on); }
bool WgmmaStagedNormOut() { return g_staged_norm_out.load(); }
void SetWgmmaBulkStore(bool on) { g_bulk_store.store(on); }
bool WgmmaBulkStore() { return g_bulk_store.load(); }
void SetWgmmaWeightStationary(bool on) { g_weight_stationary.store(on); }
bool WgmmaWeightStationary() { return g_weight_stationary.load(); }

bool WgmmaGemmAvailable() {
#ifndef OASR_WGMMA_SM90A
  return false;
#else
  return DeviceIsSm90();
#endif
}

bool WgmmaGemmSupported(const WgmmaGemmParams& p) {
  const bool dtype_ok = (p.dtype == DType::kBFloat16 || p.dtype == DType::kFloat16) &&
                        (p.y_dtype == p.dtype || p.y_dtype == DType::kFloat32);
  const bool shape_ok = p.m > 0 && p.n > 0 && p.k > 0 && p.n % 2 == 0 && p.k % 8 == 0 &&
                        p.ldx % 8 == 0 && p.ldx >= p.k && p.ldy % 2 == 0 && p.ldy >= p.n &&
                        p.m < (int64_t{1} << 31) && p.n < (int64_t{1} << 31);
  const size_t y_pair = p.y_dtype == DType::kFloat32 ? 8 : 4;
  const bool align_ok = reinterpret_cast<uintptr_t>(p.x) % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(p.w) % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(p.y) % y_pair == 0;
  const bool mode_ok = !p.accumulate || p.activation == Activation::kNone;
  const bool y_norm = p.y_norm_scale != nullptr, out_norm = p.out_norm_scale != nullptr;
  const bool norms_ok =
      (!y_norm && !out_norm) ||
      (p.n == kBN && p.activation == Activation::kNone && (!y_norm || p.y_norm_shift != nullptr) &&
       (!out_norm || (p.out_norm_shift != nullptr && p.out != nullptr && p.ldo >= p.n &&
                      p.ldo % 2 == 0 && reinterpret_cast<uintptr_t>(p.out) % 4 == 0)));
  return dtype_ok && shape_ok && align_ok && mode_ok && norms_ok && WgmmaGemmAvailable();
}

bool WgmmaConvSupported(const WgmmaConvParams& p) {
  const bool dtype_ok = p.dtype == DType::kBFloat16 || p.dtype == DType::kFloat16;
  const bool act_ok = p.activation == Activation::kNone || p.activation == Activation::kRelu;
  const bool shape_ok = p.n > 0 && p.c > 0 && p.c % kBK == 0 && p.cout > 0 && p.cout % 2 == 0 &&
                        p.kernel >= 1 && p.kernel <= 128 && p.stride >= 1 && p.stride <= 8 &&
                        p.h >= p.kernel && p.w >= p.kernel && p.ldy >= p.cout &&
                        p.ldy % 2 == 0 && p.h < (int64_t{1} << 31) && p.w < (int64_t{1} << 31);
  if (!dtype_ok || !act_ok || !shape_ok) return false;
  const int64_t ho = (p.h - p.kernel) / p.stride + 1, wo = (p.w - p.kernel) / p.stride + 1;
  const int64_t k = int64_t{p.kernel} * p.kernel * p.c;
  const bool size_ok = p.n * ho * wo < (int64_t{1} << 31) && k < (int64_t{1} << 31) &&
                       p.n * p.h * p.w * p.c < (int64_t{1} << 40);
  const bool align_ok = reinterpret_cast<uintptr_t>(p.x) % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(p.weight) % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(p.y) % 4 == 0;
  return size_ok && align_ok && WgmmaGemmAvailable();
}

namespace {
template <typename T, Activation kAct>
bool LaunchConvTyped(const WgmmaConvParams& p, int max_blocks, GpuStream stream) {
  const int64_t ho = (p.h - p.kernel) / p.stride + 1, wo = (p.w - p.kernel) / p.stride + 1;
  const int64_t m = p.n * ho * wo, k = int64_t{p.kernel} * p.kernel * p.c;
  const Epilogue e{p.bias,  p.y,     p.ldy, nullptr, nullptr,          nullptr,
                   nullptr, nullptr, 0,     1e-5f,   WgmmaBulkStore(), false};
  CUtensorMap map_x, map_w;
  if (!EncodeIm2colMap(&map_x, p) || !EncodeMap(&map_w, p.dtype, p.weight, p.cout, k, k, kBN)) {
    return false;
  }
  const ConvGeometry g{static_cast<int>(ho), static_cast<int>(wo), static_cast<int>(p.c / kBK),
                       p.kernel, p.stride};
  auto kernel = WgmmaGemmKernel<T, T, kAct, false, false, true>;
  static const bool attr_ok = AllowSmem(kernel, kSmemBytes);
  if (!attr_ok) return false;
  const int64_t tiles = ((m + kBM - 1) / kBM) * ((p.cout + kBN - 1) / kBN);
  const int blocks = static_cast<int>(tiles < max_blocks ? tiles : max_blocks);
  kernel<<<blocks, kThreads, kSmemBytes, stream>>>(map_x, map_w, e, static_cast<int>(m),
                                                   static_cast<int>(p.cout), static_cast<int>(k),
                                                   g);
  OASR_CUDA_LAUNCH_CHECK();
  return true;
}
}  // namespace

bool LaunchWgmmaConv(const WgmmaConvParams& p, int max_blocks, GpuStream stream) {
  if (!WgmmaConvSupported(p) || max_blocks < 1) return false;
  const bool relu = p.activation == Activation::kRelu;
  if (p.dtype == DType::kBFloat16) {
    return relu ? LaunchConvTyped<__nv_bfloat16, Activation::kRelu>(p, max_blocks, stream)
                : LaunchConvTyped<__nv_bfloat16, Activation::kNone>(p, max_blocks, stream);
  }
  return relu ? LaunchConvTyped<__half, Activation::kRelu>(p, max_blocks, stream)
              : LaunchConvTyped<__half, Activation::kNone>(p, max_blocks, stream);
}

bool LaunchWgmmaGemm(const WgmmaGemmParams& p, int max_blocks, GpuStream stream) {
  if (!WgmmaGemmSupported(p) || max_blocks < 1) return false;
  if (p.dtype == DType::kBFloat16) return LaunchOperands<__nv_bfloat16>(p, max_blocks, stream);
  return LaunchOperands<__half>(p, max_blocks, stream);
}

}  // namespace oasr::kernels
