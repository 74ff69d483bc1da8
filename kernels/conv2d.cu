#include "kernels/conv2d.h"
#include "kernels/cuda_common.cuh"

namespace oasr::kernels {
namespace {

using cuda::FromFloat;
using cuda::ToFloat;

// One block per patch row (image i, time t, frequency f); a patch is k runs
// (one per kernel row a) of k * c contiguous input values.
template <typename In, typename Out>
__global__ void Im2ColKernel(Im2ColParams p, int64_t t_out, int64_t f_out) {
  const int64_t rows = p.n * t_out * f_out;
  const int64_t run = static_cast<int64_t>(p.kernel) * p.c;
  const int64_t patch = run * p.kernel;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t i = r / (t_out * f_out), rem = r % (t_out * f_out);
    const int64_t t = rem / f_out, f = rem % f_out;
    const In* src = static_cast<const In*>(p.in) + i * p.h * p.w * p.c +
                    (t * p.stride * p.w + f * p.stride) * p.c;
    Out* dst = static_cast<Out*>(p.patches) + r * p.ld;
    for (int64_t col = threadIdx.x; col < p.ld; col += blockDim.x) {
      if (col >= patch) {
        dst[col] = FromFloat<Out>(0.0f);
        continue;
      }
      const int64_t a = col / run, within = col - a * run;
      dst[col] = FromFloat<Out>(ToFloat(src[a * p.w * p.c + within]));
    }
  }
}

// Same, 16 bytes at a time: needs equal dtypes, c and ld multiples of the
// vector width and 16-byte aligned buffers.
template <typename T>
__global__ void Im2ColVecKernel(Im2ColParams p, int64_t t_out, int64_t f_out) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t rows = p.n * t_out * f_out;
  const int64_t run = static_cast<int64_t>(p.kernel) * p.c;
  const int64_t patch = run * p.kernel;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t i = r / (t_out * f_out), rem = r % (t_out * f_out);
    const int64_t t = rem / f_out, f = rem % f_out;
    const T* src = static_cast<const T*>(p.in) + i * p.h * p.w * p.c +
                   (t * p.stride * p.w + f * p.stride) * p.c;
    T* dst = static_cast<T*>(p.patches) + r * p.ld;
    for (int64_t col = threadIdx.x * kVec; col < p.ld; col += blockDim.x * kVec) {
      uint4 v = make_uint4(0, 0, 0, 0);
      if (col < patch) {
        const int64_t a = col / run, within = col - a * run;
        v = *reinterpret_cast<const uint4*>(src + a * p.w * p.c + within);
      }
      *reinterpret_cast<uint4*>(dst + col) = v;
    }
  }
}

// Input rows [first, first + rows) of image i into x ([rows][w], zeros past
// the image), between barriers: the rows a block's stage-2 row reads.
__device__ __forceinline__ void LoadStemRows(const FusedStemParams& p, int64_t i, int64_t first,
                                             int rows, float* x) {
  __syncthreads();
  for (int idx = threadIdx.x; idx < rows * p.w; idx += blockDim.x) {
    const int r = idx / static_cast<int>(p.w), col = idx % static_cast<int>(p.w);
    const int64_t row = first + r;
    x[idx] = row < p.h ? p.in[(i * p.h + row) * p.w + col] : 0.0f;
  }
  __syncthreads();
}

