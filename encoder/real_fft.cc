#include "encoder/real_fft.h"

#include <cmath>
#include <numbers>

#include "common/check.h"

namespace oasr::encoder {

RealFft::RealFft(int n) : n_(n), bit_reverse_(n), twiddle_(n / 2) {
  OASR_CHECK(n >= 2 && (n & (n - 1)) == 0, "FFT size must be a power of two");
  int bits = 0;
  while ((1 << bits) < n) ++bits;
  for (int i = 0; i < n; ++i) {
    int r = 0;
    for (int b = 0; b < bits; ++b) r |= ((i >> b) & 1) << (bits - 1 - b);
    bit_reverse_[i] = r;
  }
  for (int k = 0; k < n / 2; ++k) {
    const double a = -2.0 * std::numbers::pi * k / n;
    twiddle_[k] = {std::cos(a), std::sin(a)};
  }
}

void RealFft::PowerSpectrum(const double* in, double* power,
                            std::vector<std::complex<double>>* scratch) const {
  std::vector<std::complex<double>>& x = *scratch;
  x.resize(n_);
  for (int i = 0; i < n_; ++i) x[bit_reverse_[i]] = {in[i], 0.0};
  for (int len = 2; len <= n_; len <<= 1) {
    const int half = len / 2, step = n_ / len;
    for (int start = 0; start < n_; start += len) {
      for (int j = 0; j < half; ++j) {
        // Written out: std::complex's operator* goes through __muldc3 (its
        // inf/NaN recovery), which made this loop most of the front end's cost.
        const std::complex<double> w = twiddle_[j * step];
        const std::complex<double> u = x[start + j + half];
        const std::complex<double> t(w.real() * u.real() - w.imag() * u.imag(),
                                     w.real() * u.imag() + w.imag() * u.real());
        x[start + j + half] = x[start + j] - t;
        x[start + j] += t;
      }
    }
  }
  for (int k = 0; k <= n_ / 2; ++k) power[k] = std::norm(x[k]);
}

}  // namespace oasr::encoder
