#include "kernels/conv2d.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/cpu_math.h"
#if OASR_WITH_CUDA
#include "kernels/wgmma_gemm.h"
#endif

namespace oasr::kernels {
namespace {

// CUDA: the patch matrix of one group stays under this.
constexpr size_t kCudaGroupBytes = size_t{96} << 20;

}  // namespace

void Im2ColCpu(const Im2ColParams& p) {
  const int64_t k = p.kernel, s = p.stride;
  const int64_t t_out = Conv2dOp::OutSize(p.h, p.kernel, p.stride);
  const int64_t f_out = Conv2dOp::OutSize(p.w, p.kernel, p.stride);
  const int64_t patch = k * k * p.c;
  const float* in = static_cast<const float*>(p.in);
  float* out = static_cast<float*>(p.patches);
  for (int64_t i = 0; i < p.n; ++i) {
    const float* src = in + i * p.h * p.w * p.c;
    for (int64_t t = 0; t < t_out; ++t) {
      for (int64_t f = 0; f < f_out; ++f) {
        float* dst = out + ((i * t_out + t) * f_out + f) * p.ld;
        for (int64_t a = 0; a < k; ++a) {
          // k consecutive frequency cells of one time row are contiguous.
          const float* row = src + ((t * s + a) * p.w + f * s) * p.c;
          std::memcpy(dst + a * k * p.c, row, static_cast<size_t>(k * p.c) * sizeof(float));
        }
        std::fill(dst + patch, dst + p.ld, 0.0f);
      }
    }
  }
}

absl::Status Im2Col(ExecutionContext& ctx, const Im2ColParams& p) {
  if (p.n == 0) return absl::OkStatus();
  if (p.in == nullptr || p.patches == nullptr || p.kernel < 1 || p.stride < 1 || p.h < p.kernel ||
      p.w < p.kernel || p.c < 1 || p.ld < int64_t{p.kernel} * p.kernel * p.c) {
    return absl::InvalidArgumentError(absl::StrCat("im2col: image ", p.h, " x ", p.w, " x ", p.c,
                                                   ", kernel ", p.kernel, ", ld ", p.ld));
  }
  if (!ctx.is_cuda()) {
    if (p.in_dtype != DType::kFloat32 || p.patch_dtype != DType::kFloat32) {
      return absl::InvalidArgumentError("im2col: the CPU handles float32 only");
    }
    Im2ColCpu(p);
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  LaunchIm2Col(p, ctx.stream());
#endif
  return absl::OkStatus();
}

absl::StatusOr<Conv2dOp> Conv2dOp::Create(const float* weight, const float* bias,
                                          const Conv2dOptions& options, ExecutionContext& ctx) {
  if (weight == nullptr || bias == nullptr || options.in_channels < 1 || options.out_channels < 1 ||
      options.kernel < 1 || options.stride < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Conv2dOp: ", options.in_channels, " -> ", options.out_channels, " channels, kernel ",
        options.kernel, ", stride ", options.stride, " (all positive, weight and bias given)"));
  }
  Conv2dOp op;
  op.options_ = options;
  const int64_t patch = op.patch();
  if (!ctx.is_cuda()) {
    if (options.dtype != DType::kFloat32) {
      return absl::InvalidArgumentError(
          absl::StrCat("Conv2dOp: the CPU computes in float32, not ", DTypeName(options.dtype)));
    }
    op.ld_ = patch;
    op.weight_.assign(weight, weight + patch * options.out_channels);
    op.bias_.assign(bias, bias + options.out_channels);
    return op;
  }
  // 16-byte aligned rows for the tensor cores: pad the patch to 8 columns.
  op.ld_ = (patch + 7) / 8 * 8;
  std::vector<float> padded(static_cast<size_t>(op.ld_) * options.out_channels, 0.0f);
  for (int64_t o = 0; o < options.out_channels; ++o) {
    std::copy(weight + o * patch, weight + (o + 1) * patch, padded.begin() + o * op.ld_);
  }
  LinearOptions lin;
  lin.dtype = options.dtype;
  lin.activation = Activation::kRelu;
  absl::StatusOr<LinearOp> gemm =
      LinearOp::Create(padded.data(), bias, options.out_channels, op.ld_, lin, ctx);
  if (!gemm.ok()) return gemm.status();
  op.gemm_ = std::move(*gemm);
  return op;
}