// Stage 2's patches straight from the one-channel input. A block per
// (image, stage-2 row); a thread per stage-1 channel, which keeps its 9
// taps in registers; the input rows the block needs sit in shared memory.
template <typename Out>
__global__ void FusedStemKernel(FusedStemParams p, int64_t h2, int64_t w2) {
  extern __shared__ float x[];  // [rows_needed][w]
  // Stage-1 rows t2 * s2 .. t2 * s2 + k2 - 1 read these input rows.
  const int rows_needed = (p.k2 - 1) * p.s1 + 3;
  for (int64_t rb = blockIdx.x; rb < p.n * h2; rb += gridDim.x) {
    const int64_t i = rb / h2, t2 = rb % h2;
    const int64_t first = t2 * p.s2 * p.s1;  // First input row of the window.
    LoadStemRows(p, i, first, rows_needed, x);
    for (int c = threadIdx.x; c < p.c1; c += blockDim.x) {
      float w[9];
#pragma unroll
      for (int k = 0; k < 9; ++k) w[k] = p.w1[c * 9 + k];
      const float bias = p.b1[c];
      Out* base = static_cast<Out*>(p.patches) + (i * h2 + t2) * w2 * p.ld + c;
      for (int64_t f2 = 0; f2 < w2; ++f2) {
        for (int a = 0; a < p.k2; ++a) {
          const float* xr = x + (a * p.s1) * p.w;  // Stage-1 row t2 * s2 + a.
          for (int b = 0; b < p.k2; ++b) {
            const int64_t f1 = f2 * p.s2 + b;
            const float* xc = xr + f1 * p.s1;
            float v = bias;
#pragma unroll
            for (int a1 = 0; a1 < 3; ++a1) {
#pragma unroll
              for (int b1 = 0; b1 < 3; ++b1) v += w[a1 * 3 + b1] * xc[a1 * p.w + b1];
            }
            base[f2 * p.ld + (a * p.k2 + b) * p.c1] = FromFloat<Out>(fmaxf(v, 0.0f));
          }
        }
      }
    }
    // Padding columns past the patch.
    const int64_t patch = static_cast<int64_t>(p.k2) * p.k2 * p.c1;
    for (int64_t idx = threadIdx.x; idx < w2 * (p.ld - patch); idx += blockDim.x) {
      const int64_t f2 = idx / (p.ld - patch), col = patch + idx % (p.ld - patch);
      static_cast<Out*>(p.patches)[((i * h2 + t2) * w2 + f2) * p.ld + col] = FromFloat<Out>(0.0f);
    }
  }
}

// The same patches in a 16-bit dtype, 16 bytes at a time: a thread owns 8
// consecutive stage-1 channels (their 72 taps in registers) and writes their
// values of one patch element with one store, so a warp covers 256 channels
// of one (f2, a, b) with 512 contiguous bytes. Needs c1 a multiple of 8 whose
// groups of 8 divide the block, ld a multiple of 8 and aligned patches.
constexpr int kStemThreads = 256;

