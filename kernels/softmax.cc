#include "kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace oasr::kernels {
namespace {

void LogSoftmaxRows(const LogSoftmaxParams& p, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    float* row = p.x + r * p.ld;
    const float mx = *std::max_element(row, row + p.n);
    double sum = 0.0;
    for (int64_t i = 0; i < p.n; ++i) sum += std::exp(row[i] - mx);
    const float lse = mx + static_cast<float>(std::log(sum));
    for (int64_t i = 0; i < p.n; ++i) row[i] -= lse;
  }
}

}  // namespace

void LogSoftmaxCpu(const LogSoftmaxParams& p, ThreadPool* pool) {
  constexpr int64_t kRowsPerTask = 32;
  const int64_t tasks =
      pool == nullptr
          ? 1
          : std::min<int64_t>(pool->threads(), (p.rows + kRowsPerTask - 1) / kRowsPerTask);
  if (tasks <= 1) {
    LogSoftmaxRows(p, 0, p.rows);
    return;
  }
  pool->ParallelFor(
      tasks, [&](int64_t i) { LogSoftmaxRows(p, p.rows * i / tasks, p.rows * (i + 1) / tasks); });
}

void TopKCpu(const TopKParams& p) {
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* row = p.x + r * p.ld;
    float* values = p.values + r * p.k;
    int32_t* indices = p.indices + r * p.k;
    int filled = 0;
    // Insertion into a sorted list of k: strictly greater moves ahead, so
    // among equals the lower column (seen first) stays in front.
    for (int64_t i = 0; i < p.n; ++i) {
      const float v = row[i];
      if (std::isnan(v) || (filled == p.k && !(v > values[p.k - 1]))) continue;
      int at = filled < p.k ? filled++ : p.k - 1;
      while (at > 0 && v > values[at - 1]) {
        values[at] = values[at - 1];
        indices[at] = indices[at - 1];
        --at;
      }
      values[at] = v;
      indices[at] = static_cast<int32_t>(i);
    }
    for (; filled < p.k; ++filled) {
      values[filled] = -std::numeric_limits<float>::infinity();
      indices[filled] = std::numeric_limits<int32_t>::max();
    }
    if (p.gathered != nullptr) p.gathered[r] = row[p.gather_column];
  }
}

absl::Status LogSoftmax(ExecutionContext& ctx, const LogSoftmaxParams& p) {
  if (p.rows == 0) return absl::OkStatus();
  if (p.x == nullptr || p.rows < 0 || p.n < 1 || p.ld < p.n) {
    return absl::InvalidArgumentError(absl::StrCat("log_softmax: rows ", p.rows, ", n ", p.n,
                                                   ", ld ", p.ld, " (x non-null, ld >= n >= 1)"));
  }
  if (!ctx.is_cuda()) {
    LogSoftmaxCpu(p, &ctx.threads());
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  LaunchLogSoftmax(p, ctx.stream());
#endif
  return absl::OkStatus();
}

absl::Status TopK(ExecutionContext& ctx, const TopKParams& p) {
  if (p.rows == 0) return absl::OkStatus();
  if (p.x == nullptr || p.values == nullptr || p.indices == nullptr || p.rows < 0 || p.n < 1 ||
      p.ld < p.n || p.k < 1 || p.k > std::min<int64_t>(p.n, kMaxTopK) ||
      (p.gathered != nullptr && (p.gather_column < 0 || p.gather_column >= p.n))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "top_k: rows ", p.rows, ", n ", p.n, ", ld ", p.ld, ", k ", p.k, ", gather column ",
        p.gather_column, " (k in [1, min(n, 64)], the column in [0, n))"));
  }
  if (!ctx.is_cuda()) {
    TopKCpu(p);
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  LaunchTopK(p, ctx.stream());
#endif
  return absl::OkStatus();
}

}  // namespace oasr::kernels
