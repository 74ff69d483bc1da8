// The backend-op harness (in the manner of llama.cpp's test-backend-ops): one
// table of op cases -- shapes with odd sizes, batch 1 and large batches,
// histories of 0, 1 and many blocks -- each run on every backend present and
// checked against a float64 reference computed here from the op's maths, not
// from the implementation under test.
//
// Tolerances: float32 backends (the CPU, CUDA float32) within a per-op
// relative error of the reference (1e-5 unless the case says otherwise);
// 16-bit backends within twice the error of a plain reference in that dtype
// (the float64 result rounded to it, on inputs rounded to it), the
// flash-attention rule. Every output is poisoned (NaN) before the op runs, so
// an unwritten element fails.
//
// The same table, timed, is oasr-bench-kernels (backend_ops_bench.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/execution_context.h"

namespace oasr::kernels::testing {

// A backend to run on: a context and the dtype its ops store in.
struct Backend {
  std::string name;  // "cpu", "cuda:float32", ...
  ExecutionContext* ctx = nullptr;
  DType dtype = DType::kFloat32;
};

// Named host tensors as floats (inputs and outputs alike).
using Values = std::map<std::string, std::vector<float>>;
using Reference = std::map<std::string, std::vector<double>>;

// One op made ready on a backend: inputs uploaded, outputs allocated.
class OpInstance {
 public:
  virtual ~OpInstance() = default;
  // Fills every output with NaN (device or host).
  virtual absl::Status Poison() = 0;
  // Runs the op once (asynchronous on CUDA). With restore_inputs, ops that
  // update a buffer in place first get their original input back (a check
  // after Poison); without, the op just runs again (the perf mode).
  virtual absl::Status Run(bool restore_inputs = true) = 0;
  // Waits, and reads every output back as floats.
  virtual absl::StatusOr<Values> Read() = 0;
};

struct OpCase {
  std::string op;    // "linear", "paged_attention", ...
  std::string name;  // The shape, for messages.
  // Inputs drawn from `seed`; `low` names the inputs stored in the backend's
  // dtype (the rest stay float32 on every backend).
  std::function<Values(uint64_t seed)> inputs;
  std::vector<std::string> low;
  std::function<absl::StatusOr<std::unique_ptr<OpInstance>>(const Backend&, const Values&)> make;
  std::function<Reference(const Values&)> reference;
  double fp32_tolerance = 1e-5;  // Relative to the reference's largest magnitude.
  // 16-bit backends: added to their bound, relative likewise (ops that round
  // intermediates to the dtype).
  double low_tolerance = 0;
  bool cuda_only = false;  // A fusion only the CUDA backend has.
  // Optional: the backends the op runs on (the rest skip the case).
  std::function<bool(const Backend&)> supported;
  double flops = 0;  // Per run, for the perf mode.
  double bytes = 0;  // Fewest bytes a run moves, for the perf mode.
};

// The whole table.
std::vector<OpCase> AllCases();

// The backends present: the CPU, and CUDA in float32, bfloat16 and float16
// when a GPU is usable. The contexts live as long as the process.
std::vector<Backend> AvailableBackends(bool include_cpu = true);

// Runs `c` on `b` with fresh inputs from `seed` and checks it; OK or a
// message naming the output, element, got, want and the bound.
absl::Status Check(const OpCase& c, const Backend& b, uint64_t seed);

// Median milliseconds of one run of `c` on `b` (warm-up first; CUDA events
// on the backend's stream, the wall clock on the CPU).
absl::StatusOr<double> Time(const OpCase& c, const Backend& b, int reps);

}  // namespace oasr::kernels::testing
