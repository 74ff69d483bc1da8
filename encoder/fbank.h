// Kaldi-compatible log-mel filterbank of spec section 1 (what WeNet computes
// with torchaudio.compliance.kaldi.fbank at 16 kHz): 25 ms frames every
// 10 ms, DC removal, pre-emphasis 0.97, Povey window, 512-point power
// spectrum, 80 HTK-mel triangles from 20 Hz to Nyquist, log floored at
// float epsilon, no energy, no dither.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/real_fft.h"

namespace oasr::encoder {

class Fbank {
 public:
  static constexpr int kSampleRate = 16000;
  static constexpr int kFrameLength = 400;  // samples (25 ms)
  static constexpr int kFrameShift = 160;   // samples (10 ms)
  static constexpr int kNumBins = 80;
  static constexpr int kFftSize = 512;

  Fbank();

  // Frames of a signal of `samples` samples (snip edges): 0 below 400.
  static int64_t NumFrames(int64_t samples) {
    return samples < kFrameLength ? 0 : 1 + (samples - kFrameLength) / kFrameShift;
  }

  // One frame: `samples` holds kFrameLength values in int16 range (a float
  // in [-1, 1) times 32768); writes kNumBins log-mel energies to `out`.
  // Thread-compatible: concurrent calls need distinct Fbank objects.
  void ComputeFrame(const float* samples, float* out);

  // The window and the mel triangles as kernels::LogMel takes them to
  // compute these features on a GPU: the window as [2, kFrameLength] floats,
  // a high and a low part whose sum (in double) is the double window, and
  // the mel triangles as a dense [kNumBins, kFftSize / 2 + 1] float table.
  static void DenseTables(std::vector<float>* window, std::vector<float>* mel);

 private:
  // The immutable part (FFT plan, window, mel triangles): built once per
  // process and shared by every stream's Fbank, which then holds only its
  // three scratch buffers (a server may hold tens of thousands).
  struct Tables {
    Tables();
    kernels::RealFft fft;
    std::vector<double> window;
    // Mel triangle m covers FFT bins [first[m], first[m] + weights[m].size()).
    std::vector<int> first;
    std::vector<std::vector<double>> weights;
  };
  static const Tables& SharedTables();

  const Tables* tables_;
  std::vector<double> frame_;
  std::vector<double> power_;
  std::vector<double> scratch_;
};

}  // namespace oasr::encoder
