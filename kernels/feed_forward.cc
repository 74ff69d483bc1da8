#include "kernels/feed_forward.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/half.h"
#include "common/status.h"
#include "kernels/cpu_math.h"
#include "kernels/norm.h"

namespace oasr::kernels {
namespace {

// LN(rows of x) * scale + shift into out (in place when out is x).
void NormRows(const float* x, int64_t ldx, int64_t rows, int64_t d, const float* scale,
              const float* shift, float eps, float* out, int64_t ldo) {
  LayerNormParams n;
  n.x = x;
  n.ldx = ldx;
  n.scale = scale;
  n.shift = shift;
  n.eps = eps;
  n.out = out;
  n.ldo = ldo;
  n.rows = rows;
  n.d = d;
  LayerNormCpu(n, nullptr);
}

void FeedForwardRows(const FeedForwardParams& p, int64_t begin, int64_t end) {
  const int64_t d = p.d, units = p.units, rows = end - begin;
  if (rows <= 0) return;
  std::vector<float> xn(static_cast<size_t>(rows * d)), hidden(static_cast<size_t>(rows * units)),
      y(static_cast<size_t>(rows * d));
  float* x = p.x + begin * p.ldx;
  NormRows(x, p.ldx, rows, d, p.norm_scale, p.norm_shift, p.eps, xn.data(), d);
  const auto* w1 = static_cast<const float*>(p.w1);
  const auto* w2 = static_cast<const float*>(p.w2);
  cpu::GemmNT(rows, units, d, 1.0f, xn.data(), d, w1, d, 0.0f, hidden.data(), units);
  for (int64_t r = 0; r < rows; ++r) {
    float* h = hidden.data() + r * units;
    if (p.b1 != nullptr) {
      for (int64_t u = 0; u < units; ++u) h[u] += p.b1[u];
    }
    cpu::SwishInPlace(h, units);
  }
  cpu::GemmNT(rows, d, units, 1.0f, hidden.data(), units, w2, units, 0.0f, y.data(), d);
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * p.ldx;
    const float* yr = y.data() + r * d;
    for (int64_t i = 0; i < d; ++i) xr[i] += yr[i] + (p.b2 != nullptr ? p.b2[i] : 0.0f);
  }
  if (p.final_scale != nullptr) {
    NormRows(x, p.ldx, rows, d, p.final_scale, p.final_shift, p.final_eps, x, p.ldx);
  }
}

bool SixteenBit(DType t) { return t == DType::kBFloat16 || t == DType::kFloat16; }

absl::StatusOr<Tensor> Place(const std::vector<float>& host, DType dtype, Device device) {
  const int64_t n = static_cast<int64_t>(host.size());
  OASR_ASSIGN_OR_RETURN(Tensor staged, Tensor::Empty({n}, dtype));
  if (dtype == DType::kFloat32) {
    std::copy(host.begin(), host.end(), staged.data<float>());
  } else {
    ConvertFromFloat(host.data(), n, dtype, staged.data());
  }
  if (device.is_cpu()) return staged;
  OASR_ASSIGN_OR_RETURN(Tensor dev, Tensor::Empty({n}, dtype, device));
  OASR_RETURN_IF_ERROR(CopyTensor(dev.view(), staged.view()));
  return dev;
}

}  // namespace

void FeedForwardCpu(const FeedForwardParams& p, ThreadPool* pool) {
  // Blocks of rows, so that each GEMM has some height.
  constexpr int64_t kRowsPerTask = 64;
  const int64_t tasks = (p.m + kRowsPerTask - 1) / kRowsPerTask;
  if (pool == nullptr || tasks <= 1) {
    FeedForwardRows(p, 0, p.m);
    return;
  }
  pool->ParallelFor(tasks, [&](int64_t i) {
    FeedForwardRows(p, i * kRowsPerTask, std::min(p.m, (i + 1) * kRowsPerTask));
  });
}

