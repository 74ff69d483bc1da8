#include "kernels/norm.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace oasr::kernels {
namespace {

void NormRows(const LayerNormParams& p, int64_t begin, int64_t end) {
  const float* scale = p.scale;
  const float* shift = p.shift;
  const int64_t d = p.d;
  for (int64_t r = begin; r < end; ++r) {
    const float* in = static_cast<const float*>(p.x) + r * p.ldx;
    if (p.residual != nullptr) {
      const float* res = static_cast<const float*>(p.residual) + r * p.ld_residual;
      float* sum = p.sum_out != nullptr ? static_cast<float*>(p.sum_out) + r * p.ld_sum
                                        : static_cast<float*>(p.out) + r * p.ldo;
      for (int64_t i = 0; i < d; ++i) sum[i] = in[i] + p.residual_scale * res[i];
      in = sum;
    }
    float* out = static_cast<float*>(p.out) + r * p.ldo;
    float total = 0.0f;
    for (int64_t i = 0; i < d; ++i) total += in[i];
    const float mean = total / static_cast<float>(d);
    float sq = 0.0f;
    for (int64_t i = 0; i < d; ++i) {
      const float c = in[i] - mean;
      sq += c * c;
    }
    const float inv = 1.0f / std::sqrt(sq / static_cast<float>(d) + p.eps);
    for (int64_t i = 0; i < d; ++i) out[i] = (in[i] - mean) * inv * scale[i] + shift[i];
  }
}

bool DeviceDType(DType d) {
  return d == DType::kFloat32 || d == DType::kBFloat16 || d == DType::kFloat16;
}

}  // namespace

void LayerNormCpu(const LayerNormParams& p, ThreadPool* pool) {
  // Below a few hundred rows a fork-join costs more than it saves.
  constexpr int64_t kRowsPerTask = 64;
  const int64_t tasks =
      pool == nullptr
          ? 1
          : std::min<int64_t>(pool->threads(), (p.rows + kRowsPerTask - 1) / kRowsPerTask);
  if (tasks <= 1) {
    NormRows(p, 0, p.rows);
    return;
  }
  pool->ParallelFor(tasks,
                    [&](int64_t i) { NormRows(p, p.rows * i / tasks, p.rows * (i + 1) / tasks); });
}

absl::Status LayerNorm(ExecutionContext& ctx, const LayerNormParams& p) {
  if (p.rows == 0) return absl::OkStatus();
  if (p.x == nullptr || p.out == nullptr || p.scale == nullptr || p.shift == nullptr ||
      p.rows < 0 || p.d < 1 || p.ldx < p.d || p.ldo < p.d ||
      (p.residual != nullptr && p.ld_residual < p.d) ||
      (p.sum_out != nullptr && (p.residual == nullptr || p.ld_sum < p.d))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer_norm: rows ", p.rows, ", d ", p.d, ", ldx ", p.ldx, ", ldo ", p.ldo,
        " (x, out, scale, shift non-null; strides >= d; sum_out only with a residual)"));
  }
  const bool cuda = ctx.is_cuda();
  for (DType t : {p.x_dtype, p.out_dtype, p.residual_dtype}) {
    if (cuda ? !DeviceDType(t) : t != DType::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer_norm: dtype ", DTypeName(t), " is not computed on ", ctx.device().ToString()));
    }
  }
  if (!cuda) {
    LayerNormCpu(p, &ctx.threads());
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  if (p.d > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("layer_norm: d ", p.d, " is above 1024"));
  }
  LaunchLayerNorm(p, ctx.stream());
#endif
  return absl::OkStatus();
}

}  // namespace oasr::kernels
