#include "kernels/residual_add.h"

namespace oasr::kernels {

void ResidualAddCpu(const ResidualAddParams& p) {
  for (int64_t i = 0; i < p.n; ++i) p.y[i] += p.alpha * p.x[i];
}

}  // namespace oasr::kernels
