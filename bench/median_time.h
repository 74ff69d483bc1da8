// The median time of a benchmark's timed runs: CUDA events around each run on
// ctx's stream on a GPU (the device time of what the run enqueued), the wall
// clock on the CPU. For bench/ programs only.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/status/statusor.h"
#include "common/execution_context.h"

#if OASR_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace oasr::bench {

// Runs `run` (returning absl::Status) `reps` times; its first error, or the
// median in milliseconds.
template <typename Run>
absl::StatusOr<double> MedianMs([[maybe_unused]] ExecutionContext& ctx, int reps, const Run& run) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
#if OASR_WITH_CUDA
    if (ctx.is_cuda()) {
      cudaEvent_t start, stop;
      cudaEventCreate(&start);
      cudaEventCreate(&stop);
      cudaEventRecord(start, ctx.stream());
      const absl::Status status = run();
      cudaEventRecord(stop, ctx.stream());
      cudaEventSynchronize(stop);
      float elapsed = 0;
      cudaEventElapsedTime(&elapsed, start, stop);
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
      if (!status.ok()) return status;
      ms.push_back(elapsed);
      continue;
    }
#endif
    const auto start = std::chrono::steady_clock::now();
    if (absl::Status status = run(); !status.ok()) return status;
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms.empty() ? 0.0 : ms[ms.size() / 2];
}

}  // namespace oasr::bench
