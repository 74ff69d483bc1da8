// Element-wise ops: swish and ReLU in place, and the GLU of the conv module
// (out = a * sigmoid(g) for a row [a | g]). Rows have a stride so the same
// ops run on a slice of a wider buffer.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "common/dtype.h"
#include "common/execution_context.h"
#include "common/gpu_stream.h"

namespace oasr::kernels {

enum class Activation : uint8_t { kNone, kRelu, kSwish };
const char* ActivationName(Activation a);

struct ActivationParams {
  void* x = nullptr;  // [rows, cols], row stride ld >= cols; read and written.
  DType dtype = DType::kFloat32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;
  Activation activation{};  // kRelu or kSwish (kNone does nothing).
};

struct GluParams {
  const void* in = nullptr;  // [rows, 2 * cols], stride ld_in >= 2 * cols: a then g.
  int64_t ld_in = 0;
  void* out = nullptr;  // [rows, cols], stride ld_out >= cols.
  int64_t ld_out = 0;
  DType dtype = DType::kFloat32;  // Of both in and out.
  int64_t rows = 0;
  int64_t cols = 0;
};

// out[i] = in[i] converted between float32, bfloat16 and float16 (round to
// nearest even); in and out may not overlap unless the dtypes are equal.
struct CastParams {
  const void* in = nullptr;
  DType in_dtype = DType::kFloat32;
  void* out = nullptr;
  DType out_dtype = DType::kFloat32;
  int64_t n = 0;
};

// The op on ctx's device (asynchronous on CUDA). INVALID_ARGUMENT for a
// dtype the device does not handle (the CPU: float32 only, except Cast, which
// converts any pair on either) or a bad stride.
absl::Status ApplyActivation(ExecutionContext& ctx, const ActivationParams& p);
absl::Status Glu(ExecutionContext& ctx, const GluParams& p);
absl::Status Cast(ExecutionContext& ctx, const CastParams& p);

// CPU implementations (float32, host pointers).
void ActivationCpu(const ActivationParams& p);
void GluCpu(const GluParams& p);
void CastCpu(const CastParams& p);

#if OASR_WITH_CUDA
// CUDA launchers (float32, bfloat16, float16; device pointers).
void LaunchActivation(const ActivationParams& p, GpuStream stream);
void LaunchGlu(const GluParams& p, GpuStream stream);
void LaunchCast(const CastParams& p, GpuStream stream);
#endif

}  // namespace oasr::kernels