template <typename Out>
__global__ void __launch_bounds__(kStemThreads)
    FusedStemVecKernel(FusedStemParams p, int64_t h2, int64_t w2) {
  extern __shared__ float x[];  // [rows_needed][w]
  const int rows_needed = (p.k2 - 1) * p.s1 + 3;
  const int groups = p.c1 / 8;
  const int cg = threadIdx.x % groups;  // The thread's 8 channels, the same in every unit.
  const int lane_slot = threadIdx.x / groups;
  const int slots = blockDim.x / groups;
  float w[8][9], bias[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    bias[j] = p.b1[cg * 8 + j];
#pragma unroll
    for (int k = 0; k < 9; ++k) w[j][k] = p.w1[(cg * 8 + j) * 9 + k];
  }
  const int kk = p.k2 * p.k2;
  const int units = static_cast<int>(w2) * kk;  // (f2, a, b) of a stage-2 row.
  const int64_t patch = static_cast<int64_t>(kk) * p.c1;
  for (int64_t rb = blockIdx.x; rb < p.n * h2; rb += gridDim.x) {
    const int64_t i = rb / h2, t2 = rb % h2;
    const int64_t first = t2 * p.s2 * p.s1;  // First input row of the window.
    LoadStemRows(p, i, first, rows_needed, x);
    Out* base = static_cast<Out*>(p.patches) + (i * h2 + t2) * w2 * p.ld + cg * 8;
    for (int u = lane_slot; u < units; u += slots) {
      const int f2 = u / kk, ab = u % kk, a = ab / p.k2, b = ab % p.k2;
      const float* xc = x + (a * p.s1) * p.w + (f2 * p.s2 + b) * p.s1;
      float in[9];
#pragma unroll
      for (int a1 = 0; a1 < 3; ++a1) {
#pragma unroll
        for (int b1 = 0; b1 < 3; ++b1) in[a1 * 3 + b1] = xc[a1 * p.w + b1];
      }
      uint32_t packed[4];
#pragma unroll
      for (int j = 0; j < 8; j += 2) {
        float v0 = bias[j], v1 = bias[j + 1];
#pragma unroll
        for (int k = 0; k < 9; ++k) {
          v0 = fmaf(w[j][k], in[k], v0);
          v1 = fmaf(w[j + 1][k], in[k], v1);
        }
        packed[j / 2] = cuda::PackPair<Out>(fmaxf(v0, 0.0f), fmaxf(v1, 0.0f));
      }
      *reinterpret_cast<uint4*>(base + f2 * p.ld + static_cast<int64_t>(ab) * p.c1) =
          make_uint4(packed[0], packed[1], packed[2], packed[3]);
    }
    // Padding columns past the patch.
    for (int64_t idx = threadIdx.x; idx < w2 * (p.ld - patch); idx += blockDim.x) {
      const int64_t f2 = idx / (p.ld - patch), col = patch + idx % (p.ld - patch);
      static_cast<Out*>(p.patches)[((i * h2 + t2) * w2 + f2) * p.ld + col] = FromFloat<Out>(0.0f);
    }
  }
}

// The same patches with stage 1 on the tensor cores, each stage-1 value
// computed once per block. A block takes one stage-2 row (image i, row t2):
// its k2 stage-1 rows (P = k2 * w1 positions, every channel) are computed by
// mma.sync m16n8k16 into shared memory, then copied out as patches, 16 bytes
// a thread (a warp writes 512 contiguous bytes for c1 = 256). Stage 1 has 9
// taps, so its K of 32 holds each tap three times to keep float32 accuracy
// with float16 operands: x_hi w_hi + x_lo w_hi + x_hi w_lo (k 0-8, 9-17 and
// 18-26; 27-31 zero), where v_hi = half(v) and v_lo = half(v - v_hi). Needs
// c1 in {64, 128, 256, 512}, a 16-bit patch dtype, ld a multiple of 8, aligned
// patches and inputs within float16's range (log-mel features are).
constexpr int kStemMmaThreads = 256;
constexpr int kStemMmaWarps = kStemMmaThreads / 32;

struct StemMmaGeometry {
  int w1 = 0, h2 = 0, w2 = 0;  // Stage 1's width, stage 2's height and width.
  int h1 = 0;                  // Stage 1's height.
  int groups = 0;  // Units of k2 stage-1 rows an image has (stage-1 output, LaunchStemStage1).
  int rows_in = 0;             // Input rows a block reads.
  int positions = 0;           // Stage-1 positions a block computes (k2 * w1).
  int stride = 0;  // Elements per position in shared memory (c1 + 8: conflict-free stores).
  size_t frag_bytes = 0, bias_bytes = 0, x_bytes = 0, s1_bytes = 0;
  size_t Total() const { return frag_bytes + bias_bytes + x_bytes + s1_bytes; }
};

