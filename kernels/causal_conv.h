// The core of the Conformer's convolution module for a cohort, one pass per
// row: GLU of the pointwise_conv1 output, the causal depthwise conv over the
// stream's slot-addressed left context and its new frames, the norm (layer
// norm, or a BatchNorm folded into a per-channel affine) and swish. The left
// context is read by slot and overwritten in place with the last K - 1 GLU
// outputs, so no gather or scatter surrounds the op.
//
// The stored context is the GLU output minus glu0 = GLU(pointwise_conv1's
// bias): a zeroed slot then stands for WeNet's zero padding of the conv
// module's input (whose GLU output is glu0, not zero), and a new stream
// needs no initialisation beyond the slot cache's zeroing.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "common/dtype.h"
#include "common/execution_context.h"
#include "common/gpu_stream.h"

namespace oasr::kernels {

struct CausalConvParams {
  // [batch * chunk, 2 * d] pointwise_conv1 output (a, then the gate), stride
  // ld_in; row b owns rows [b * chunk, b * chunk + frames[b]).
  const void* in = nullptr;
  int64_t ld_in = 0;
  DType dtype = DType::kFloat32;  // Of in, out and state.
  // This layer's left context: slot s at state + s * state_slot_stride,
  // [kernel - 1, d] (GLU outputs minus glu0).
  void* state = nullptr;
  int64_t state_slot_stride = 0;
  const float* glu0 = nullptr;        // [d]
  const int32_t* slots = nullptr;     // [batch]
  const int32_t* frames = nullptr;    // [batch], each in [0, chunk].
  const float* taps = nullptr;        // [kernel, d]: taps[j][c] weighs input t + j of output t.
  const float* tap_bias = nullptr;    // [d]
  bool layer_norm = true;             // LayerNorm with scale/shift and eps; else y * scale + shift.
  const float* norm_scale = nullptr;  // [d]
  const float* norm_shift = nullptr;  // [d]
  float eps = 1e-5f;
  // [batch * chunk, d], stride ldo; rows past frames[b] are written as zeros.
  void* out = nullptr;
  int64_t ldo = 0;
  int batch = 0;
  int chunk = 0;
  int d = 0;
  int kernel = 0;
};

// The op on ctx's device (asynchronous on CUDA). Rows must use distinct
// slots. INVALID_ARGUMENT for null pointers, strides below their rows, or a
// dtype the device does not handle (the CPU: float32 only).
absl::Status CausalConv(ExecutionContext& ctx, const CausalConvParams& p);

// CPU implementation (host pointers); rows split over `pool`.
void CausalConvCpu(const CausalConvParams& p, ThreadPool* pool);

#if OASR_WITH_CUDA
// One block per row, a thread per channel (d <= 1024, kernel - 1 + chunk <= 64).
void LaunchCausalConv(const CausalConvParams& p, GpuStream stream);
#endif

}  // namespace oasr::kernels
