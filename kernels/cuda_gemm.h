// The CUDA side of LinearOp (CUDA builds only): the weight in the op's dtype
// on the device and cuBLASLt matmul plans cached per problem shape. Host
// code (.cc): it calls the cuBLASLt API, no kernels of its own but swish's.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/execution_context.h"
#include "common/tensor.h"
#include "kernels/linear.h"

namespace oasr::kernels {

class CudaGemm {
 public:
  // Uploads scale * weight [out, in] and scale * bias in options.dtype
  // (the bias also in float32, for float32 outputs).
  static absl::StatusOr<std::unique_ptr<CudaGemm>> Create(const float* weight, const float* bias,
                                                          int64_t out, int64_t in,
                                                          const LinearOptions& options,
                                                          ExecutionContext& ctx);
  ~CudaGemm();
  // y = act(x W^T + b) (or y += x W^T + b) on ctx.stream(); args are checked
  // by LinearOp::Run. INTERNAL when cuBLASLt finds no algorithm or fails.
  absl::Status Run(ExecutionContext& ctx, const LinearArgs& args);

  // Whether LinearOp::Run takes LinearArgs' norms: the wgmma kernel is
  // available and allowed, a 16-bit dtype, out == 256.
  bool FusesNorms() const;
  // Whether the wgmma kernel's epilogue computes them for m rows (else
  // LinearOp::Run runs the norm op after cuBLASLt's product): always with
  // kFused and kWgmma, from a wave of tiles up with kNorms and kEpilogues.
  bool NormsInEpilogue(const ExecutionContext& ctx, int64_t m) const;

  const void* weight() const { return weight_.data(); }
  const float* bias_f32() const { return bias_f32_.empty() ? nullptr : bias_f32_.data<float>(); }
  // Plans made so far (one per distinct m, strides, output dtype and mode).
  size_t num_plans() const { return plans_.size(); }

 private:
  struct Plan;
  CudaGemm() = default;
  absl::StatusOr<Plan*> GetPlan(ExecutionContext& ctx, const LinearArgs& args);
  // Enqueues the product on the wgmma kernel when options_.gemm allows it
  // and the kernel supports the arguments; false when it did not.
  bool RunWgmma(ExecutionContext& ctx, const LinearArgs& args);

  int64_t out_ = 0, in_ = 0;
  LinearOptions options_;
  Tensor weight_;
  Tensor bias_;      // options.dtype; empty without a bias.
  Tensor bias_f32_;  // float32; empty without a bias, or when options.dtype is float32.
  absl::flat_hash_map<uint64_t, std::unique_ptr<Plan>> plans_;
};

}  // namespace oasr::kernels
