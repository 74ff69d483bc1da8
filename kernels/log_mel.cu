// One block of 256 threads per (row, frame): the frame in shared memory, a
// direct 257-bin DFT in double (one bin per thread, thread 0 also the
// Nyquist bin) from a 512-entry twiddle table, then one thread per mel bin.
#include "kernels/cuda_common.cuh"
#include "kernels/log_mel.h"

namespace oasr::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void LogMelKernel(LogMelParams p) {
  constexpr int kN = kLogMelFrameLength, kBins = kLogMelFftBins;
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
  double sum = 0.0;
  for (int n = tid; n < kN; n += kThreads) sum += s[n];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if ((tid & 31) == 0) partial[tid >> 5] = sum;
  __syncthreads();
  double mean = 0.0;
  for (int w = 0; w < kThreads / 32; ++w) mean += partial[w];
  mean /= kN;
  for (int n = tid; n < kN; n += kThreads) {
    const double prev = (n > 0 ? s[n - 1] : s[0]) - mean;
    const double window = static_cast<double>(p.window[n]) + static_cast<double>(p.window[kN + n]);
    x[n] = ((s[n] - mean) - 0.97 * prev) * window;
  }
  __syncthreads();
  for (int k = tid; k < kBins; k += kThreads) {
    double re = 0.0, im = 0.0;
    for (int n = 0; n < kN; ++n) {
      const int i = (k * n) & 511;
      re = fma(x[n], cos_t[i], re);
      im = fma(-x[n], sin_t[i], im);
    }
    power[k] = static_cast<float>(re * re + im * im);
  }
  __syncthreads();
  for (int m = tid; m < p.bins; m += kThreads) {
    const float* w = p.mel + static_cast<int64_t>(m) * kBins;
    double e = 0.0;
    for (int k = 0; k < kBins; ++k) e = fma(static_cast<double>(w[k]), power[k], e);
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
