#include "kernels/residual_add.h"

namespace oasr::kernels {

absl::Status ResidualAdd(ExecutionContext& ctx, const ResidualAddParams& p) {
  if (p.n == 0) return absl::OkStatus();
  if (p.y == nullptr || p.x == nullptr || p.n < 0) {
    return absl::InvalidArgumentError("residual_add: y and x must be non-null for n > 0");
  }
  if (!ctx.is_cuda()) {
    ResidualAddCpu(p);
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  LaunchResidualAdd(p, ctx.stream());
#endif
  return absl::OkStatus();
}

void ResidualAddCpu(const ResidualAddParams& p) {
  for (int64_t i = 0; i < p.n; ++i) p.y[i] += p.alpha * p.x[i];
}

}  // namespace oasr::kernels
