#include "kernels/real_fft.h"

#include <cmath>
#include <numbers>

#include "common/check.h"

namespace oasr::kernels {

RealFft::RealFft(int n) : n_(n), half_(n / 2) {
  OASR_CHECK(n >= 2 && (n & (n - 1)) == 0, "FFT size must be a power of two");
  const int m = half_;
  int bits = 0;
  while ((1 << bits) < m) ++bits;
  bit_reverse_.resize(m);
  for (int i = 0; i < m; ++i) {
    int r = 0;
    for (int b = 0; b < bits; ++b) r |= ((i >> b) & 1) << (bits - 1 - b);
    bit_reverse_[i] = r;
  }
  for (int len = 2; len <= m; len <<= 1) {
    for (int j = 0; j < len / 2; ++j) {
      const double a = -2.0 * std::numbers::pi * j / len;
      stage_re_.push_back(std::cos(a));
      stage_im_.push_back(std::sin(a));
    }
  }
  for (int k = 0; k < m; ++k) {
    const double a = -2.0 * std::numbers::pi * k / n;
    unpack_re_.push_back(std::cos(a));
    unpack_im_.push_back(std::sin(a));
  }
}

void RealFft::PowerSpectrum(const double* in, double* power, std::vector<double>* scratch) const {
  const int m = half_;
  scratch->resize(2 * static_cast<size_t>(m));
  double* re = scratch->data();
  double* im = re + m;
  // z[k] = x[2k] + i x[2k+1], in bit-reversed order.
  for (int k = 0; k < m; ++k) {
    re[bit_reverse_[k]] = in[2 * k];
    im[bit_reverse_[k]] = in[2 * k + 1];
  }
  const double* wre = stage_re_.data();
  const double* wim = stage_im_.data();
  for (int len = 2; len <= m; len <<= 1) {
    const int h = len / 2;
    for (int start = 0; start < m; start += len) {
      double* are = re + start;
      double* aim = im + start;
      double* bre = are + h;
      double* bim = aim + h;
      for (int j = 0; j < h; ++j) {
        const double tre = wre[j] * bre[j] - wim[j] * bim[j];
        const double tim = wre[j] * bim[j] + wim[j] * bre[j];
        bre[j] = are[j] - tre;
        bim[j] = aim[j] - tim;
        are[j] += tre;
        aim[j] += tim;
      }
    }
    wre += h;
    wim += h;
  }
  // X[k] = E[k] + W^k O[k] with E = (Z[k] + conj Z[m-k]) / 2 and
  // O = (Z[k] - conj Z[m-k]) / 2i; the ends from Z[0] alone.
  power[0] = (re[0] + im[0]) * (re[0] + im[0]);
  power[m] = (re[0] - im[0]) * (re[0] - im[0]);
  for (int k = 1; k < m; ++k) {
    const double ar = re[k], ai = im[k], br = re[m - k], bi = -im[m - k];
    const double er = 0.5 * (ar + br), ei = 0.5 * (ai + bi);
    // (a - b) / 2i = (ai - bi) / 2 - i (ar - br) / 2.
    const double orr = 0.5 * (ai - bi), oi = -0.5 * (ar - br);
    const double xr = er + unpack_re_[k] * orr - unpack_im_[k] * oi;
    const double xi = ei + unpack_re_[k] * oi + unpack_im_[k] * orr;
    power[k] = xr * xr + xi * xi;
  }
}

}  // namespace oasr::kernels
