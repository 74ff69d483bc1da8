// Power spectrum of a real frame by an iterative radix-2 FFT in float64
// (the fbank's 512-point transform; float64 keeps it well inside the 1e-3
// agreement the front end promises with torchaudio's float32 one).
#pragma once

#include <complex>
#include <vector>

namespace oasr::encoder {

class RealFft {
 public:
  // `n` must be a power of two >= 2 (CHECKed: a programming error).
  explicit RealFft(int n);

  int size() const { return n_; }
  // power[k] = |X_k|^2 for k = 0 .. n/2 of the real input in[0, n).
  // Uses `scratch`; thread-compatible (one scratch per thread).
  void PowerSpectrum(const double* in, double* power, std::vector<std::complex<double>>* scratch) const;

 private:
  int n_;
  std::vector<int> bit_reverse_;
  std::vector<std::complex<double>> twiddle_;  // exp(-2 pi i k / n), k < n/2.
};

}  // namespace oasr::encoder
