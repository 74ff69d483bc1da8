#include "kernels/cuda_common.cuh"
#include "kernels/feed_forward.h"

namespace oasr::kernels {
namespace {

using cuda::CommitAsync;
using cuda::CopyAsync16;
using cuda::FromFloat;
using cuda::LoadMatrix4;
using cuda::ToFloat;

constexpr int kD = 256;        // d_model the kernel is built for.
constexpr int kChunk = 64;     // Hidden units a step.
constexpr int kThreads = 256;  // Eight warps.
constexpr int kWarps = kThreads / 32;
// Row strides in shared memory, padded by 16 bytes so that the eight rows an
// ldmatrix reads fall in different banks.
constexpr int kXStride = kD + 8;       // Normalised rows [rows][d], 16-bit.
constexpr int kW1Stride = kD + 8;      // W1 slice [64 units][d].
constexpr int kW2Stride = kChunk + 8;  // W2 slice [d][64 units].
constexpr int kHStride = kChunk + 8;   // swish(...) slice [rows][64 units].
constexpr int kYStride = kD + 8;       // The second product [rows][d], float32.

template <int kBM>
struct Layout {
  static constexpr size_t kW1 = size_t{kChunk} * kW1Stride * 2;  // One buffer.
  static constexpr size_t kW2 = size_t{kD} * kW2Stride * 2;
  static constexpr size_t kWeights = 2 * (kW1 + kW2);       // Double-buffered.
  static constexpr size_t kY = size_t{kBM} * kYStride * 4;  // Reuses the weights' space.
  static constexpr size_t kFront = kWeights > kY ? kWeights : kY;
  static constexpr size_t kX = size_t{kBM} * kXStride * 2;
  static constexpr size_t kH = size_t{kBM} * kHStride * 2;
  static constexpr size_t kTotal = kFront + kX + kH;
};
static_assert(Layout<128>::kTotal <= 227 * 1024, "shared memory of the 128-row block");

// swish of the value as the unfused path sees it: rounded to T first (the
// GEMM's output), the result rounded again.
template <typename T>
__device__ __forceinline__ float Swish(float v) {
  const float r = ToFloat(FromFloat<T>(v));
  return r * cuda::Sigmoid(r);
}

// Mean and 1/sqrt(var + eps) of a row of 256 held 8 to a lane.
__device__ __forceinline__ void RowStats(const float* v, float eps, float& mean, float& inv) {
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += v[j];
  mean = cuda::WarpSum(s) / static_cast<float>(kD);
  float sq = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) sq += (v[j] - mean) * (v[j] - mean);
  inv = rsqrtf(cuda::WarpSum(sq) / static_cast<float>(kD) + eps);
}

// A lane's 8 columns of a row: 4 * lane + j and 128 + 4 * lane + j (each half
// of the row a warp reads as 512 contiguous bytes).
__device__ __forceinline__ int Col(int lane, int j) { return (j / 4) * 128 + 4 * lane + j % 4; }

// One block: kBM rows. Warps split the hidden slice [kBM, 64] as 4 x 2 tiles
// of (kBM / 4) x 32 and the output [kBM, 256] as 2 x 4 tiles of
// (kBM / 2) x 64, whose float32 accumulators stay in registers across all
// slices.
template <typename T, int kBM>
__global__ void __launch_bounds__(kThreads, 1) FeedForwardKernel(FeedForwardParams p) {
  using L = Layout<kBM>;
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t* w1s = reinterpret_cast<uint16_t*>(smem);               // [2][64][kW1Stride]
  uint16_t* w2s = reinterpret_cast<uint16_t*>(smem + 2 * L::kW1);  // [2][256][kW2Stride]
  float* ys = reinterpret_cast<float*>(smem);                      // [kBM][kYStride], at the end.
  uint16_t* xs = reinterpret_cast<uint16_t*>(smem + L::kFront);
  uint16_t* hs = reinterpret_cast<uint16_t*>(smem + L::kFront + L::kX);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int gid = lane / 4, q = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBM;
  const int rows = static_cast<int>(p.m - row0 < kBM ? p.m - row0 : kBM);
  const auto* w1 = static_cast<const uint16_t*>(p.w1);
  const auto* w2 = static_cast<const uint16_t*>(p.w2);
  const int units = static_cast<int>(p.units);
  const int chunks = units / kChunk;

  auto load_slice = [&](int c, int buf) {
    uint16_t* d1 = w1s + buf * kChunk * kW1Stride;
    const uint16_t* s1 = w1 + static_cast<int64_t>(c) * kChunk * kD;
    for (int i = tid; i < kChunk * kD / 8; i += kThreads) {
      const int r = i / (kD / 8), col = (i % (kD / 8)) * 8;
      CopyAsync16(d1 + r * kW1Stride + col, s1 + r * kD + col);
    }
    uint16_t* d2 = w2s + buf * kD * kW2Stride;
    const uint16_t* s2 = w2 + static_cast<int64_t>(c) * kChunk;
    for (int i = tid; i < kD * kChunk / 8; i += kThreads) {
      const int r = i / (kChunk / 8), col = (i % (kChunk / 8)) * 8;
      CopyAsync16(d2 + r * kW2Stride + col, s2 + static_cast<int64_t>(r) * units + col);
    }
    CommitAsync();
  };
  load_slice(0, 0);

  // The module's LayerNorm of the block's rows into xs (rows past m: zeros).
  for (int r = warp; r < kBM; r += kWarps) {
    uint32_t packed[4] = {0, 0, 0, 0};
    if (r < rows) {
      const float* xr = p.x + (row0 + r) * p.ldx;
      const float4 lo = *reinterpret_cast<const float4*>(xr + 4 * lane);
      const float4 hi = *reinterpret_cast<const float4*>(xr + 128 + 4 * lane);
      const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      float mean, inv;
      RowStats(v, p.eps, mean, inv);
      float o[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int c = Col(lane, j);
        o[j] = (v[j] - mean) * inv * p.norm_scale[c] + p.norm_shift[c];
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) packed[j] = cuda::PackPair<T>(o[2 * j], o[2 * j + 1]);
    }
    *reinterpret_cast<uint2*>(xs + r * kXStride + 4 * lane) = make_uint2(packed[0], packed[1]);
    *reinterpret_cast<uint2*>(xs + r * kXStride + 128 + 4 * lane) =
        make_uint2(packed[2], packed[3]);
  }

  constexpr int kHM = kBM / 4 / 16;  // m16 tiles of a warp's hidden tile.
  constexpr int kOM = kBM / 2 / 16;  // m16 tiles of a warp's output tile.
  const int h_row = (warp / 2) * (kBM / 4), h_col = (warp % 2) * 32;
  const int o_row = (warp / 4) * (kBM / 2), o_col = (warp % 4) * 64;
  // ldmatrix addresses: A tiles (row lane % 16, k half lane / 16), B tiles
  // (n (lane / 16) * 8 + lane % 8, k half (lane / 8) % 2).
  const int a_row = lane % 16, a_k = (lane / 16) * 8;
  const int b_n = (lane / 16) * 8 + lane % 8, b_k = ((lane / 8) % 2) * 8;
  float acc[kOM][8][4];
#pragma unroll
  for (int mt = 0; mt < kOM; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
    }
  }

