#include "kernels/log_mel.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "absl/strings/str_cat.h"

namespace oasr::kernels {

void LogMelCpu(const LogMelParams& p) {
  constexpr int kN = kLogMelFrameLength, kBins = kLogMelFftBins;
  constexpr double kFloor = 1.1920928955078125e-07;
  std::vector<double> cos_table(512), sin_table(512), window(kN), x(kN);
  std::vector<float> power(kBins);
  for (int i = 0; i < 512; ++i) {
    cos_table[i] = std::cos(2.0 * std::numbers::pi * i / 512);
    sin_table[i] = std::sin(2.0 * std::numbers::pi * i / 512);
  }
  for (int n = 0; n < kN; ++n) window[n] = double{p.window[n]} + double{p.window[kN + n]};
  for (int r = 0; r < p.rows; ++r) {
    for (int t = 0; t < p.max_frames; ++t) {
      float* out = p.out + (static_cast<int64_t>(r) * p.max_frames + t) * p.bins;
      if (t >= p.frames[r]) {
        std::fill(out, out + p.bins, 0.0f);
        continue;
      }
      const float* s = p.pcm + r * p.pcm_stride + static_cast<int64_t>(t) * kLogMelFrameShift;
      double mean = 0.0;
      for (int n = 0; n < kN; ++n) mean += s[n];
      mean /= kN;
      for (int n = 0; n < kN; ++n) {
        const double prev = (n > 0 ? s[n - 1] : s[0]) - mean;
        x[n] = ((s[n] - mean) - 0.97 * prev) * window[n];
      }
      for (int k = 0; k < kBins; ++k) {
        double re = 0.0, im = 0.0;
        for (int n = 0; n < kN; ++n) {
          const int i = (k * n) & 511;
          re += x[n] * cos_table[i];
          im -= x[n] * sin_table[i];
        }
        power[k] = static_cast<float>(re * re + im * im);
      }
      for (int m = 0; m < p.bins; ++m) {
        const float* w = p.mel + static_cast<int64_t>(m) * kBins;
        double e = 0.0;
        for (int k = 0; k < kBins; ++k) e += double{w[k]} * power[k];
        double v = std::log(std::max(e, kFloor));
        if (p.mean != nullptr) v = (v - p.mean[m]) * p.istd[m];
        out[m] = static_cast<float>(v);
      }
    }
  }
}

absl::Status LogMel(ExecutionContext& ctx, const LogMelParams& p) {
  if (p.rows == 0) return absl::OkStatus();
  if (p.pcm == nullptr || p.frames == nullptr || p.window == nullptr || p.mel == nullptr ||
      p.out == nullptr || p.rows < 0 || p.max_frames < 1 || p.bins < 1 || p.bins > 128 ||
      (p.mean == nullptr) != (p.istd == nullptr) ||
      p.pcm_stride < int64_t{p.max_frames - 1} * kLogMelFrameShift + kLogMelFrameLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "log_mel: ", p.rows, " rows of ", p.max_frames, " frames, stride ", p.pcm_stride, ", ",
        p.bins, " bins (every table, bins in [1, 128], stride >= (frames - 1) x 160 + 400, "
        "mean and istd together)"));
  }
  if (!ctx.is_cuda()) {
    LogMelCpu(p);
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  LaunchLogMel(p, ctx.stream());
#endif
  return absl::OkStatus();
}

}  // namespace oasr::kernels