absl::Status Conv2dOp::FuseFirstStage(const float* weight, const float* bias,
                                      const Conv2dOptions& first, ExecutionContext& ctx,
                                      StemKernel kernel) {
  if (!ctx.is_cuda() || first.in_channels != 1 || first.kernel != 3 ||
      first.out_channels != options_.in_channels || weight == nullptr || bias == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Conv2dOp::FuseFirstStage: needs CUDA and a one-channel 3 x 3 first stage with ",
        options_.in_channels, " output channels (got ", first.in_channels, " -> ",
        first.out_channels, ", kernel ", first.kernel, ")"));
  }
  const int64_t n = int64_t{first.out_channels} * 9;
  FusedFirst f;
  f.options = first;
  f.kernel = kernel;
#if OASR_WITH_CUDA
  const int c1 = first.out_channels;
  f.implicit = kernel == StemKernel::kImplicitGemm && options_.dtype != DType::kFloat32 &&
               options_.out_channels % 2 == 0 && (c1 == 64 || c1 == 128 || c1 == 256 || c1 == 512) &&
               ld_ == patch() && options_.stride <= 8 && WgmmaGemmAvailable();
#endif
  OASR_ASSIGN_OR_RETURN(f.weight, Tensor::Empty({n}, DType::kFloat32, ctx.device()));
  OASR_ASSIGN_OR_RETURN(f.bias, Tensor::Empty({first.out_channels}, DType::kFloat32, ctx.device()));
  OASR_RETURN_IF_ERROR(
      CopyTensor(f.weight.view(),
                 TensorView(const_cast<float*>(weight), DType::kFloat32, {n}, Device::Cpu())));
  OASR_RETURN_IF_ERROR(CopyTensor(
      f.bias.view(),
      TensorView(const_cast<float*>(bias), DType::kFloat32, {first.out_channels}, Device::Cpu())));
  fused_ = std::move(f);
  return absl::OkStatus();
}

int64_t Conv2dOp::GroupSize(int64_t n, int64_t h, int64_t w) const {
  const size_t per_image =
      static_cast<size_t>(ScratchPerImage(StageIn(h), StageIn(w))) * DTypeSize(options_.dtype);
  return std::clamp<int64_t>(static_cast<int64_t>(kCudaGroupBytes / std::max<size_t>(per_image, 1)),
                             1, std::max<int64_t>(n, 1));
}

size_t Conv2dOp::WorkspaceBytes(const ExecutionContext& ctx, int64_t n, int64_t h,
                                int64_t w) const {
  const int64_t images = ctx.is_cuda() ? GroupSize(n, h, w) : 1;
  return static_cast<size_t>(images * ScratchPerImage(StageIn(h), StageIn(w))) *
             DTypeSize(options_.dtype) +
         Arena::kAlignment;
}

