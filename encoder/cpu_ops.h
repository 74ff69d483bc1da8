// Row-wise float32 building blocks of the CPU encoder. Matrices are
// row-major with explicit leading dimensions (elements between rows), so the
// same routines run on one stream's rows or on a cohort's stacked rows.
// All functions are thread-safe (they touch only their arguments).
#pragma once

#include <cstdint>

#include "encoder/model_weights.h"

namespace oasr::encoder::cpu {

// SIMD kernel families, detected at run time; kAuto is the best available.
enum class Isa { kAuto, kAvx512, kAvx2, kPortable };
Isa BestIsa();
bool IsaSupported(Isa isa);

// y[m, n] = x[m, k] W[n, k]^T + bias (OpenBLAS sgemm). With accumulate,
// y += ... instead. x, y: host memory, ldx >= k, ldy >= n.
void Linear(const float* x, int64_t m, int64_t ldx, const LinearWeights& w, float* y,
            int64_t ldy, bool accumulate = false);

// c[m, n] = alpha * a[m, k] b[n, k]^T + beta * c (a plain sgemm with b
// transposed, the shape of scores = Q K^T).
void GemmNT(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// c[m, n] = a[m, k] b[k, n] + beta * c (weights @ V).
void GemmNN(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
            int64_t ldb, float beta, float* c, int64_t ldc);

// y = LayerNorm(x) * scale + shift over rows of d (eps 1e-5); y may be x.
void LayerNormRows(const float* x, int64_t m, int64_t d, int64_t ldx, const NormWeights& n,
                   float* y, int64_t ldy);

// y = x * scale + shift per column (a folded BatchNorm), in place.
void AffineRows(float* x, int64_t m, int64_t d, int64_t ldx, const NormWeights& n);

// out[i] = exp(in[i]) (in may equal out); vectorised with AVX-512 or AVX2
// where the CPU has them, relative error below 2e-7 (inputs are clamped to
// [-87.3, 88.7], the float range).
void ExpVec(const float* in, float* out, int64_t n, Isa isa = Isa::kAuto);

// x = x * sigmoid(x) over n contiguous values.
void SwishInPlace(float* x, int64_t n);

// x = max(x, 0).
void ReluInPlace(float* x, int64_t n);

// out[r, i] = in[r, i] * sigmoid(in[r, d + i]) for rows of 2d -> d.
void GluRows(const float* in, int64_t m, int64_t d, float* out);

// Row-wise log_softmax in place over rows of n.
void LogSoftmaxRows(float* x, int64_t m, int64_t n);

// Row-wise softmax in place over the first n values of m rows of stride ld.
void SoftmaxRows(float* x, int64_t m, int64_t n, int64_t ld);

}  // namespace oasr::encoder::cpu
