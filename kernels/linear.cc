#include "kernels/linear.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/activation.h"
#include "kernels/norm.h"

#if OASR_WITH_CUDA
#include "kernels/cuda_gemm.h"
#endif

namespace oasr::kernels {

#if !OASR_WITH_CUDA
class CudaGemm {};  // Never made without CUDA; complete for unique_ptr.
#endif

namespace {

// LinearArgs' norms as the norm op after the product, on y's finished rows
// (the op the encoder would run after it): y_norm in place on y, out_norm
// into norm_out in norm_dtype.
absl::Status RunNorms(ExecutionContext& ctx, const LinearArgs& args, int64_t out,
                      DType norm_dtype) {
  LayerNormParams p;
  p.x = args.y;
  p.x_dtype = args.y_dtype;
  p.ldx = args.ldy;
  p.eps = args.norm_eps;
  p.rows = args.m;
  p.d = out;
  if (args.y_norm_scale != nullptr) {
    p.scale = args.y_norm_scale;
    p.shift = args.y_norm_shift;
    p.out = args.y;
    p.out_dtype = args.y_dtype;
    p.ldo = args.ldy;
    OASR_RETURN_IF_ERROR(LayerNorm(ctx, p));
  }
  if (args.out_norm_scale != nullptr) {
    p.scale = args.out_norm_scale;
    p.shift = args.out_norm_shift;
    p.out = args.norm_out;
    p.out_dtype = norm_dtype;
    p.ldo = args.ld_norm_out;
    OASR_RETURN_IF_ERROR(LayerNorm(ctx, p));
  }
  return absl::OkStatus();
}

}  // namespace

const char* GemmKernelName(GemmKernel g) {
  switch (g) {
    case GemmKernel::kCublas:
      return "cublas";
    case GemmKernel::kNorms:
      return "norms";
    case GemmKernel::kFused:
      return "fused";
    case GemmKernel::kWgmma:
      return "wgmma";
    case GemmKernel::kEpilogues:
      return "epilogues";
    default:
      return "auto";
  }
}

bool ParseGemmKernel(const std::string& name, GemmKernel* out) {
  for (GemmKernel g : {GemmKernel::kAuto, GemmKernel::kCublas, GemmKernel::kNorms,
                       GemmKernel::kFused, GemmKernel::kWgmma, GemmKernel::kEpilogues}) {
    if (name == GemmKernelName(g)) {
      *out = g;
      return true;
    }
  }
  return false;
}

LinearOp::LinearOp() = default;
LinearOp::~LinearOp() = default;
LinearOp::LinearOp(LinearOp&&) noexcept = default;
LinearOp& LinearOp::operator=(LinearOp&&) noexcept = default;

absl::StatusOr<LinearOp> LinearOp::Create(const float* weight, const float* bias, int64_t out,
                                          int64_t in, const LinearOptions& options,
                                          ExecutionContext& ctx) {
  if (weight == nullptr || out < 1 || in < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("LinearOp: weight [", out, ", ", in, "] must be non-empty"));
  }
  LinearOp op;
  op.out_ = out;
  op.in_ = in;
  op.options_ = options;
  op.device_ = ctx.device();
  if (ctx.device().is_cpu()) {
    if (options.dtype != DType::kFloat32) {
      return absl::InvalidArgumentError(
          absl::StrCat("LinearOp: the CPU computes in float32, not ", DTypeName(options.dtype)));
    }
    op.cpu_ = std::make_unique<PackedLinear>(weight, bias, out, in, options.scale);
    return op;
  }
#if OASR_WITH_CUDA
  absl::StatusOr<std::unique_ptr<CudaGemm>> gemm =
      CudaGemm::Create(weight, bias, out, in, options, ctx);
  if (!gemm.ok()) return gemm.status();
  op.cuda_ = std::move(*gemm);
  return op;
#else
  return absl::UnavailableError("LinearOp: built without CUDA");
#endif
}

const void* LinearOp::device_weight() const {
#if OASR_WITH_CUDA
  if (cuda_ != nullptr) return cuda_->weight();
#endif
  return nullptr;
}

const float* LinearOp::device_bias_f32() const {
#if OASR_WITH_CUDA
  if (cuda_ != nullptr) return cuda_->bias_f32();
#endif
  return nullptr;
}