bool FeedForwardOp::Supported(const ExecutionContext& ctx, DType dtype, int64_t d, int64_t units) {
  if (d < 1 || units < 1) return false;
  if (!ctx.is_cuda()) return dtype == DType::kFloat32;
#if OASR_WITH_CUDA
  return SixteenBit(dtype) && d == 256 && units % 64 == 0;
#else
  return false;
#endif
}

absl::StatusOr<FeedForwardOp> FeedForwardOp::Create(const float* w1, const float* b1,
                                                    const float* w2, const float* b2, int64_t d,
                                                    int64_t units, float scale, DType dtype,
                                                    ExecutionContext& ctx) {
  if (w1 == nullptr || w2 == nullptr || !Supported(ctx, dtype, d, units)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feed_forward: d ", d, ", units ", units, ", ", DTypeName(dtype), " on ",
        ctx.device().ToString(),
        " is not supported (the CPU: float32; CUDA: 16-bit, d 256, units a multiple of 64)"));
  }
  FeedForwardOp op;
  op.d_ = d;
  op.units_ = units;
  op.dtype_ = dtype;
  std::vector<float> host(w1, w1 + units * d);
  OASR_ASSIGN_OR_RETURN(op.w1_, Place(host, dtype, ctx.device()));
  host.assign(w2, w2 + d * units);
  for (float& v : host) v *= scale;
  OASR_ASSIGN_OR_RETURN(op.w2_, Place(host, dtype, ctx.device()));
  host.assign(static_cast<size_t>(units), 0.0f);
  if (b1 != nullptr) std::copy(b1, b1 + units, host.begin());
  OASR_ASSIGN_OR_RETURN(op.b1_, Place(host, DType::kFloat32, ctx.device()));
  host.assign(static_cast<size_t>(d), 0.0f);
  if (b2 != nullptr) {
    for (int64_t i = 0; i < d; ++i) host[i] = scale * b2[i];
  }
  OASR_ASSIGN_OR_RETURN(op.b2_, Place(host, DType::kFloat32, ctx.device()));
#if OASR_WITH_CUDA
  if (ctx.is_cuda()) PrepareFeedForwardKernel();
#endif
  return op;
}

absl::Status FeedForwardOp::Run(ExecutionContext& ctx, const FeedForwardArgs& a) const {
  if (a.m == 0) return absl::OkStatus();
  const bool cuda = ctx.is_cuda();
  if (a.x == nullptr || a.norm_scale == nullptr || a.norm_shift == nullptr || a.m < 0 ||
      a.ldx < d_ || (a.final_scale == nullptr) != (a.final_shift == nullptr) ||
      (a.block_rows != 0 && a.block_rows != 64 && a.block_rows != 128) ||
      (cuda && (reinterpret_cast<uintptr_t>(a.x) % 16 != 0 || a.ldx % 4 != 0))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feed_forward: m ", a.m, ", ldx ", a.ldx, ", block_rows ", a.block_rows,
        " (x and the norm non-null, ldx >= d, final scale and shift both or neither, block rows "
        "0, 64 or 128; CUDA: x 16-byte aligned, ldx a multiple of 4)"));
  }
  FeedForwardParams p;
  p.x = a.x;
  p.ldx = a.ldx;
  p.m = a.m;
  p.d = d_;
  p.units = units_;
  p.dtype = dtype_;
  p.w1 = w1_.data();
  p.b1 = b1_.data<float>();
  p.w2 = w2_.data();
  p.b2 = b2_.data<float>();
  p.norm_scale = a.norm_scale;
  p.norm_shift = a.norm_shift;
  p.eps = a.eps;
  p.final_scale = a.final_scale;
  p.final_shift = a.final_shift;
  p.final_eps = a.final_eps;
  p.block_rows = a.block_rows;
  if (!cuda) {
    FeedForwardCpu(p, &ctx.threads());
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  LaunchFeedForward(p, ctx.stream());
  return absl::OkStatus();
#else
  return absl::UnavailableError("feed_forward: this build has no CUDA");
#endif
}

}  // namespace oasr::kernels