absl::Status Conv2dOp::Run(ExecutionContext& ctx, const Conv2dArgs& args) const {
  if (args.n == 0) return absl::OkStatus();
  const int64_t h_in = StageIn(args.h), w_in = StageIn(args.w);
  const int64_t t_out = OutSize(h_in), f_out = OutSize(w_in);
  if (args.in == nullptr || args.out == nullptr || t_out < 1 || f_out < 1 || args.n < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Conv2dOp: ", args.n, " images of ", args.h,
                                                   " x ", args.w, ", kernel ", options_.kernel));
  }
  if (args.in_dtype != DType::kFloat32 && args.in_dtype != options_.dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("Conv2dOp: input dtype ", DTypeName(args.in_dtype), " is neither float32 nor ",
                     DTypeName(options_.dtype)));
  }
  const int64_t rows = t_out * f_out;
  const int64_t cout = options_.out_channels;
  // A fused first stage reads the one-channel float32 input.
  const int64_t in_channels = fused_ ? 1 : options_.in_channels;
  if (fused_ && args.in_dtype != DType::kFloat32) {
    return absl::InvalidArgumentError("Conv2dOp: a fused first stage reads float32 input");
  }
  const size_t in_image =
      static_cast<size_t>(args.h * args.w * in_channels) * DTypeSize(args.in_dtype);
  const size_t out_image = static_cast<size_t>(rows * cout) * DTypeSize(options_.dtype);
  Arena& arena = ctx.workspace();
  const size_t mark = arena.mark();
  const int64_t group = ctx.is_cuda() ? GroupSize(args.n, args.h, args.w) : 1;
  // The patches, or the implicit-GEMM stem's stage-1 activation.
  const size_t scratch =
      static_cast<size_t>(group * ScratchPerImage(h_in, w_in)) * DTypeSize(options_.dtype);
  void* patches = arena.Allocate(scratch);
  if (patches == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("Conv2dOp: the workspace has ",
                                                     arena.capacity() - arena.used(),
                                                     " bytes left, the scratch needs ", scratch));
  }
  absl::Status status;
  for (int64_t first = 0; first < args.n && status.ok(); first += group) {
    const int64_t count = std::min(group, args.n - first);
#if OASR_WITH_CUDA
    if (fused_) {
      FusedStemParams f;
      f.in = reinterpret_cast<const float*>(static_cast<const char*>(args.in) + first * in_image);
      f.n = count;
      f.h = args.h;
      f.w = args.w;
      f.w1 = fused_->weight.data<float>();
      f.b1 = fused_->bias.data<float>();
      f.c1 = fused_->options.out_channels;
      f.s1 = fused_->options.stride;
      f.k2 = options_.kernel;
      f.s2 = options_.stride;
      f.patches = patches;
      f.patch_dtype = options_.dtype;
      f.ld = ld_;
      f.kernel = fused_->kernel;
      if (fused_->implicit) {
        // Stage 1's activation, then stage 2 gathering its patches from it.
        f.ld = f.c1;
        LaunchStemStage1(f, ctx.stream());
        WgmmaConvParams c;
        c.x = patches;
        c.n = count;
        c.h = h_in;
        c.w = w_in;
        c.c = options_.in_channels;
        c.kernel = options_.kernel;
        c.stride = options_.stride;
        c.weight = gemm_.device_weight();
        c.bias = gemm_.device_bias_f32();
        c.cout = cout;
        c.y = static_cast<char*>(args.out) + first * out_image;
        c.ldy = cout;
        c.dtype = options_.dtype;
        c.activation = Activation::kRelu;
        if (!LaunchWgmmaConv(c, ctx.multiprocessors(), ctx.stream())) {
          status = absl::InternalError(absl::StrCat(
              "Conv2dOp: the implicit-GEMM stem could not launch (", count, " images of ", h_in,
              " x ", w_in, " x ", c.c, ")"));
        }
        continue;
      }
      LaunchFusedStem(f, ctx.stream());
    } else
#endif
    {
      Im2ColParams im;
      im.in = static_cast<const char*>(args.in) + first * in_image;
      im.in_dtype = args.in_dtype;
      im.n = count;
      im.h = h_in;
      im.w = w_in;
      im.c = options_.in_channels;
      im.kernel = options_.kernel;
      im.stride = options_.stride;
      im.patches = patches;
      im.patch_dtype = options_.dtype;
      im.ld = ld_;
      status = Im2Col(ctx, im);
      if (!status.ok()) break;
    }
    void* out = static_cast<char*>(args.out) + first * out_image;
    if (!ctx.is_cuda()) {
      float* y = static_cast<float*>(out);
      cpu::GemmNT(rows, cout, ld_, 1.0f, static_cast<const float*>(patches), ld_, weight_.data(),
                  ld_, 0.0f, y, cout);
      for (int64_t r = 0; r < rows; ++r) {
        float* row = y + r * cout;
        for (int64_t j = 0; j < cout; ++j) row[j] = std::max(row[j] + bias_[j], 0.0f);
      }
      continue;
    }
    LinearArgs lin;
    lin.x = patches;
    lin.ldx = ld_;
    lin.y = out;
    lin.ldy = cout;
    lin.y_dtype = options_.dtype;
    lin.m = count * rows;
    status = gemm_.Run(ctx, lin);
  }
  arena.Rewind(mark);
  return status;
}

}  // namespace oasr::kernels
