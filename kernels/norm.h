// Layer normalisation over rows of d: out = (s - mean) / sqrt(var + eps) *
// scale + shift, where s = x, or s = x + residual_scale * residual when a
// residual is given (then s can also be stored, for a fused residual add).
// Statistics in float32 whatever the storage dtype.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "common/dtype.h"
#include "common/execution_context.h"
#include "common/gpu_stream.h"

namespace oasr::kernels {

struct LayerNormParams {
  const void* x = nullptr;  // [rows, d], stride ldx.
  DType x_dtype = DType::kFloat32;
  int64_t ldx = 0;
  // Optional residual [rows, d] (stride ld_residual, residual_dtype).
  const void* residual = nullptr;
  DType residual_dtype = DType::kFloat32;
  int64_t ld_residual = 0;
  float residual_scale = 1.0f;
  // Optional: where s is stored (x_dtype, stride ld_sum; may be x itself).
  void* sum_out = nullptr;
  int64_t ld_sum = 0;
  const float* scale = nullptr;  // [d] float32 on the device.
  const float* shift = nullptr;  // [d]
  float eps = 1e-5f;
  void* out = nullptr;  // [rows, d], stride ldo; may be x when the dtypes match.
  DType out_dtype = DType::kFloat32;
  int64_t ldo = 0;
  int64_t rows = 0;
  int64_t d = 0;
};

// The op on ctx's device (asynchronous on CUDA). INVALID_ARGUMENT for null
// pointers, strides below d, or dtypes the device does not handle (the CPU:
// float32 only).
absl::Status LayerNorm(ExecutionContext& ctx, const LayerNormParams& p);

// CPU implementation (float32, host pointers); rows split over `pool`.
void LayerNormCpu(const LayerNormParams& p, ThreadPool* pool);

#if OASR_WITH_CUDA
// One warp per row (d <= 1024). Device pointers.
void LaunchLayerNorm(const LayerNormParams& p, GpuStream stream);
#endif

}  // namespace oasr::kernels