StemMmaGeometry StemMmaShape(const FusedStemParams& p) {
  StemMmaGeometry g;
  g.w1 = static_cast<int>(Conv2dOp::OutSize(p.w, 3, p.s1));
  g.h2 = static_cast<int>(Conv2dOp::OutSize(Conv2dOp::OutSize(p.h, 3, p.s1), p.k2, p.s2));
  g.w2 = static_cast<int>(Conv2dOp::OutSize(g.w1, p.k2, p.s2));
  g.h1 = static_cast<int>(Conv2dOp::OutSize(p.h, 3, p.s1));
  g.groups = (g.h1 + p.k2 - 1) / p.k2;
  g.rows_in = (p.k2 - 1) * p.s1 + 3;
  g.positions = p.k2 * g.w1;
  g.stride = p.c1 + 8;
  g.frag_bytes = static_cast<size_t>(p.c1 / 8) * 32 * sizeof(uint4);
  g.bias_bytes = static_cast<size_t>(p.c1) * sizeof(float);
  g.x_bytes = (static_cast<size_t>(g.rows_in) * p.w * sizeof(float) + 15) / 16 * 16;
  g.s1_bytes = static_cast<size_t>(g.positions) * g.stride * 2;
  return g;
}

__device__ __forceinline__ uint32_t PackHalves(__half lo, __half hi) {
  const __half2 v = __halves2half2(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Operand k of stage 1's K = 32: which copy of the taps (0: hi, 1: lo for
// the input and hi for the weight, 2: hi for the input and lo for the
// weight, 3: zero) and which tap.
__device__ __forceinline__ void StemK(int k, int& part, int& tap) {
  part = k < 27 ? k / 9 : 3;
  tap = k < 27 ? k % 9 : 0;
}

// kStage1Out: a block's unit is instead k2 consecutive stage-1 rows of an
// image (group u: rows u * k2..), written once as they are to p.patches,
// the stage-1 activation [n, h1, w1, c1] (LaunchStemStage1).
template <typename Out, int kC1, bool kStage1Out>
__global__ void __launch_bounds__(kStemMmaThreads, 2)
    FusedStemMmaKernel(FusedStemParams p, StemMmaGeometry g) {
  extern __shared__ __align__(16) unsigned char smem[];
  uint4* frags = reinterpret_cast<uint4*>(smem);  // [c1 / 8][32 lanes]
  float* bias = reinterpret_cast<float*>(smem + g.frag_bytes);
  float* x = reinterpret_cast<float*>(smem + g.frag_bytes + g.bias_bytes);  // [rows_in][w]
  Out* s1 = reinterpret_cast<Out*>(smem + g.frag_bytes + g.bias_bytes + g.x_bytes);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int gid = lane / 4, q = lane % 4;
  constexpr int kTiles = kC1 / 8;  // n8 tiles of stage-1 channels.

  // The weights as B fragments (lane's n = tile * 8 + gid; k = st * 16 +
  // half * 8 + 2q + e), and the bias.
  for (int idx = threadIdx.x; idx < kTiles * 32; idx += blockDim.x) {
    const int tile = idx / 32, l = idx % 32;
    const int n = tile * 8 + l / 4, lq = l % 4;
    uint32_t r[4];
#pragma unroll
    for (int st = 0; st < 2; ++st) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        __half v[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          int part, tap;
          StemK(st * 16 + hf * 8 + 2 * lq + e, part, tap);
          const float w = p.w1[n * 9 + tap];
          const __half hi = __float2half_rn(w);
          v[e] = part == 3   ? __float2half_rn(0.0f)
                 : part == 2 ? __float2half_rn(w - __half2float(hi))
                             : hi;
        }
        r[st * 2 + hf] = PackHalves(v[0], v[1]);
      }
    }
    frags[idx] = make_uint4(r[0], r[1], r[2], r[3]);
  }
  for (int c = threadIdx.x; c < kC1; c += blockDim.x) bias[c] = p.b1[c];

  // This lane's 8 A operands: their offsets in the input window of a
  // position and which part they are.
  int off[8], part[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int st = j / 4, hf = (j / 2) % 2, e = j % 2;
    int tap;
    StemK(st * 16 + hf * 8 + 2 * q + e, part[j], tap);
    off[j] = (tap / 3) * static_cast<int>(p.w) + tap % 3;
  }
  const int m_tiles = (g.positions + 15) / 16;
  constexpr int kVecs = kC1 / 8;                      // 16-byte vectors a patch element.
  constexpr int kUnitStep = kStemMmaThreads / kVecs;  // Patch elements a pass.
  const int cv = threadIdx.x % kVecs;
  const int64_t patch = static_cast<int64_t>(p.k2) * p.k2 * kC1;

  const int units = kStage1Out ? g.groups : g.h2;  // A block's units per image.
  for (int64_t rb = blockIdx.x; rb < p.n * units; rb += gridDim.x) {
    const int64_t i = rb / units, t2 = rb % units;
    // The unit's first stage-1 row.
    const int64_t r0 = kStage1Out ? t2 * p.k2 : t2 * p.s2;
    LoadStemRows(p, i, r0 * p.s1, g.rows_in, x);  // Barriers on both sides.

    // Stage 1: a warp per m16 tile of positions, every channel.
    for (int mt = warp; mt < m_tiles; mt += kStemMmaWarps) {
      int pos[2];
      uint32_t a[2][4];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        pos[r] = mt * 16 + gid + r * 8;
        const int pc = pos[r] < g.positions ? pos[r] : g.positions - 1;
        const float* xb = x + (pc / g.w1) * p.s1 * p.w + (pc % g.w1) * p.s1;
        __half v[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float xv = xb[off[j]];
          const __half hi = __float2half_rn(xv);
          v[j] = part[j] == 3   ? __float2half_rn(0.0f)
                 : part[j] == 1 ? __float2half_rn(xv - __half2float(hi))
                                : hi;
        }
        // a0/a2 are row gid's k pairs (2q, 8 + 2q), a1/a3 row gid + 8's.
#pragma unroll
        for (int st = 0; st < 2; ++st) {
          a[st][r] = PackHalves(v[st * 4], v[st * 4 + 1]);
          a[st][r + 2] = PackHalves(v[st * 4 + 2], v[st * 4 + 3]);
        }
      }
#pragma unroll 4
      for (int tile = 0; tile < kTiles; ++tile) {
        const uint4 b = frags[tile * 32 + lane];
        const int ch = tile * 8 + 2 * q;
        const float2 bb = *reinterpret_cast<const float2*>(bias + ch);
        float d[4] = {bb.x, bb.y, bb.x, bb.y};
        cuda::Mma<__half>(d, a[0], b.x, b.y);
        cuda::Mma<__half>(d, a[1], b.z, b.w);
        if (pos[0] < g.positions) {
          *reinterpret_cast<uint32_t*>(s1 + pos[0] * g.stride + ch) =
              cuda::PackPair<Out>(fmaxf(d[0], 0.0f), fmaxf(d[1], 0.0f));
        }
        if (pos[1] < g.positions) {
          *reinterpret_cast<uint32_t*>(s1 + pos[1] * g.stride + ch) =
              cuda::PackPair<Out>(fmaxf(d[2], 0.0f), fmaxf(d[3], 0.0f));
        }
      }
    }
    __syncthreads();

    if constexpr (kStage1Out) {
      // Rows r0.. of image i, contiguous in the activation: 16 bytes a thread.
      const int rows = static_cast<int>(min(static_cast<int64_t>(p.k2), g.h1 - r0));
      Out* dst = static_cast<Out*>(p.patches) + ((i * g.h1 + r0) * g.w1) * kC1;
      for (int idx = threadIdx.x; idx < rows * g.w1 * kVecs; idx += blockDim.x) {
        const int pos = idx / kVecs, v = idx % kVecs;
        *reinterpret_cast<uint4*>(dst + static_cast<int64_t>(pos) * kC1 + v * 8) =
            *reinterpret_cast<const uint4*>(s1 + pos * g.stride + v * 8);
      }
      continue;
    }

    // The patches of stage-2 row t2: element (f2, a, b) is stage-1 position
    // (a, f2 * s2 + b) of the block, c1 channels.
    Out* row = static_cast<Out*>(p.patches) + (i * g.h2 + t2) * g.w2 * p.ld + cv * 8;
    int u = threadIdx.x / kVecs;
    int f2 = u % g.w2, ab = u / g.w2;
    int a = ab / p.k2, b = ab % p.k2;
    while (ab < p.k2 * p.k2) {
      const uint4 v =
          *reinterpret_cast<const uint4*>(s1 + (a * g.w1 + f2 * p.s2 + b) * g.stride + cv * 8);
      *reinterpret_cast<uint4*>(row + static_cast<int64_t>(f2) * p.ld + ab * kC1) = v;
      f2 += kUnitStep;
      while (f2 >= g.w2 && ab < p.k2 * p.k2) {
        f2 -= g.w2;
        ++ab;
        if (++b == p.k2) {
          b = 0;
          ++a;
        }
      }
    }
    // Padding columns past the patch.
    for (int64_t idx = threadIdx.x; idx < g.w2 * (p.ld - patch); idx += blockDim.x) {
      const int64_t f = idx / (p.ld - patch), col = patch + idx % (p.ld - patch);
      static_cast<Out*>(p.patches)[((i * g.h2 + t2) * g.w2 + f) * p.ld + col] =
          FromFloat<Out>(0.0f);
    }
  }
}