  for (int c = 0; c < chunks; ++c) {
    const int buf = c & 1;
    cuda::WaitAsync<0>();
    __syncthreads();  // Slice c (and xs) visible; slice c - 1 and hs no longer read.
    if (c + 1 < chunks) load_slice(c + 1, buf ^ 1);
    const uint16_t* w1c = w1s + buf * kChunk * kW1Stride;
    const uint16_t* w2c = w2s + buf * kD * kW2Stride;

    // h = swish(xs W1c^T + b1): this warp's (kBM / 4) x 32.
    float h[kHM][4][4];
#pragma unroll
    for (int mt = 0; mt < kHM; ++mt) {
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) h[mt][nt][e] = 0.0f;
      }
    }
#pragma unroll 4
    for (int k = 0; k < kD; k += 16) {
      uint32_t a[kHM][4], b[2][4];
#pragma unroll
      for (int mt = 0; mt < kHM; ++mt) {
        LoadMatrix4(xs + (h_row + mt * 16 + a_row) * kXStride + k + a_k, a[mt]);
      }
#pragma unroll
      for (int nb = 0; nb < 2; ++nb) {
        LoadMatrix4(w1c + (h_col + nb * 16 + b_n) * kW1Stride + k + b_k, b[nb]);
      }
#pragma unroll
      for (int mt = 0; mt < kHM; ++mt) {
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          cuda::Mma<T>(h[mt][nt], a[mt], b[nt / 2][(nt % 2) * 2], b[nt / 2][(nt % 2) * 2 + 1]);
        }
      }
    }
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int col = h_col + nt * 8 + 2 * q;
      const float2 bias = *reinterpret_cast<const float2*>(p.b1 + c * kChunk + col);
#pragma unroll
      for (int mt = 0; mt < kHM; ++mt) {
        const int r = h_row + mt * 16 + gid;
        *reinterpret_cast<uint32_t*>(hs + r * kHStride + col) =
            cuda::PackPair<T>(Swish<T>(h[mt][nt][0] + bias.x), Swish<T>(h[mt][nt][1] + bias.y));
        *reinterpret_cast<uint32_t*>(hs + (r + 8) * kHStride + col) =
            cuda::PackPair<T>(Swish<T>(h[mt][nt][2] + bias.x), Swish<T>(h[mt][nt][3] + bias.y));
      }
    }
    __syncthreads();  // hs complete.

    // acc += hs W2c^T: this warp's (kBM / 2) x 64.
