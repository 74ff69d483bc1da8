// A Hopper matrix product with the epilogues cuBLASLt lacks: y = act(x W^T
// + b) or y += x W^T + b in 16-bit storage, float32 accumulation, swish
// applied to the float32 sum before rounding (cuBLASLt has no swish
// epilogue, so its path rounds, writes, and a second pass reads the product
// back). CUDA builds only; the kernel exists only where the build has an
// sm_90a target (wgmma, setmaxnreg), otherwise every call says unsupported.
//
// The kernel for k > 256 (SetWgmmaWeightStationary below for k <= 256):
// persistent blocks of three warpgroups; one thread of the first issues
// tensor-map bulk copies of 128 x 64 tiles of x and 256 x 64 tiles of W
// into a 4-stage ring of 128-byte-swizzled shared memory (mbarriers, full
// and empty), the other two each multiply 64 rows of the block's 128 by
// the 256 columns with wgmma (m64n256k16, accumulators in registers). The
// epilogue (bias, activation, +=, norms) runs on the accumulators; 16-bit
// results then go through each warp's staging rows in shared memory and
// leave as whole rows, by bulk asynchronous copies (SetWgmmaBulkStore) or
// 16 bytes a lane (y's old rows for += come in the same way, by cp.async
// issued before the tile's products); float32 results are stored from
// registers. Rows past m and columns past n are
// zero-filled by the copy engine and never written.
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "common/gpu_stream.h"
#include "kernels/activation.h"

