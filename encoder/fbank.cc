#include "encoder/fbank.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace oasr::encoder {
namespace {

double MelScale(double hz) { return 1127.0 * std::log(1.0 + hz / 700.0); }

}  // namespace

Fbank::Tables::Tables() : fft(kFftSize), window(kFrameLength), first(kNumBins), weights(kNumBins) {
  for (int n = 0; n < kFrameLength; ++n) {
    window[n] = std::pow(0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * n / (kFrameLength - 1)), 0.85);
  }
  const double mel_low = MelScale(20.0);
  const double mel_high = MelScale(kSampleRate / 2.0);
  const double delta = (mel_high - mel_low) / (kNumBins + 1);
  const double bin_hz = static_cast<double>(kSampleRate) / kFftSize;
  for (int m = 0; m < kNumBins; ++m) {
    const double left = mel_low + m * delta, center = left + delta, right = center + delta;
    first[m] = -1;
    // Bins 0 .. kFftSize/2 - 1; the Nyquist bin gets no weight.
    for (int k = 0; k < kFftSize / 2; ++k) {
      const double mel = MelScale(bin_hz * k);
      const double w = std::max(0.0, std::min((mel - left) / (center - left), (right - mel) / (right - center)));
      if (w > 0.0) {
        if (first[m] < 0) first[m] = k;
        weights[m].resize(k - first[m] + 1, 0.0);
        weights[m][k - first[m]] = w;
      }
    }
    if (first[m] < 0) first[m] = 0;
  }
}

const Fbank::Tables& Fbank::SharedTables() {
  static const Tables* const tables = new Tables();  // never destroyed: no exit-order hazard
  return *tables;
}

void Fbank::DenseTables(std::vector<float>* window, std::vector<float>* mel) {
  const Tables& t = SharedTables();
  window->assign(2 * kFrameLength, 0.0f);
  for (int n = 0; n < kFrameLength; ++n) {
    const float hi = static_cast<float>(t.window[n]);
    (*window)[n] = hi;
    (*window)[kFrameLength + n] = static_cast<float>(t.window[n] - hi);
  }
  constexpr int kBins = kFftSize / 2 + 1;
  mel->assign(static_cast<size_t>(kNumBins) * kBins, 0.0f);
  for (int m = 0; m < kNumBins; ++m) {
    for (size_t i = 0; i < t.weights[m].size(); ++i) {
      (*mel)[static_cast<size_t>(m) * kBins + t.first[m] + i] = static_cast<float>(t.weights[m][i]);
    }
  }
}

Fbank::Fbank() : tables_(&SharedTables()), frame_(kFftSize), power_(kFftSize / 2 + 1) {}

void Fbank::ComputeFrame(const float* samples, float* out) {
  double mean = 0.0;
  for (int n = 0; n < kFrameLength; ++n) mean += samples[n];
  mean /= kFrameLength;
  for (int n = 0; n < kFrameLength; ++n) frame_[n] = samples[n] - mean;
  for (int n = kFrameLength - 1; n > 0; --n) frame_[n] -= 0.97 * frame_[n - 1];
  frame_[0] -= 0.97 * frame_[0];
  const Tables& t = *tables_;
  for (int n = 0; n < kFrameLength; ++n) frame_[n] *= t.window[n];
  std::fill(frame_.begin() + kFrameLength, frame_.end(), 0.0);
  t.fft.PowerSpectrum(frame_.data(), power_.data(), &scratch_);
  constexpr double kFloor = 1.1920928955078125e-07;  // float32 epsilon
  for (int m = 0; m < kNumBins; ++m) {
    double e = 0.0;
    const std::vector<double>& w = t.weights[m];
    const double* p = power_.data() + t.first[m];
    for (size_t i = 0; i < w.size(); ++i) e += w[i] * p[i];
    out[m] = static_cast<float>(std::log(std::max(e, kFloor)));
  }
}

}  // namespace oasr::encoder
