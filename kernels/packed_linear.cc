#include "kernels/packed_linear.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "common/check.h"

namespace oasr::kernels {
namespace {

constexpr int kPanel = PackedLinear::kPanel;

struct KernelArgs {
  const float* x;
  int64_t ldx;
  const float* panel;  // [k][kPanel]
  int64_t k;
  const float* bias;  // [kPanel]
  float* y;           // Output columns of this panel.
  int64_t ldy;
  int valid;  // Columns of the panel that exist (<= kPanel).
  bool accumulate;
};

// Writes a kPanel-wide row of results: y = acc + bias (+ y).
inline void StoreRow(const float* acc, const KernelArgs& a, float* y) {
  for (int j = 0; j < a.valid; ++j) y[j] = (a.accumulate ? y[j] : 0.0f) + acc[j] + a.bias[j];
}

template <int R>
__attribute__((target("avx512f"))) void TileAvx512(const KernelArgs& a) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < a.k; ++kk) {
    const __m512 w0 = _mm512_loadu_ps(a.panel + kk * kPanel);
    const __m512 w1 = _mm512_loadu_ps(a.panel + kk * kPanel + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 xb = _mm512_set1_ps(a.x[r * a.ldx + kk]);
      acc[r][0] = _mm512_fmadd_ps(xb, w0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(xb, w1, acc[r][1]);
    }
  }
  alignas(64) float row[kPanel];
  for (int r = 0; r < R; ++r) {
    _mm512_store_ps(row, acc[r][0]);
    _mm512_store_ps(row + 16, acc[r][1]);
    StoreRow(row, a, a.y + r * a.ldy);
  }
}

template <int R>
__attribute__((target("avx2,fma"))) void TileAvx2(const KernelArgs& a) {
  __m256 acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < 4; ++q) acc[r][q] = _mm256_setzero_ps();
  for (int64_t kk = 0; kk < a.k; ++kk) {
    const float* w = a.panel + kk * kPanel;
    const __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8);
    const __m256 w2 = _mm256_loadu_ps(w + 16), w3 = _mm256_loadu_ps(w + 24);
    for (int r = 0; r < R; ++r) {
      const __m256 xb = _mm256_set1_ps(a.x[r * a.ldx + kk]);
      acc[r][0] = _mm256_fmadd_ps(xb, w0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(xb, w1, acc[r][1]);
      acc[r][2] = _mm256_fmadd_ps(xb, w2, acc[r][2]);
      acc[r][3] = _mm256_fmadd_ps(xb, w3, acc[r][3]);
    }
  }
  alignas(32) float row[kPanel];
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q < 4; ++q) _mm256_store_ps(row + 8 * q, acc[r][q]);
    StoreRow(row, a, a.y + r * a.ldy);
  }
}

void TilePortable(const KernelArgs& a, int rows) {
  float acc[kPanel];
  for (int r = 0; r < rows; ++r) {
    std::fill(acc, acc + kPanel, 0.0f);
    const float* x = a.x + r * a.ldx;
    for (int64_t kk = 0; kk < a.k; ++kk) {
      const float* w = a.panel + kk * kPanel;
      for (int j = 0; j < kPanel; ++j) acc[j] += x[kk] * w[j];
    }
    StoreRow(acc, a, a.y + r * a.ldy);
  }
}

using cpu::Isa;

// Runs rows [0, rows) of one panel in register tiles.
void RunAvx512(KernelArgs a, int64_t rows) {
  constexpr int kTile = 12;
  for (; rows >= kTile; rows -= kTile, a.x += kTile * a.ldx, a.y += kTile * a.ldy)
    TileAvx512<kTile>(a);
  switch (rows) {
    case 11:
      TileAvx512<11>(a);
      break;
    case 10:
      TileAvx512<10>(a);
      break;
    case 9:
      TileAvx512<9>(a);
      break;
    case 8:
      TileAvx512<8>(a);
      break;
    case 7:
      TileAvx512<7>(a);
      break;
    case 6:
      TileAvx512<6>(a);
      break;
    case 5:
      TileAvx512<5>(a);
      break;
    case 4:
      TileAvx512<4>(a);
      break;
    case 3:
      TileAvx512<3>(a);
      break;
    case 2:
      TileAvx512<2>(a);
      break;
    case 1:
      TileAvx512<1>(a);
      break;
    default:
      break;
  }
}

void RunAvx2(KernelArgs a, int64_t rows) {
  constexpr int kTile = 3;
  for (; rows >= kTile; rows -= kTile, a.x += kTile * a.ldx, a.y += kTile * a.ldy)
    TileAvx2<kTile>(a);
  if (rows == 2) TileAvx2<2>(a);
  if (rows == 1) TileAvx2<1>(a);
}

}  // namespace

PackedLinear::PackedLinear(const float* weight, const float* bias, int64_t out, int64_t in,
                           float scale)
    : out_(out), in_(in) {
  const int64_t panels = num_panels();
  auto packed = Tensor::Zeros({panels, in_, kPanel}, DType::kFloat32);
  auto packed_bias = Tensor::Zeros({panels * kPanel}, DType::kFloat32);
  OASR_CHECK(packed.ok() && packed_bias.ok(), "out of memory packing weights");
  float* dst = packed->data<float>();
  for (int64_t n = 0; n < out_; ++n) {
    const int64_t p = n / kPanel, j = n % kPanel;
    for (int64_t k = 0; k < in_; ++k) dst[(p * in_ + k) * kPanel + j] = scale * weight[n * in_ + k];
  }
  if (bias != nullptr) {
    float* b = packed_bias->data<float>();
    for (int64_t n = 0; n < out_; ++n) b[n] = scale * bias[n];
  }
  panels_ = std::move(*packed);
  bias_ = std::move(*packed_bias);
}

void PackedLinear::Forward(const float* x, int64_t m, int64_t ldx, float* y, int64_t ldy,
                           bool accumulate) const {
  ForwardPanels(x, m, ldx, y, ldy, accumulate, 0, num_panels());
}

void PackedLinear::ForwardPanels(const float* x, int64_t m, int64_t ldx, float* y, int64_t ldy,
                                 bool accumulate, int64_t panel_begin, int64_t panel_end,
                                 Isa isa) const {
  OASR_CHECK(cpu::IsaSupported(isa), "kernel not supported by this CPU");
  if (isa == Isa::kAuto) isa = cpu::BestIsa();
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    KernelArgs a{x,
                 ldx,
                 panels_.data<float>() + p * in_ * kPanel,
                 in_,
                 bias_.data<float>() + p * kPanel,
                 y + p * kPanel,
                 ldy,
                 static_cast<int>(std::min<int64_t>(kPanel, out_ - p * kPanel)),
                 accumulate};
    switch (isa) {
      case Isa::kAuto:
      case Isa::kAvx512:
        RunAvx512(a, m);
        break;
      case Isa::kAvx2:
        RunAvx2(a, m);
        break;
      case Isa::kPortable:
        for (int64_t r = 0; r < m; r += 8) {
          KernelArgs t = a;
          t.x += r * ldx;
          t.y += r * ldy;
          TilePortable(t, static_cast<int>(std::min<int64_t>(8, m - r)));
        }
        break;
    }
  }
}

}  // namespace oasr::kernels