namespace oasr::kernels {

// Rows of x a block computes at a time (its tile is 128 x 256).
inline constexpr int kWgmmaTileRows = 128;
// Products with k up to this take the weight-stationary kernel (below).
inline constexpr int kStationaryMaxK = 256;

struct WgmmaGemmParams {
  const void* x = nullptr;  // [m, k], row stride ldx (elements, a multiple of 8).
  int64_t ldx = 0;
  const void* w = nullptr;      // [n, k], rows contiguous (k a multiple of 8).
  const float* bias = nullptr;  // [n] float32, or null.
  void* y = nullptr;            // [m, n], row stride ldy; must not overlap x.
  int64_t ldy = 0;
  DType dtype = DType::kBFloat16;    // of x and w: bfloat16 or float16.
  DType y_dtype = DType::kBFloat16;  // dtype, or float32.
  int64_t m = 0, n = 0, k = 0;
  Activation activation = Activation::kNone;
  bool accumulate = false;  // y += ...; needs kNone.
  // Layer norms of the finished rows (n must be 256: a block holds whole
  // rows; float32 statistics, eps): with y_norm, y's rows are stored normed
  // (y = LN(v) for v the sum above); with out_norm, out = LN'(y's row) is
  // stored too, in dtype, row stride ldo. Scales and shifts: [n] float32.
  const float* y_norm_scale = nullptr;
  const float* y_norm_shift = nullptr;
  const float* out_norm_scale = nullptr;
  const float* out_norm_shift = nullptr;
  void* out = nullptr;
  int64_t ldo = 0;
  float eps = 1e-5f;
};

// Whether the kernel is built and the current device can run it (compute
// capability 9.0).
bool WgmmaGemmAvailable();

// Whether the kernel can run these params on the current device: available,
// 16-bit dtype, n even, k and ldx multiples of 8 elements, 16-byte aligned x
// and w, y (and out) aligned to two elements; norms need n == 256 and
// their scales and shifts.
bool WgmmaGemmSupported(const WgmmaGemmParams& p);

// Where k <= kStationaryMaxK the product runs on a weight-stationary
// variant: a block keeps one 256-column slice of W in shared memory for its
// whole life and streams 64-row tiles of x, its two consumer warpgroups
// alternating tiles and turns on the tensor cores so that one's epilogue
// overlaps the other's products. With the staged epilogue it is the
// fastest at k = 256 (H100, m = 32,768: FFN w1 + swish 0.050 against 0.052
// ms on the tiles with bulk copies, 0.063 against 0.072 with row stores;
// the chunk step 2.6 % below the tiles at B = 2,048), so it is on by
// default. A process-wide switch, for benchmarks'
// A/B (off: every product takes the 128 x 256 tiles above), initially off
// only when the environment has OASR_WGMMA_STATIONARY=0 (so that a test
// binary can run its cases on the tiles).
void SetWgmmaWeightStationary(bool on);
bool WgmmaWeightStationary();

// Whether the staged 16-bit results leave by bulk asynchronous copies, one
// per 512-byte row (cp.async.bulk: the copy engine reads shared memory while
// the warp goes on), instead of the warp's 16-byte stores; rows that are
// not whole 16-byte aligned runs of 256 columns take the stores anyway.
// Faster (H100, session 45: FFN w1 + swish 0.050 against 0.063 ms at m =
// 32,768, qkv 0.040 against 0.046; the chunk step 3.3 % less), so on by
// default. A process-wide switch for benchmarks' A/B, initially off only
// when the environment has OASR_WGMMA_BULK_STORE=0.
void SetWgmmaBulkStore(bool on);
bool WgmmaBulkStore();

// Whether a product into a float32 y with norms (the residual stream's
// products: y += x W + b, then out = norm(y) in 16 bits) writes out through
// the warp's staging rows, whole rows leaving as bulk copies where
// WgmmaBulkStore, instead of the lanes' 4-byte stores from registers.
// Faster (H100, session 46, m = 32,768: FFN w2 += with both norms 0.0711
// against 0.0741 ms, attention out += 0.051 against 0.053), so on by
// default. A process-wide switch for benchmarks' A/B, initially off only
// when the environment has OASR_WGMMA_STAGED_NORM_OUT=0.
void SetWgmmaStagedNormOut(bool on);
bool WgmmaStagedNormOut();

// A convolution as an implicit GEMM on the same tiles: x is not a patch
// matrix but the NHWC activation [n, h, w, c] itself, and the producer's
// tensor-map copies gather each 128 x 64 tile of patches straight from it
// (the copy engine's im2col mode: tap (a, b) of output pixel (img, oh, ow)
// is pixel (img, oh * stride + a, ow * stride + b), channels of one 64-wide
// block). The GEMM's k order is the patch order the stem's weights have:
// taps (a, b) row-major, channels within a tap. No padding; y = act(patches
// W^T + b) for the m = n * ho * wo output pixels, in dtype.
struct WgmmaConvParams {
  const void* x = nullptr;  // [n, h, w, c] NHWC, 16-byte aligned.
  int64_t n = 0, h = 0, w = 0, c = 0;
  int kernel = 3, stride = 2;
  const void* weight = nullptr;  // [cout, kernel * kernel * c], rows contiguous.
  const float* bias = nullptr;   // [cout] float32, or null.
  int64_t cout = 0;
  void* y = nullptr;  // [n * ho * wo, cout], row stride ldy.
  int64_t ldy = 0;
  DType dtype = DType::kBFloat16;  // of x, weight and y: bfloat16 or float16.
  Activation activation = Activation::kRelu;
};

// Whether LaunchWgmmaConv can run these params on the current device: the
// kernel available, a 16-bit dtype, c a multiple of 64, cout even, a
// kernel of 1..128 taps a side within the image, stride 1..8, aligned
// buffers, m below 2^31.
bool WgmmaConvSupported(const WgmmaConvParams& p);

// Enqueues the convolution on `stream` with at most `max_blocks` blocks.
// False (nothing enqueued) when unsupported or the tensor maps cannot be
// encoded.
bool LaunchWgmmaConv(const WgmmaConvParams& p, int max_blocks, GpuStream stream);

// Enqueues the product on `stream` with at most `max_blocks` blocks (the
// device's multiprocessors). False (nothing enqueued) when unsupported or
// the tensor maps cannot be encoded.
bool LaunchWgmmaGemm(const WgmmaGemmParams& p, int max_blocks, GpuStream stream);

}  // namespace oasr::kernels
