#include "kernels/activation.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/half.h"
#include "kernels/cpu_math.h"

namespace oasr::kernels {
namespace {

bool DeviceDType(DType d) {
  return d == DType::kFloat32 || d == DType::kBFloat16 || d == DType::kFloat16;
}

absl::Status CheckDType(const ExecutionContext& ctx, DType dtype, const char* op) {
  if (ctx.is_cuda() ? DeviceDType(dtype) : dtype == DType::kFloat32) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": dtype ", DTypeName(dtype),
                                                 " is not computed on ", ctx.device().ToString()));
}

}  // namespace

const char* ActivationName(Activation a) {
  switch (a) {
    case Activation::kNone:
      return "none";
    case Activation::kRelu:
      return "relu";
    case Activation::kSwish:
      return "swish";
  }
  return "unknown";
}

void ActivationCpu(const ActivationParams& p) {
  for (int64_t r = 0; r < p.rows; ++r) {
    float* row = static_cast<float*>(p.x) + r * p.ld;
    if (p.activation == Activation::kSwish) {
      cpu::SwishInPlace(row, p.cols);
    } else if (p.activation == Activation::kRelu) {
      for (int64_t i = 0; i < p.cols; ++i) row[i] = std::max(row[i], 0.0f);
    }
  }
}

void GluCpu(const GluParams& p) {
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* a = static_cast<const float*>(p.in) + r * p.ld_in;
    const float* g = a + p.cols;
    float* o = static_cast<float*>(p.out) + r * p.ld_out;
    for (int64_t i = 0; i < p.cols; ++i) o[i] = -g[i];
    cpu::ExpVec(o, o, p.cols);
    for (int64_t i = 0; i < p.cols; ++i) o[i] = a[i] / (1.0f + o[i]);
  }
}

void CastCpu(const CastParams& p) {
  if (p.in_dtype == p.out_dtype) {
    if (p.in != p.out) std::memmove(p.out, p.in, static_cast<size_t>(p.n) * DTypeSize(p.in_dtype));
    return;
  }
  if (p.in_dtype == DType::kFloat32) {
    ConvertFromFloat(static_cast<const float*>(p.in), p.n, p.out_dtype, p.out);
  } else if (p.out_dtype == DType::kFloat32) {
    ConvertToFloat(p.in, p.n, p.in_dtype, static_cast<float*>(p.out));
  } else {
    const uint16_t* in = static_cast<const uint16_t*>(p.in);
    uint16_t* out = static_cast<uint16_t*>(p.out);
    for (int64_t i = 0; i < p.n; ++i) {
      float f;
      ConvertToFloat(in + i, 1, p.in_dtype, &f);
      ConvertFromFloat(&f, 1, p.out_dtype, out + i);
    }
  }
}

absl::Status Cast(ExecutionContext& ctx, const CastParams& p) {
  if (p.n == 0) return absl::OkStatus();
  if (p.in == nullptr || p.out == nullptr || p.n < 0 || !DeviceDType(p.in_dtype) ||
      !DeviceDType(p.out_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("cast: ", p.n, " values ", DTypeName(p.in_dtype),
                                                   " -> ", DTypeName(p.out_dtype),
                                                   " (float types only, pointers non-null)"));
  }
  if (!ctx.is_cuda()) {
    CastCpu(p);
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  LaunchCast(p, ctx.stream());
#endif
  return absl::OkStatus();
}

absl::Status ApplyActivation(ExecutionContext& ctx, const ActivationParams& p) {
  if (p.rows == 0 || p.cols == 0 || p.activation == Activation::kNone) return absl::OkStatus();
  if (p.x == nullptr || p.ld < p.cols || p.rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat("activation: rows ", p.rows, ", cols ", p.cols,
                                                   ", ld ", p.ld, " (x non-null, ld >= cols)"));
  }
  if (absl::Status s = CheckDType(ctx, p.dtype, "activation"); !s.ok()) return s;
  if (!ctx.is_cuda()) {
    ActivationCpu(p);
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  LaunchActivation(p, ctx.stream());
#endif
  return absl::OkStatus();
}

absl::Status Glu(ExecutionContext& ctx, const GluParams& p) {
  if (p.rows == 0 || p.cols == 0) return absl::OkStatus();
  if (p.in == nullptr || p.out == nullptr || p.ld_in < 2 * p.cols || p.ld_out < p.cols) {
    return absl::InvalidArgumentError(absl::StrCat("glu: cols ", p.cols, ", ld_in ", p.ld_in,
                                                   ", ld_out ", p.ld_out,
                                                   " (ld_in >= 2 cols, ld_out >= cols)"));
  }
  if (absl::Status s = CheckDType(ctx, p.dtype, "glu"); !s.ok()) return s;
  if (!ctx.is_cuda()) {
    GluCpu(p);
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  LaunchGlu(p, ctx.stream());
#endif
  return absl::OkStatus();
}

}  // namespace oasr::kernels
