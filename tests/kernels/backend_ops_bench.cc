// oasr-bench-kernels: the backend harness's op table, timed on every backend
// present (median of --reps runs; CUDA events on the GPU), with the rate each
// run reaches against its FLOP and byte counts.
#include <cstdio>

#include "CLI/CLI.hpp"
#include "tests/kernels/backend_ops.h"

int main(int argc, char** argv) {
  using namespace oasr::kernels::testing;
  CLI::App app{"oasr-bench-kernels: every op of the backend harness, timed per backend"};
  int reps = 20;
  bool cpu = true;
  std::string filter;
  app.add_option("--reps", reps, "Timed runs per op and backend (the median is printed)")
      ->check(CLI::Range(1, 10000));
  app.add_flag("!--no-cpu", cpu, "Leave out the CPU rows");
  app.add_option("--op", filter, "Only ops of this name");
  CLI11_PARSE(app, argc, argv);
  const std::vector<Backend> backends = AvailableBackends(cpu);
  std::printf("oasr-bench-kernels: %zu backends, median of %d runs\n", backends.size(), reps);
  std::printf("%-16s %-44s %-16s %10s %10s %10s\n", "op", "case", "backend", "ms", "GFLOP/s",
              "GB/s");
  for (const OpCase& c : AllCases()) {
    if (!filter.empty() && c.op != filter) continue;
    for (const Backend& b : backends) {
      absl::StatusOr<double> ms = Time(c, b, reps);
      if (!ms.ok()) {
        std::printf("%-16s %-44s %-16s %s\n", c.op.c_str(), c.name.c_str(), b.name.c_str(),
                    std::string(ms.status().message()).c_str());
        continue;
      }
      std::printf("%-16s %-44s %-16s %10.4f %10.1f %10.1f\n", c.op.c_str(), c.name.c_str(),
                  b.name.c_str(), *ms, c.flops / (*ms * 1e6), c.bytes / (*ms * 1e6));
    }
  }
  return 0;
}
