#include "kernels/log_mel.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/pcm16.h"
#include "kernels/real_fft.h"

namespace oasr::kernels {

std::vector<int32_t> MelSpans(const float* mel, int bins) {
  constexpr int kBins = kLogMelFftBins;
  std::vector<int32_t> spans(2 * static_cast<size_t>(std::max(bins, 0)));
  for (int m = 0; m < bins; ++m) {
    const float* w = mel + static_cast<int64_t>(m) * kBins;
    int a = 0, b = kBins;
    while (a < kBins && w[a] == 0.0f) ++a;
    while (b > a && w[b - 1] == 0.0f) --b;
    spans[2 * m] = a;
    spans[2 * m + 1] = b;
  }
  return spans;
}

void LogMelCpu(const LogMelParams& p, ThreadPool* pool) {
  constexpr int kN = kLogMelFrameLength, kBins = kLogMelFftBins, kFft = 2 * (kBins - 1);
  constexpr double kFloor = 1.1920928955078125e-07;
  static const RealFft* const fft = new RealFft(kFft);  // never destroyed: no exit-order hazard
  std::vector<double> window(kN);
  for (int n = 0; n < kN; ++n) window[n] = double{p.window[n]} + double{p.window[kN + n]};
  // Each mel row's nonzero span [first, last): the weights are triangles, so
  // the dense table is mostly zeros.
  std::vector<int32_t> found;
  if (p.mel_spans == nullptr) found = MelSpans(p.mel, p.bins);
  const int32_t* spans = p.mel_spans != nullptr ? p.mel_spans : found.data();
  auto row = [&](int64_t r) {
    std::vector<double> x(kFft, 0.0), power(kBins), scratch;
    for (int t = 0; t < p.max_frames; ++t) {
      float* out = p.out + (r * p.max_frames + t) * p.bins;
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
      fft->PowerSpectrum(x.data(), power.data(), &scratch);
      for (int m = 0; m < p.bins; ++m) {
        const float* w = p.mel + static_cast<int64_t>(m) * kBins;
        double e = 0.0;
        // The power is rounded to float as the GPU kernel keeps it.
        for (int k = spans[2 * m]; k < spans[2 * m + 1]; ++k) {
          e += double{w[k]} * static_cast<float>(power[k]);
        }
        double v = std::log(std::max(e, kFloor));
        if (p.mean != nullptr) v = (v - p.mean[m]) * p.istd[m];
        out[m] = static_cast<float>(v);
      }
    }
  };
  if (pool == nullptr || pool->threads() == 1 || p.rows == 1) {
    for (int64_t r = 0; r < p.rows; ++r) row(r);
  } else {
    pool->ParallelFor(p.rows, row);
  }
}

absl::Status LogMel(ExecutionContext& ctx, const LogMelParams& p) {
  if (p.rows == 0) return absl::OkStatus();
  if (p.pcm == nullptr || p.frames == nullptr || p.window == nullptr || p.mel == nullptr ||
      p.out == nullptr || p.rows < 0 || p.max_frames < 1 || p.bins < 1 || p.bins > 128 ||
      (p.mean == nullptr) != (p.istd == nullptr) ||
      p.pcm_stride < int64_t{p.max_frames - 1} * kLogMelFrameShift + kLogMelFrameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("log_mel: ", p.rows, " rows of ", p.max_frames, " frames, stride ",
                     p.pcm_stride, ", ", p.bins,
                     " bins (every table, bins in [1, 128], stride >= (frames - 1) x 160 + 400, "
                     "mean and istd together)"));
  }
  if (!ctx.is_cuda()) {
    LogMelCpu(p, &ctx.threads());
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  LaunchLogMel(p, ctx.stream());
#endif
  return absl::OkStatus();
}

absl::Status GatherPcm(ExecutionContext& ctx, const GatherPcmParams& p) {
  if (p.rows == 0) return absl::OkStatus();
  if (p.ring == nullptr || p.slots == nullptr || p.starts == nullptr || p.feat_frames == nullptr ||
      p.out == nullptr || p.rows < 0 || p.width < 8 || p.width % 8 != 0 || p.window_rows < 1 ||
      p.ring_rows < p.window_rows || p.out_stride < int64_t{p.window_rows} * p.width ||
      p.out_stride % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gather_pcm: ", p.rows, " rows of ", p.window_rows, " x ", p.width,
        " samples from rings of ", p.ring_rows, " rows into a stride of ", p.out_stride,
        " (every pointer, width a multiple of 8, window <= ring, stride >= window x width "
        "and a multiple of 4)"));
  }
  if (!ctx.is_cuda()) {
    const int64_t row_samples = int64_t{p.window_rows} * p.width;
    for (int r = 0; r < p.rows; ++r) {
      if (p.feat_frames[r] == 0) continue;
      const int16_t* lane = p.ring + int64_t{p.slots[r]} * p.ring_rows * p.width;
      float* out = p.out + r * p.out_stride;
      // At most two pieces: up to the ring's end, then from its start.
      const int64_t first = std::min<int64_t>(p.window_rows, p.ring_rows - p.starts[r]);
      Pcm16ToFloat(lane + int64_t{p.starts[r]} * p.width, first * p.width, out);
      Pcm16ToFloat(lane, row_samples - first * p.width, out + first * p.width);
    }
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  LaunchGatherPcm(p, ctx.stream());
#endif
  return absl::OkStatus();
}

}  // namespace oasr::kernels
