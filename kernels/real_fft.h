// Power spectrum of a real frame by FFT in float64 (the fbank's 512-point
// transform; float64 keeps it well inside the 1e-3 agreement the front end
// promises with torchaudio's float32 one). The n real samples are packed
// into an n/2-point complex transform (even samples real, odd imaginary),
// run as an iterative radix-2 FFT over split real/imaginary arrays with
// per-stage contiguous twiddles, and unpacked into the n/2 + 1 bins.
#pragma once

#include <vector>

namespace oasr::kernels {

class RealFft {
 public:
  // `n` must be a power of two >= 2 (CHECKed: a programming error).
  explicit RealFft(int n);

  int size() const { return n_; }
  // power[k] = |X_k|^2 for k = 0 .. n/2 of the real input in[0, n).
  // Uses `scratch` (resized to n doubles); thread-compatible (one scratch per
  // thread).
  void PowerSpectrum(const double* in, double* power, std::vector<double>* scratch) const;

 private:
  int n_;
  int half_;                       // m = n / 2: the complex transform's size.
  std::vector<int> bit_reverse_;   // of m.
  // Stage twiddles exp(-2 pi i j / len), j < len / 2, for len = 2, 4 .. m,
  // one stage after the other (m - 1 entries), split into real and imaginary.
  std::vector<double> stage_re_, stage_im_;
  // Unpacking twiddles exp(-2 pi i k / n), k < m.
  std::vector<double> unpack_re_, unpack_im_;
};

}  // namespace oasr::kernels