bool StemMmaFits(const FusedStemParams& p) {
  return p.patch_dtype != DType::kFloat32 &&
         (p.c1 == 64 || p.c1 == 128 || p.c1 == 256 || p.c1 == 512) && p.ld % 8 == 0 &&
         reinterpret_cast<uintptr_t>(p.patches) % 16 == 0 && StemMmaShape(p).Total() <= 227 * 1024;
}

template <typename Out, int kC1, bool kStage1Out>
void LaunchStemMma(const FusedStemParams& p, GpuStream stream) {
  const StemMmaGeometry g = StemMmaShape(p);
  const size_t smem = g.Total();
  static size_t raised = 48 << 10;  // Per instantiation: the default limit.
  if (smem > raised) {
    OASR_CUDA_CHECK(cudaFuncSetAttribute(FusedStemMmaKernel<Out, kC1, kStage1Out>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
    raised = smem;
  }
  // One wave of resident blocks, each taking stage-2 rows in turn: a block
  // computes its B fragments once, not once a row (they cost about 40 % of a
  // row's instructions).
  static size_t resident_for = 0;
  static int resident = 0;
  if (resident_for != smem) {
    OASR_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &resident, FusedStemMmaKernel<Out, kC1, kStage1Out>, kStemMmaThreads, smem));
    resident_for = smem;
  }
  int device = 0, sms = 0;
  OASR_CUDA_CHECK(cudaGetDevice(&device));
  OASR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t rows = p.n * (kStage1Out ? g.groups : g.h2);
  const int64_t wave = int64_t{sms} * (resident > 0 ? resident : 1);
  const int grid = static_cast<int>(rows < wave ? rows : wave);
  FusedStemMmaKernel<Out, kC1, kStage1Out><<<grid, kStemMmaThreads, smem, stream>>>(p, g);
}