bool LinearOp::FusesNorms() const {
  if (cpu_ != nullptr) return options_.activation == Activation::kNone;
#if OASR_WITH_CUDA
  return cuda_ != nullptr && cuda_->FusesNorms();
#else
  return false;
#endif
}

absl::Status LinearOp::Run(ExecutionContext& ctx, const LinearArgs& args) const {
  if (args.m == 0) return absl::OkStatus();
  const bool norms = args.y_norm_scale != nullptr || args.out_norm_scale != nullptr;
  if (norms && !FusesNorms()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LinearOp [", out_, ", ", in_, "]: norms after the product need no activation, and on ",
        "CUDA the wgmma kernel (a Hopper GPU, 16-bit, out 256, gemm norms, fused or wgmma)"));
  }
  if (norms && (args.y_norm_scale != nullptr) != (args.y_norm_shift != nullptr)) {
    return absl::InvalidArgumentError("LinearOp: y_norm_scale and y_norm_shift go together");
  }
  if (norms && args.out_norm_scale != nullptr &&
      (args.out_norm_shift == nullptr || args.norm_out == nullptr || args.ld_norm_out < out_)) {
    return absl::InvalidArgumentError(
        "LinearOp: out_norm needs its shift, norm_out and ld_norm_out >= out");
  }
  if (args.m < 0 || args.x == nullptr || args.y == nullptr || args.ldx < in_ || args.ldy < out_) {
    return absl::InvalidArgumentError(absl::StrCat("LinearOp [", out_, ", ", in_, "]: m ", args.m,
                                                   ", ldx ", args.ldx, ", ldy ", args.ldy,
                                                   " (x and y non-null, ldx >= in, ldy >= out)"));
  }
  if (args.accumulate && options_.activation != Activation::kNone) {
    return absl::InvalidArgumentError(
        absl::StrCat("LinearOp: accumulate with activation ", ActivationName(options_.activation)));
  }
  if (args.y_dtype != DType::kFloat32 && args.y_dtype != options_.dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("LinearOp: output dtype ", DTypeName(args.y_dtype), " is neither float32 nor ",
                     DTypeName(options_.dtype)));
  }
  if (!(ctx.device() == device_)) {
    return absl::InvalidArgumentError(absl::StrCat("LinearOp: made for ", device_.ToString(),
                                                   ", run on ", ctx.device().ToString()));
  }
  if (cpu_ != nullptr) return RunCpu(ctx, args);
#if OASR_WITH_CUDA
  if (norms && !cuda_->NormsInEpilogue(ctx, args.m)) {
    // cuBLASLt's product, then the norm passes.
    LinearArgs product = args;
    product.y_norm_scale = product.y_norm_shift = nullptr;
    product.out_norm_scale = product.out_norm_shift = nullptr;
    product.norm_out = nullptr;
    OASR_RETURN_IF_ERROR(cuda_->Run(ctx, product));
    return RunNorms(ctx, args, out_, options_.dtype);
  }
  return cuda_->Run(ctx, args);
#else
  return absl::UnavailableError("LinearOp: built without CUDA");
#endif
}

absl::Status LinearOp::RunCpu(ExecutionContext& ctx, const LinearArgs& args) const {
  const float* x = static_cast<const float*>(args.x);
  float* y = static_cast<float*>(args.y);
  // Below ~1M multiply-adds a fork-join costs more than it saves.
  constexpr int64_t kMinWork = 1 << 20;
  ThreadPool& pool = ctx.threads();
  const int64_t panels = cpu_->num_panels();
  const int64_t parts = std::min<int64_t>(pool.threads(), panels);
  if (parts <= 1 || args.m * in_ * out_ < kMinWork) {
    cpu_->Forward(x, args.m, args.ldx, y, args.ldy, args.accumulate);
  } else {
    pool.ParallelFor(parts, [&](int64_t i) {
      cpu_->ForwardPanels(x, args.m, args.ldx, y, args.ldy, args.accumulate, panels * i / parts,
                          panels * (i + 1) / parts);
    });
  }
  OASR_RETURN_IF_ERROR(RunNorms(ctx, args, out_, DType::kFloat32));
  if (options_.activation == Activation::kNone) return absl::OkStatus();
  ActivationParams act;
  act.x = y;
  act.dtype = DType::kFloat32;
  act.rows = args.m;
  act.cols = out_;
  act.ld = args.ldy;
  act.activation = options_.activation;
  return ApplyActivation(ctx, act);
}

}  // namespace oasr::kernels
