// Float32 building blocks of the CPU implementations of the ops (OpenBLAS
// GEMMs, a vectorised exp, row softmax). Matrices are row-major with explicit
// leading dimensions (elements between rows). All functions are thread-safe
// (they touch only their arguments).
#pragma once

#include <cstdint>

namespace oasr::kernels::cpu {

// SIMD kernel families, detected at run time; kAuto is the best available.
enum class Isa { kAuto, kAvx512, kAvx2, kPortable };
Isa BestIsa();
bool IsaSupported(Isa isa);

// c[m, n] = alpha * a[m, k] b[n, k]^T + beta * c (a plain sgemm with b
// transposed, the shape of scores = Q K^T).
void GemmNT(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// c[m, n] = a[m, k] b[k, n] + beta * c (weights @ V).
void GemmNN(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
            int64_t ldb, float beta, float* c, int64_t ldc);

// out[i] = exp(in[i]) (in may equal out); vectorised with AVX-512 or AVX2
// where the CPU has them, relative error below 2e-7 (inputs are clamped to
// [-87.3, 88.7], the float range).
void ExpVec(const float* in, float* out, int64_t n, Isa isa = Isa::kAuto);

// Row-wise softmax in place over the first n values of m rows of stride ld.
void SoftmaxRows(float* x, int64_t m, int64_t n, int64_t ld);

// x = x * sigmoid(x) over n contiguous values.
void SwishInPlace(float* x, int64_t n);

// Threads OpenBLAS may use for one GEMM. OpenBLAS keeps one process-wide
// setting, so the last call decides for the whole process.
void SetBlasThreads(int threads);

}  // namespace oasr::kernels::cpu
