// The Linear op: y = act(scale * (x W^T + b)), or y += scale * (x W^T + b),
// with W prepared once for one backend when the op is created. On the CPU
// the weight is packed into 32-output panels (packed_linear.h) and the rows
// are split across the context's thread pool; on CUDA it is converted to the
// op's dtype and run through cuBLASLt on the tensor cores with float32
// accumulation, the bias and ReLU in the GEMM's epilogue (swish, which
// cuBLASLt has no epilogue for, runs as one pass over the output), or on
// Hopper through the project's wgmma kernel, whose epilogue has swish too.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/execution_context.h"
#include "kernels/activation.h"
#include "kernels/packed_linear.h"

namespace oasr::kernels {

// Which CUDA kernel computes a 16-bit product. kCublas: cuBLASLt. kNorms:
// the project's wgmma kernel (wgmma_gemm.h; built for sm_90a, run on a
// Hopper GPU) for the residual products that take the next layer norm
// (LinearArgs' norms) when m fills a wave of its tiles (m >=
// kWgmmaNormsMinTiles * 128 * multiprocessors), cuBLASLt and the norm
// passes below that and for every other product. kFused: the wgmma kernel
// for every product whose epilogue saves a pass -- those, and swish's --
// whatever m. kWgmma: the wgmma kernel wherever it can run. Where the wgmma
// kernel cannot run, all are cuBLASLt. kEpilogues: kFused's products (the
// norms and swish) from a wave of tiles up like kNorms, cuBLASLt below.
// kAuto is kAutoGemm. The CPU ignores it.
enum class GemmKernel : uint8_t { kAuto, kCublas, kNorms, kFused, kWgmma, kEpilogues };
inline constexpr int kWgmmaNormsMinTiles = 1;
// kEpilogues: since the wgmma kernel's epilogue leaves through shared
// memory in whole rows (session 45), its swish products beat cuBLASLt's
// with the swish pass (0.050 against 0.097 ms for an FFN's first product
// at m = 32,768 on an H100) and its norm products cuBLASLt's with the norm
// passes; the chunk step at the session's end was 10.9 ms at B = 2,048
// against 12.3 with cuBLASLt alone and 11.9 with session 44's kNorms.
// Below a wave of its tiles it is cuBLASLt, bit for bit. Its products
// without an epilogue to save (qkv, pointwise_conv1) now run as fast as
// cuBLASLt's too, and kWgmma (all of them on it) takes the same step time,
// so they stay on cuBLASLt (bench/results/gpu-scale.md, sessions 42-45).
// The benches' --gemm cublas / norms / fused / wgmma select the others.
inline constexpr GemmKernel kAutoGemm = GemmKernel::kEpilogues;
inline constexpr GemmKernel ResolveGemm(GemmKernel g) {
  return g == GemmKernel::kAuto ? kAutoGemm : g;
}
const char* GemmKernelName(GemmKernel g);
// "auto", "cublas", "norms", "fused", "wgmma" or "epilogues"; false for
// anything else.
bool ParseGemmKernel(const std::string& name, GemmKernel* out);

struct LinearOptions {
  // Weights and inputs: float32 on the CPU; float32, bfloat16 or float16 on
  // CUDA (float32 there is true float32, not TF32).
  DType dtype = DType::kFloat32;
  // Folded into the weight and bias at creation (exact for powers of two).
  float scale = 1.0f;
  Activation activation = Activation::kNone;
  GemmKernel gemm = GemmKernel::kAuto;
};

struct LinearArgs {
  const void* x = nullptr;  // [m, in] in the op's dtype, row stride ldx >= in.
  int64_t ldx = 0;
  void* y = nullptr;  // [m, out] in y_dtype, row stride ldy >= out; must not overlap x.
  int64_t ldy = 0;
  // float32, or the op's dtype. The CPU supports float32 only.
  DType y_dtype = DType::kFloat32;
  int64_t m = 0;
  // y += ... instead of y = ... (needs activation kNone).
  bool accumulate = false;
  // Layer norms of y's finished rows after the product (only where
  // LinearOp::FusesNorms(): on CUDA in the wgmma kernel's epilogue, out ==
  // 256, or as the norm op after cuBLASLt where the GemmKernel says so; on
  // the CPU as the norm op after it; float32 statistics): with
  // y_norm, y's rows are stored normed (the residual stream's final norm);
  // with out_norm, norm_out = that norm of the stored row, in the op's dtype
  // (the next module's input). Scales and shifts: [out] float32 on the
  // op's device.
  const float* y_norm_scale = nullptr;
  const float* y_norm_shift = nullptr;
  const float* out_norm_scale = nullptr;
  const float* out_norm_shift = nullptr;
  void* norm_out = nullptr;  // [m, out], row stride ld_norm_out.
  int64_t ld_norm_out = 0;
  float norm_eps = 1e-5f;
};

class CudaGemm;  // cuBLASLt state of one weight (CUDA builds).

class LinearOp {
 public:
  LinearOp();
  ~LinearOp();
  LinearOp(LinearOp&&) noexcept;
  LinearOp& operator=(LinearOp&&) noexcept;

  // Prepares `weight` [out, in] and `bias` [out] (null for none), float32 on
  // the host, for ctx's device. INVALID_ARGUMENT for a dtype the device does
  // not compute in, or non-positive sizes; RESOURCE_EXHAUSTED when device
  // memory cannot be had.
  static absl::StatusOr<LinearOp> Create(const float* weight, const float* bias, int64_t out,
                                         int64_t in, const LinearOptions& options,
                                         ExecutionContext& ctx);

  // Runs the op on ctx (the context it was created for): asynchronous on
  // CUDA. INVALID_ARGUMENT naming the argument for a dtype or stride that
  // does not fit, or accumulate with an activation. m == 0 does nothing.
  absl::Status Run(ExecutionContext& ctx, const LinearArgs& args) const;

  // Whether Run takes LinearArgs' norms: on CUDA where the product's epilogue
  // computes them (CudaGemm::FusesNorms), on the CPU without an activation.
  bool FusesNorms() const;

  // CUDA: the weight [out, in] in the op's dtype and the bias in float32
  // on the device (null on the CPU, and the bias null without one or with
  // a float32 op), for kernels that compute the same product their own way
  // (the stem's implicit GEMM).
  const void* device_weight() const;
  const float* device_bias_f32() const;

  int64_t out_features() const { return out_; }
  int64_t in_features() const { return in_; }
  const LinearOptions& options() const { return options_; }
  Device device() const { return device_; }

 private:
  absl::Status RunCpu(ExecutionContext& ctx, const LinearArgs& args) const;

  int64_t out_ = 0;
  int64_t in_ = 0;
  LinearOptions options_;
  Device device_;
  std::unique_ptr<PackedLinear> cpu_;
  std::unique_ptr<CudaGemm> cuda_;
};

}  // namespace oasr::kernels