template <typename Out, bool kStage1Out = false>
void DispatchStemMma(const FusedStemParams& p, GpuStream stream) {
  switch (p.c1) {
    case 64:
      return LaunchStemMma<Out, 64, kStage1Out>(p, stream);
    case 128:
      return LaunchStemMma<Out, 128, kStage1Out>(p, stream);
    case 256:
      return LaunchStemMma<Out, 256, kStage1Out>(p, stream);
    default:
      return LaunchStemMma<Out, 512, kStage1Out>(p, stream);
  }
}

bool StemVecFits(const FusedStemParams& p) {
  return p.patch_dtype != DType::kFloat32 && p.c1 % 8 == 0 && kStemThreads % (p.c1 / 8) == 0 &&
         p.ld % 8 == 0 && reinterpret_cast<uintptr_t>(p.patches) % 16 == 0;
}

}  // namespace

void LaunchFusedStem(const FusedStemParams& p, GpuStream stream) {
  const int64_t h1 = Conv2dOp::OutSize(p.h, 3, p.s1), w1 = Conv2dOp::OutSize(p.w, 3, p.s1);
  const int64_t h2 = Conv2dOp::OutSize(h1, p.k2, p.s2), w2 = Conv2dOp::OutSize(w1, p.k2, p.s2);
  const int64_t blocks = p.n * h2;
  if (blocks == 0) return;
  const int rows_needed = (p.k2 - 1) * p.s1 + 3;
  const size_t smem = static_cast<size_t>(rows_needed) * p.w * sizeof(float);
  const int grid = static_cast<int>(blocks < 65535 * 16 ? blocks : 65535 * 16);
  if (p.kernel != StemKernel::kRecompute && StemMmaFits(p)) {
    if (p.patch_dtype == DType::kBFloat16) {
      DispatchStemMma<__nv_bfloat16>(p, stream);
    } else {
      DispatchStemMma<__half>(p, stream);
    }
    OASR_CUDA_LAUNCH_CHECK();
    return;
  }
  if (StemVecFits(p)) {
    if (p.patch_dtype == DType::kBFloat16) {
      FusedStemVecKernel<__nv_bfloat16><<<grid, kStemThreads, smem, stream>>>(p, h2, w2);
    } else {
      FusedStemVecKernel<__half><<<grid, kStemThreads, smem, stream>>>(p, h2, w2);
    }
    OASR_CUDA_LAUNCH_CHECK();
    return;
  }
  const int threads = p.c1 >= 256 ? 256 : (p.c1 + 31) / 32 * 32;
  OASR_DISPATCH_FLOAT(p.patch_dtype, Out, {
    FusedStemKernel<Out>
        <<<static_cast<int>(blocks < 65535 * 16 ? blocks : 65535 * 16), threads, smem, stream>>>(
            p, h2, w2);
  });
  OASR_CUDA_LAUNCH_CHECK();
}

