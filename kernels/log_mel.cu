// One block of 128 threads per (row, frame): the frame in shared memory, a
// direct 257-bin DFT in double from a 512-entry twiddle table (each thread
// two bins from the same loads, the Nyquist bin as a block sum), then one
// thread per mel bin.
#include "kernels/cuda_common.cuh"
#include "kernels/log_mel.h"

namespace oasr::kernels {
namespace {

constexpr int kThreads = 128;  // Bins k and k + 128 each; the Nyquist bin by all.

__global__ void __launch_bounds__(kThreads) LogMelKernel(LogMelParams p) {
  constexpr int kN = kLogMelFrameLength, kBins = kLogMelFftBins;
  static_assert(kN % 4 == 0 && kBins == 2 * kThreads + 1);
  __shared__ double x[kN];
  __shared__ double cos_t[512], sin_t[512];
  __shared__ float power[kBins];
  __shared__ double partial[kThreads / 32];
  const int r = blockIdx.y, t = blockIdx.x, tid = threadIdx.x;
  float* out = p.out + (static_cast<int64_t>(r) * p.max_frames + t) * p.bins;
  if (t >= p.frames[r]) {
    for (int m = tid; m < p.bins; m += kThreads) out[m] = 0.0f;
    return;
  }
  for (int i = tid; i < 512; i += kThreads) sincospi(i / 256.0, &sin_t[i], &cos_t[i]);
  const float* s = p.pcm + r * p.pcm_stride + static_cast<int64_t>(t) * kLogMelFrameShift;
  // Block sums: the frame's mean, then its alternating sum (the Nyquist bin).
  auto block_sum = [&](double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((tid & 31) == 0) partial[tid >> 5] = v;
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
    return total;
  };
  double sum = 0.0;
  for (int n = tid; n < kN; n += kThreads) sum += s[n];
  const double mean = block_sum(sum) / kN;
  double alternating = 0.0;
  for (int n = tid; n < kN; n += kThreads) {
    const double prev = (n > 0 ? s[n - 1] : s[0]) - mean;
    const double window = static_cast<double>(p.window[n]) + static_cast<double>(p.window[kN + n]);
    const double v = ((s[n] - mean) - 0.97 * prev) * window;
    x[n] = v;
    alternating += (n & 1) ? -v : v;
  }
  const double nyquist = block_sum(alternating);  // Its __syncthreads also publishes x.
  // Bin k and bin k + 128 from the same loads: the twiddle of (k + 128) n is
  // k n's turned by n quarter turns, so n = 4m + j cycles (c, s) through
  // (c, s), (-s, c), (-c, -s), (s, -c).
  const int k = tid;
  double re0 = 0.0, im0 = 0.0, re1 = 0.0, im1 = 0.0;
  for (int n = 0; n < kN; n += 4) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int i = (k * (n + j)) & 511;
      const double v = x[n + j], c = cos_t[i], sn = sin_t[i];
      re0 = fma(v, c, re0);
      im0 = fma(-v, sn, im0);
      const double c1 = j == 0 ? c : j == 1 ? -sn : j == 2 ? -c : sn;
      const double s1 = j == 0 ? sn : j == 1 ? c : j == 2 ? -sn : -c;
      re1 = fma(v, c1, re1);
      im1 = fma(-v, s1, im1);
    }
  }
  power[k] = static_cast<float>(re0 * re0 + im0 * im0);
  power[k + kThreads] = static_cast<float>(re1 * re1 + im1 * im1);
  if (tid == 0) power[kBins - 1] = static_cast<float>(nyquist * nyquist);
  __syncthreads();
  for (int m = tid; m < p.bins; m += kThreads) {
    const float* w = p.mel + static_cast<int64_t>(m) * kBins;
    double e = 0.0;
    for (int b = 0; b < kBins; ++b) e = fma(static_cast<double>(w[b]), power[b], e);
    float v = logf(static_cast<float>(fmax(e, 1.1920928955078125e-07)));
    if (p.mean != nullptr) v = (v - p.mean[m]) * p.istd[m];
    out[m] = v;
  }
}

}  // namespace

void LaunchLogMel(const LogMelParams& p, GpuStream stream) {
  if (p.rows == 0) return;
  LogMelKernel<<<dim3(p.max_frames, p.rows), kThreads, 0, stream>>>(p);
  OASR_CUDA_LAUNCH_CHECK();
}

}  // namespace oasr::kernels
