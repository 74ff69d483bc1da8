#include "kernels/activation.h"
#include "kernels/cuda_common.cuh"

namespace oasr::kernels {
namespace {

using cuda::FromFloat;
using cuda::ToFloat;

// One block-row at a time: threads across the columns, rows grid-strided.
template <typename T, bool kSwish>
__global__ void ActivationKernel(T* x, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T* row = x + r * ld;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = ToFloat(row[c]);
      row[c] = FromFloat<T>(kSwish ? v * cuda::Sigmoid(v) : fmaxf(v, 0.0f));
    }
  }
}

// Same, 16 bytes at a time (cols and ld multiples of the vector width).
template <typename T, bool kSwish>
__global__ void ActivationVecKernel(T* x, int64_t rows, int64_t cols, int64_t ld) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t per_row = cols / kVec;
  const int64_t total = rows * per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < total;
       v += stride) {
    uint4* at = reinterpret_cast<uint4*>(x + (v / per_row) * ld) + v % per_row;
    uint4 data = *at;
    T* e = reinterpret_cast<T*>(&data);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float f = ToFloat(e[k]);
      e[k] = FromFloat<T>(kSwish ? f * cuda::Sigmoid(f) : fmaxf(f, 0.0f));
    }
    *at = data;
  }
}

template <typename T>
__global__ void GluKernel(const T* in, int64_t ld_in, T* out, int64_t ld_out, int64_t rows,
                          int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* a = in + r * ld_in;
    T* o = out + r * ld_out;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      o[c] = FromFloat<T>(ToFloat(a[c]) * cuda::Sigmoid(ToFloat(a[cols + c])));
    }
  }
}

template <typename In, typename Out>
__global__ void CastKernel(const In* in, Out* out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = FromFloat<Out>(ToFloat(in[i]));
  }
}

int RowThreads(int64_t cols) { return cols >= 512 ? 256 : (cols >= 128 ? 128 : 64); }
int RowBlocks(int64_t rows) { return static_cast<int>(rows < 65535 * 4 ? rows : 65535 * 4); }

}  // namespace

void LaunchActivation(const ActivationParams& p, GpuStream stream) {
  if (p.rows == 0 || p.cols == 0 || p.activation == Activation::kNone) return;
  const int64_t vec = 16 / static_cast<int64_t>(DTypeSize(p.dtype));
  if (p.cols % vec == 0 && p.ld % vec == 0 && reinterpret_cast<uintptr_t>(p.x) % 16 == 0) {
    const int threads = 256;
    const int blocks = cuda::Blocks(p.rows * p.cols / vec, threads, 132 * 16);
    OASR_DISPATCH_FLOAT(p.dtype, T, {
      T* x = static_cast<T*>(p.x);
      if (p.activation == Activation::kSwish) {
        ActivationVecKernel<T, true><<<blocks, threads, 0, stream>>>(x, p.rows, p.cols, p.ld);
      } else {
        ActivationVecKernel<T, false><<<blocks, threads, 0, stream>>>(x, p.rows, p.cols, p.ld);
      }
    });
    OASR_CUDA_LAUNCH_CHECK();
    return;
  }
  OASR_DISPATCH_FLOAT(p.dtype, T, {
    T* x = static_cast<T*>(p.x);
    if (p.activation == Activation::kSwish) {
      ActivationKernel<T, true>
          <<<RowBlocks(p.rows), RowThreads(p.cols), 0, stream>>>(x, p.rows, p.cols, p.ld);
    } else {
      ActivationKernel<T, false>
          <<<RowBlocks(p.rows), RowThreads(p.cols), 0, stream>>>(x, p.rows, p.cols, p.ld);
    }
  });
  OASR_CUDA_LAUNCH_CHECK();
}

void LaunchGlu(const GluParams& p, GpuStream stream) {
  if (p.rows == 0 || p.cols == 0) return;
  OASR_DISPATCH_FLOAT(p.dtype, T, {
    GluKernel<T><<<RowBlocks(p.rows), RowThreads(p.cols), 0, stream>>>(
        static_cast<const T*>(p.in), p.ld_in, static_cast<T*>(p.out), p.ld_out, p.rows, p.cols);
  });
  OASR_CUDA_LAUNCH_CHECK();
}

void LaunchCast(const CastParams& p, GpuStream stream) {
  if (p.n == 0) return;
  if (p.in_dtype == p.out_dtype) {
    if (p.in != p.out) {
      OASR_CUDA_CHECK(cudaMemcpyAsync(p.out, p.in, static_cast<size_t>(p.n) * DTypeSize(p.in_dtype),
                                      cudaMemcpyDeviceToDevice, stream));
    }
    return;
  }
  const int threads = 256;
  OASR_DISPATCH_FLOAT(p.in_dtype, In, {
    OASR_DISPATCH_FLOAT(p.out_dtype, Out, {
      CastKernel<In, Out><<<cuda::Blocks(p.n, threads), threads, 0, stream>>>(
          static_cast<const In*>(p.in), static_cast<Out*>(p.out), p.n);
    });
  });
  OASR_CUDA_LAUNCH_CHECK();
}

}  // namespace oasr::kernels