void LaunchStemStage1(const FusedStemParams& p, GpuStream stream) {
  if (p.n == 0 || Conv2dOp::OutSize(p.h, 3, p.s1) == 0) return;
  if (p.patch_dtype == DType::kBFloat16) {
    DispatchStemMma<__nv_bfloat16, true>(p, stream);
  } else {
    DispatchStemMma<__half, true>(p, stream);
  }
  OASR_CUDA_LAUNCH_CHECK();
}

void LaunchIm2Col(const Im2ColParams& p, GpuStream stream) {
  const int64_t t_out = Conv2dOp::OutSize(p.h, p.kernel, p.stride);
  const int64_t f_out = Conv2dOp::OutSize(p.w, p.kernel, p.stride);
  const int64_t rows = p.n * t_out * f_out;
  if (rows == 0) return;
  const int threads = p.ld >= 512 ? 256 : (p.ld >= 64 ? 64 : 32);
  const int blocks = static_cast<int>(rows < 65535 * 16 ? rows : 65535 * 16);
  const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  const int64_t vec = 16 / static_cast<int64_t>(DTypeSize(p.in_dtype));
  if (p.in_dtype == p.patch_dtype && p.c % vec == 0 && p.ld % vec == 0 && aligned(p.in) &&
      aligned(p.patches)) {
    OASR_DISPATCH_FLOAT(p.in_dtype, T,
                        { Im2ColVecKernel<T><<<blocks, 128, 0, stream>>>(p, t_out, f_out); });
  } else {
    OASR_DISPATCH_FLOAT(p.in_dtype, In, {
      OASR_DISPATCH_FLOAT(p.patch_dtype, Out, {
        Im2ColKernel<In, Out><<<blocks, threads, 0, stream>>>(p, t_out, f_out);
      });
    });
  }
  OASR_CUDA_LAUNCH_CHECK();
}

}  // namespace oasr::kernels
