// One block of 256 threads per (row, 8 frames). The frames go two at a time
// through one 512-point complex FFT in double (frame A as the real part,
// frame B as the imaginary part, split apart after: a real signal's spectrum
// is conjugate-symmetric), radix 2 in shared memory, one butterfly a thread
// a stage; then one thread per (frame, mel bin) over that bin's nonzero span
// of the weights. The twiddles and the window are set up once a block, for
// its 8 frames; the spans come with the tables (LogMelParams::mel_spans).
#include "kernels/cuda_common.cuh"
#include "kernels/log_mel.h"

namespace oasr::kernels {
namespace {

constexpr int kThreads = 256;  // One butterfly a thread per stage.
constexpr int kFft = 512, kLog2Fft = 9;
constexpr int kFramesPerBlock = 8;
constexpr int kMaxBins = 128;  // LogMel checks bins <= 128.

__device__ __forceinline__ double2 Mul(double2 a, double2 b) {
  return make_double2(fma(a.x, b.x, -a.y * b.y), fma(a.x, b.y, a.y * b.x));
}

__global__ void __launch_bounds__(kThreads) LogMelKernel(LogMelParams p) {
  constexpr int kN = kLogMelFrameLength, kBins = kLogMelFftBins;
  static_assert(kFft == 2 * (kBins - 1) && kN <= kFft && kN <= 2 * kThreads);
  static_assert(2 * kMaxBins <= kThreads && kFft == 2 * kThreads);
  __shared__ double2 z[kFft];
  __shared__ double2 twiddle[kFft / 2];  // exp(-2 pi i j / 512)
  __shared__ double window[kN];
  __shared__ float power[2][kBins];
  __shared__ int first[kMaxBins], last[kMaxBins];
  __shared__ double2 partial[kThreads / 32];
  // Rows on x (up to 2^31 - 1 of them), a row's groups of 8 frames on y.
  const int r = blockIdx.x, tid = threadIdx.x;
  const int t_begin = blockIdx.y * kFramesPerBlock;
  const int frames = p.frames[r];
  const int t_end = min(t_begin + kFramesPerBlock, p.max_frames);
  float* const out_row = p.out + static_cast<int64_t>(r) * p.max_frames * p.bins;
  if (t_begin >= frames) {
    for (int i = tid; i < (t_end - t_begin) * p.bins; i += kThreads) {
      out_row[static_cast<int64_t>(t_begin) * p.bins + i] = 0.0f;
    }
    return;
  }
  // The block's tables.
  {
    double s, c;
    sincospi(-tid / 256.0, &s, &c);
    twiddle[tid] = make_double2(c, s);
  }
  for (int n = tid; n < kN; n += kThreads) {
    window[n] = static_cast<double>(p.window[n]) + static_cast<double>(p.window[kN + n]);
  }
  // Each mel row's nonzero span (the weights are triangles): given, or found
  // by a scan of the whole table.
  if (p.mel_spans != nullptr) {
    for (int m = tid; m < p.bins; m += kThreads) {
      first[m] = p.mel_spans[2 * m];
      last[m] = p.mel_spans[2 * m + 1];
    }
  } else {
    for (int m = tid; m < p.bins; m += kThreads) {
      first[m] = kBins;
      last[m] = 0;
    }
    __syncthreads();
    for (int i = tid; i < p.bins * kBins; i += kThreads) {
      const int m = i / kBins, k = i - m * kBins;
      if (p.mel[i] != 0.0f) {
        atomicMin(&first[m], k);
        atomicMax(&last[m], k + 1);
      }
    }
  }
  // Sums of (a, b) over the block.
  auto block_sum = [&](double2 v) {
    for (int o = 16; o > 0; o >>= 1) {
      v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
      v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
    }
    __syncthreads();
    if ((tid & 31) == 0) partial[tid >> 5] = v;
    __syncthreads();
    double2 total = make_double2(0.0, 0.0);
    for (int w = 0; w < kThreads / 32; ++w) {
      total.x += partial[w].x;
      total.y += partial[w].y;
    }
    return total;
  };
  const float* const pcm_row = p.pcm + r * p.pcm_stride;
  for (int ta = t_begin; ta < t_end; ta += 2) {
    const int tb = ta + 1;
    const bool a_on = ta < frames, b_on = tb < t_end && tb < frames;
    if (!a_on) {
      // Past the row's frames, and so is the rest of the block's: zeros.
      for (int i = tid; i < (t_end - ta) * p.bins; i += kThreads) {
        out_row[static_cast<int64_t>(ta) * p.bins + i] = 0.0f;
      }
      break;
    }
    const float* sa = pcm_row + static_cast<int64_t>(ta) * kLogMelFrameShift;
    const float* sb = b_on ? sa + kLogMelFrameShift : sa;
    // The frames' means.
    double2 sum = make_double2(0.0, 0.0);
    for (int n = tid; n < kN; n += kThreads) {
      sum.x += sa[n];
      sum.y += sb[n];
    }
    const double2 total = block_sum(sum);
    const double mean_a = total.x / kN, mean_b = total.y / kN;
    // DC removed, pre-emphasis, window; stored bit-reversed for the FFT.
    for (int n = tid; n < kFft; n += kThreads) {
      double va = 0.0, vb = 0.0;
      if (n < kN) {
        const int prev = n > 0 ? n - 1 : 0;
        va = ((sa[n] - mean_a) - 0.97 * (sa[prev] - mean_a)) * window[n];
        vb = b_on ? ((sb[n] - mean_b) - 0.97 * (sb[prev] - mean_b)) * window[n] : 0.0;
      }
      z[__brev(static_cast<unsigned>(n)) >> (32 - kLog2Fft)] = make_double2(va, vb);
    }
    __syncthreads();
    // Radix-2 decimation in time: stage s joins pairs 2^s apart.
#pragma unroll
    for (int s = 0; s < kLog2Fft; ++s) {
      const int half = 1 << s;
      const int pos = tid & (half - 1);
      const int i0 = ((tid >> s) << (s + 1)) + pos, i1 = i0 + half;
      const double2 w = twiddle[pos << (kLog2Fft - 1 - s)];
      const double2 u = z[i0], v = Mul(w, z[i1]);
      z[i0] = make_double2(u.x + v.x, u.y + v.y);
      z[i1] = make_double2(u.x - v.x, u.y - v.y);
      __syncthreads();
    }
    // Split the two spectra: A[k] = (Z[k] + conj Z[-k]) / 2, B[k] = (Z[k] - conj Z[-k]) / 2i.
    for (int k = tid; k < kBins; k += kThreads) {
      const double2 zk = z[k], zn = z[(kFft - k) & (kFft - 1)];
      const double ar = zk.x + zn.x, ai = zk.y - zn.y;  // 2 A[k]
      const double br = zk.x - zn.x, bi = zk.y + zn.y;  // 2i B[k]
      power[0][k] = static_cast<float>(0.25 * (ar * ar + ai * ai));
      power[1][k] = static_cast<float>(0.25 * (br * br + bi * bi));
    }
    __syncthreads();
    // Mel bins: threads [0, bins) for A, [128, 128 + bins) for B.
    const int f = tid / kMaxBins, m = tid - f * kMaxBins;
    if (m < p.bins && (f == 0 || b_on)) {
      const float* w = p.mel + static_cast<int64_t>(m) * kBins;
      double e = 0.0;
      for (int k = first[m]; k < last[m]; ++k) {
        e = fma(static_cast<double>(w[k]), static_cast<double>(power[f][k]), e);
      }
      float v = logf(static_cast<float>(fmax(e, 1.1920928955078125e-07)));
      if (p.mean != nullptr) v = (v - p.mean[m]) * p.istd[m];
      out_row[static_cast<int64_t>(ta + f) * p.bins + m] = v;
    } else if (m < p.bins && f == 1 && tb < t_end) {
      out_row[static_cast<int64_t>(tb) * p.bins + m] = 0.0f;  // tb past the row's frames.
    }
    __syncthreads();  // z and power are the next pair's.
  }
}

// One block a row; 16-byte loads of 8 samples from the ring (page-locked
// host memory, read over the bus once), widened to float32 and stored as two
// 16-byte vectors, a window's rows contiguous but for the wrap at the ring's
// end.
__global__ void __launch_bounds__(256) GatherPcmKernel(GatherPcmParams p) {
  const int r = blockIdx.x;
  if (p.feat_frames[r] == 0) return;
  const int vecs_per_row = p.width / 8;
  const int64_t total = int64_t{p.window_rows} * vecs_per_row;
  const uint4* lane = reinterpret_cast<const uint4*>(p.ring + static_cast<int64_t>(p.slots[r]) *
                                                                  p.ring_rows * p.width);
  float4* out = reinterpret_cast<float4*>(p.out + static_cast<int64_t>(r) * p.out_stride);
  const int64_t start = static_cast<int64_t>(p.starts[r]) * vecs_per_row;
  const int64_t ring_vecs = p.ring_rows * vecs_per_row;
  const auto lo = [](uint32_t v) { return static_cast<float>(static_cast<int16_t>(v & 0xffffu)); };
  const auto hi = [](uint32_t v) { return static_cast<float>(static_cast<int16_t>(v >> 16)); };
  for (int64_t i = threadIdx.x; i < total; i += blockDim.x) {
    int64_t at = start + i;
    if (at >= ring_vecs) at -= ring_vecs;
    const uint4 v = lane[at];
    out[2 * i] = make_float4(lo(v.x), hi(v.x), lo(v.y), hi(v.y));
    out[2 * i + 1] = make_float4(lo(v.z), hi(v.z), lo(v.w), hi(v.w));
  }
}

}  // namespace

void LaunchGatherPcm(const GatherPcmParams& p, GpuStream stream) {
  if (p.rows == 0) return;
  GatherPcmKernel<<<p.rows, 256, 0, stream>>>(p);
  OASR_CUDA_LAUNCH_CHECK();
}

void LaunchLogMel(const LogMelParams& p, GpuStream stream) {
  if (p.rows == 0) return;
  const int blocks = (p.max_frames + kFramesPerBlock - 1) / kFramesPerBlock;
  LogMelKernel<<<dim3(p.rows, blocks), kThreads, 0, stream>>>(p);
  OASR_CUDA_LAUNCH_CHECK();
}

}  // namespace oasr::kernels
