#include "encoder/cpu_ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace oasr::encoder::cpu {

void Linear(const float* x, int64_t m, int64_t ldx, const LinearWeights& w, float* y,
            int64_t ldy, bool accumulate) {
  const int64_t n = w.weight.dim(0), k = w.weight.dim(1);
  if (m == 0) return;
  float beta = 0.0f;
  if (!w.bias.empty()) {
    const float* b = w.bias.data<float>();
    for (int64_t r = 0; r < m; ++r) {
      float* row = y + r * ldy;
      if (accumulate) {
        for (int64_t j = 0; j < n; ++j) row[j] += b[j];
      } else {
        std::copy(b, b + n, row);
      }
    }
    beta = 1.0f;
  } else if (accumulate) {
    beta = 1.0f;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, x, static_cast<int>(ldx), w.weight.data<float>(),
              static_cast<int>(k), beta, y, static_cast<int>(ldy));
}

void GemmNT(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

void GemmNN(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
            int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b,
              static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

void LayerNormRows(const float* x, int64_t m, int64_t d, int64_t ldx, const NormWeights& n,
                   float* y, int64_t ldy) {
  const float* scale = n.scale.data<float>();
  const float* shift = n.shift.data<float>();
  for (int64_t r = 0; r < m; ++r) {
    const float* in = x + r * ldx;
    float* out = y + r * ldy;
    float sum = 0.0f;
    for (int64_t i = 0; i < d; ++i) sum += in[i];
    const float mean = sum / static_cast<float>(d);
    float sq = 0.0f;
    for (int64_t i = 0; i < d; ++i) {
      const float c = in[i] - mean;
      sq += c * c;
    }
    const float inv = 1.0f / std::sqrt(sq / static_cast<float>(d) + 1e-5f);
    for (int64_t i = 0; i < d; ++i) out[i] = (in[i] - mean) * inv * scale[i] + shift[i];
  }
}

void AffineRows(float* x, int64_t m, int64_t d, int64_t ldx, const NormWeights& n) {
  const float* scale = n.scale.data<float>();
  const float* shift = n.shift.data<float>();
  for (int64_t r = 0; r < m; ++r) {
    float* row = x + r * ldx;
    for (int64_t i = 0; i < d; ++i) row[i] = row[i] * scale[i] + shift[i];
  }
}

void SwishInPlace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void ReluInPlace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::max(x[i], 0.0f);
}

void GluRows(const float* in, int64_t m, int64_t d, float* out) {
  for (int64_t r = 0; r < m; ++r) {
    const float* a = in + r * 2 * d;
    const float* g = a + d;
    float* o = out + r * d;
    for (int64_t i = 0; i < d; ++i) o[i] = a[i] / (1.0f + std::exp(-g[i]));
  }
}

void LogSoftmaxRows(float* x, int64_t m, int64_t n) {
  for (int64_t r = 0; r < m; ++r) {
    float* row = x + r * n;
    const float mx = *std::max_element(row, row + n);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(row[i] - mx);
    const float lse = mx + static_cast<float>(std::log(sum));
    for (int64_t i = 0; i < n; ++i) row[i] -= lse;
  }
}

void SoftmaxRows(float* x, int64_t m, int64_t n, int64_t ld) {
  for (int64_t r = 0; r < m; ++r) {
    float* row = x + r * ld;
    const float mx = *std::max_element(row, row + n);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      row[i] = std::exp(row[i] - mx);
      sum += row[i];
    }
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; ++i) row[i] *= inv;
  }
}

}  // namespace oasr::encoder::cpu