#pragma unroll
    for (int k = 0; k < kChunk; k += 16) {
      uint32_t a[kOM][4];
#pragma unroll
      for (int mt = 0; mt < kOM; ++mt) {
        LoadMatrix4(hs + (o_row + mt * 16 + a_row) * kHStride + k + a_k, a[mt]);
      }
#pragma unroll
      for (int nb = 0; nb < 4; ++nb) {
        uint32_t b[4];
        LoadMatrix4(w2c + (o_col + nb * 16 + b_n) * kW2Stride + k + b_k, b);
#pragma unroll
        for (int mt = 0; mt < kOM; ++mt) {
          cuda::Mma<T>(acc[mt][2 * nb], a[mt], b[0], b[1]);
          cuda::Mma<T>(acc[mt][2 * nb + 1], a[mt], b[2], b[3]);
        }
      }
    }
  }

  // The product through shared memory (over the weight buffers, now free),
  // then each row whole: x + product + b2, and the final norm.
  __syncthreads();
#pragma unroll
  for (int mt = 0; mt < kOM; ++mt) {
    const int r = o_row + mt * 16 + gid;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int col = o_col + nt * 8 + 2 * q;
      *reinterpret_cast<float2*>(ys + r * kYStride + col) =
          make_float2(acc[mt][nt][0], acc[mt][nt][1]);
      *reinterpret_cast<float2*>(ys + (r + 8) * kYStride + col) =
          make_float2(acc[mt][nt][2], acc[mt][nt][3]);
    }
  }
  __syncthreads();
  for (int r = warp; r < rows; r += kWarps) {
    float* xr = p.x + (row0 + r) * p.ldx;
    float v[8];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int c = half * 128 + 4 * lane;
      const float4 x4 = *reinterpret_cast<const float4*>(xr + c);
      const float4 y4 = *reinterpret_cast<const float4*>(ys + r * kYStride + c);
      const float4 b4 = *reinterpret_cast<const float4*>(p.b2 + c);
      v[half * 4 + 0] = x4.x + (y4.x + b4.x);
      v[half * 4 + 1] = x4.y + (y4.y + b4.y);
      v[half * 4 + 2] = x4.z + (y4.z + b4.z);
      v[half * 4 + 3] = x4.w + (y4.w + b4.w);
    }
    if (p.final_scale != nullptr) {
      float mean, inv;
      RowStats(v, p.final_eps, mean, inv);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int c = Col(lane, j);
        v[j] = (v[j] - mean) * inv * p.final_scale[c] + p.final_shift[c];
      }
    }
    *reinterpret_cast<float4*>(xr + 4 * lane) = make_float4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<float4*>(xr + 128 + 4 * lane) = make_float4(v[4], v[5], v[6], v[7]);
  }
}

template <typename T, int kBM>
void Prepare() {
  OASR_CUDA_CHECK(cudaFuncSetAttribute(FeedForwardKernel<T, kBM>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(Layout<kBM>::kTotal)));
}

template <typename T, int kBM>
void Launch(const FeedForwardParams& p, GpuStream stream) {
  const int blocks = static_cast<int>((p.m + kBM - 1) / kBM);
  FeedForwardKernel<T, kBM><<<blocks, kThreads, Layout<kBM>::kTotal, stream>>>(p);
  OASR_CUDA_CHECK(cudaGetLastError());
}

int Multiprocessors() {
  static const int count = [] {
    int device = 0, sms = 0;
    OASR_CUDA_CHECK(cudaGetDevice(&device));
    OASR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }();
  return count;
}

}  // namespace

void PrepareFeedForwardKernel() {
  static const bool done = [] {
    Prepare<__nv_bfloat16, 64>();
    Prepare<__nv_bfloat16, 128>();
    Prepare<__half, 64>();
    Prepare<__half, 128>();
    return true;
  }();
  (void)done;
}

void LaunchFeedForward(const FeedForwardParams& p, GpuStream stream) {
  if (p.m == 0) return;
  PrepareFeedForwardKernel();
  int bm = p.block_rows;
  if (bm == 0) bm = (p.m + 127) / 128 >= Multiprocessors() ? 128 : 64;
  if (p.dtype == DType::kBFloat16) {
    bm == 128 ? Launch<__nv_bfloat16, 128>(p, stream) : Launch<__nv_bfloat16, 64>(p, stream);
  } else {
    bm == 128 ? Launch<__half, 128>(p, stream) : Launch<__half, 64>(p, stream);
  }
}

}  // namespace oasr::kernels
