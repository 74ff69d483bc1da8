// The Conformer's feed-forward module as one op:
//   x += scale * (swish(LN(x) W1^T + b1) W2^T + b2), then, optionally,
//   x = LN_final(x)
// on a float32 residual stream x. On CUDA (16-bit weights, d_model 256,
// hidden units a multiple of 64) it is one kernel: a block takes 64 or 128
// rows, normalises them into shared memory, and walks the hidden units 64 at
// a time (the weights' next 64 double-buffered by cp.async), each slice's
// swish(...) going from the tensor cores to shared memory and straight into
// the second product, so the [rows, units] hidden activation never reaches
// device memory; the residual add and the final norm run on the block's
// full rows. The CPU computes the same in float32.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/execution_context.h"
#include "common/gpu_stream.h"
#include "common/tensor.h"

namespace oasr::kernels {

struct FeedForwardParams {
  float* x = nullptr;  // [m, d] float32, row stride ldx; read and written.
  int64_t ldx = 0;
  int64_t m = 0;
  int64_t d = 0;
  int64_t units = 0;
  DType dtype = DType::kFloat32;      // Of w1, w2 and the normalised rows.
  const void* w1 = nullptr;           // [units, d]
  const float* b1 = nullptr;          // [units]
  const void* w2 = nullptr;           // [d, units], scale folded in.
  const float* b2 = nullptr;          // [d], scale folded in.
  const float* norm_scale = nullptr;  // [d]: the module's LayerNorm.
  const float* norm_shift = nullptr;
  float eps = 1e-5f;
  // Optional [d]: the LayerNorm applied to x afterwards (null for none).
  const float* final_scale = nullptr;
  const float* final_shift = nullptr;
  float final_eps = 1e-5f;
  // CUDA: rows per block, 64 or 128; 0 picks (128 once the rows fill every
  // multiprocessor, else 64).
  int block_rows = 0;
};

struct FeedForwardArgs {
  float* x = nullptr;  // [m, d] float32 on the op's device, row stride ldx.
  int64_t ldx = 0;
  int64_t m = 0;
  const float* norm_scale = nullptr;  // [d] on the op's device.
  const float* norm_shift = nullptr;
  float eps = 1e-5f;
  const float* final_scale = nullptr;  // Optional, [d].
  const float* final_shift = nullptr;
  float final_eps = 1e-5f;
  int block_rows = 0;  // FeedForwardParams::block_rows.
};

class FeedForwardOp {
 public:
  // Whether ctx's device runs the op for this geometry and dtype: the CPU in
  // float32; CUDA in bfloat16 or float16 with d 256 and units a multiple of
  // 64.
  static bool Supported(const ExecutionContext& ctx, DType dtype, int64_t d, int64_t units);

  // `w1` [units, d], `b1` [units], `w2` [d, units], `b2` [d] float32 on the
  // host (biases may be null); `scale` multiplies the second product and its
  // bias. INVALID_ARGUMENT when !Supported.
  static absl::StatusOr<FeedForwardOp> Create(const float* w1, const float* b1, const float* w2,
                                              const float* b2, int64_t d, int64_t units,
                                              float scale, DType dtype, ExecutionContext& ctx);

  // Asynchronous on CUDA. INVALID_ARGUMENT for null pointers, ldx < d, or
  // (CUDA) x or ldx not 16-byte aligned. m == 0 does nothing.
  absl::Status Run(ExecutionContext& ctx, const FeedForwardArgs& args) const;

  int64_t d() const { return d_; }
  int64_t units() const { return units_; }

 private:
  int64_t d_ = 0, units_ = 0;
  DType dtype_ = DType::kFloat32;
  Tensor w1_, b1_, w2_, b2_;
};

// CPU implementation (float32, host pointers); rows split over `pool`.
void FeedForwardCpu(const FeedForwardParams& p, ThreadPool* pool);

#if OASR_WITH_CUDA
// Dynamic shared memory the kernel needs (raised once per process).
void PrepareFeedForwardKernel();
void LaunchFeedForward(const FeedForwardParams& p, GpuStream stream);
#endif

}  // namespace oasr::kernels
