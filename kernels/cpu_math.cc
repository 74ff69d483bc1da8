#include "kernels/cpu_math.h"

#if OASR_WITH_OPENBLAS
#include <cblas.h>
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>

namespace oasr::kernels::cpu {
namespace {

// Cephes' expf: exp(x) = 2^n * exp(r), x = n ln2 + r, |r| <= ln2 / 2, with a
// degree-6 polynomial for exp(r).
constexpr float kExpHi = 88.7f, kExpLo = -87.3f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps and trip a
// false -Wmaybe-uninitialized when used through a target attribute.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) void ExpAvx512(const float* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 x = _mm512_loadu_ps(in + i);
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpLo)), _mm512_set1_ps(kExpHi));
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Hi), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Lo), r);
    __m512 p = _mm512_set1_ps(kP0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    _mm512_storeu_ps(out + i, _mm512_scalef_ps(p, k));
  }
  for (; i < n; ++i) out[i] = std::exp(in[i]);
}
#pragma GCC diagnostic pop

__attribute__((target("avx2,fma"))) void ExpAvx2(const float* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_loadu_ps(in + i);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpLo)), _mm256_set1_ps(kExpHi));
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Hi), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Lo), r);
    __m256 p = _mm256_set1_ps(kP0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    // 2^k as 2^(k/2) * 2^(k - k/2): k spans [-126, 128] after the clamp,
    // beyond one exponent field, but each half fits.
    const __m256i ki = _mm256_cvtps_epi32(k);
    const __m256i half = _mm256_srai_epi32(ki, 1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ki, half), bias), 23));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(p, s1), s2));
  }
  for (; i < n; ++i) out[i] = std::exp(in[i]);
}

Isa DetectIsa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return Isa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
  return Isa::kPortable;
}

}  // namespace

Isa BestIsa() {
  static const Isa best = DetectIsa();
  return best;
}

bool IsaSupported(Isa isa) {
  switch (isa) {
    case Isa::kAuto:
    case Isa::kPortable:
      return true;
    case Isa::kAvx512:
      return BestIsa() == Isa::kAvx512;
    case Isa::kAvx2:
      return BestIsa() == Isa::kAvx512 || BestIsa() == Isa::kAvx2;
  }
  return false;
}

void ExpVec(const float* in, float* out, int64_t n, Isa isa) {
  switch (isa == Isa::kAuto ? BestIsa() : isa) {
    case Isa::kAvx512:
      ExpAvx512(in, out, n);
      return;
    case Isa::kAvx2:
      ExpAvx2(in, out, n);
      return;
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = std::exp(in[i]);
      return;
  }
}

#if OASR_WITH_OPENBLAS

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
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

void SetBlasThreads(int threads) { openblas_set_num_threads(threads); }

#else  // A plain GEMM for builds without OpenBLAS (GPU bundles): correct, not fast.

void GemmNT(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc += a[i * lda + p] * b[j * ldb + p];
      c[i * ldc + j] = alpha * acc + (beta == 0.0f ? 0.0f : beta * c[i * ldc + j]);
    }
  }
}

void GemmNN(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
            int64_t ldb, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    for (int64_t p = 0; p < k; ++p) {
      const float w = a[i * lda + p];
      const float* brow = b + p * ldb;
      for (int64_t j = 0; j < n; ++j) row[j] += w * brow[j];
    }
  }
}

void SetBlasThreads(int) {}

#endif

void SwishInPlace(float* x, int64_t n) {
  constexpr int64_t kBlock = 256;
  float e[kBlock];
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t len = std::min(kBlock, n - start);
    float* v = x + start;
    for (int64_t i = 0; i < len; ++i) e[i] = -v[i];
    ExpVec(e, e, len);
    for (int64_t i = 0; i < len; ++i) v[i] = v[i] / (1.0f + e[i]);
  }
}

void SoftmaxRows(float* x, int64_t m, int64_t n, int64_t ld) {
  for (int64_t r = 0; r < m; ++r) {
    float* row = x + r * ld;
    const float mx = *std::max_element(row, row + n);
    for (int64_t i = 0; i < n; ++i) row[i] -= mx;
    ExpVec(row, row, n);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += row[i];
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; ++i) row[i] *= inv;
  }
}

}  // namespace oasr::kernels::cpu
