// Every op of the backend harness on every backend this binary covers, against
// the float64 reference (tests/kernels/backend_ops.h). Built twice: the CPU
// rows (label unit, run in CI) and the CUDA rows in float32, bfloat16 and
// float16 (label gpu; skipped without a GPU).
#include "tests/kernels/backend_ops.h"

#include <gtest/gtest.h>

#include <string>

namespace oasr::kernels::testing {
namespace {

class BackendOpsTest : public ::testing::TestWithParam<size_t> {};

std::vector<Backend> Backends() {
#if OASR_BACKEND_ROWS_CUDA
  return AvailableBackends(/*include_cpu=*/false);
#else
  std::vector<Backend> all = AvailableBackends(/*include_cpu=*/true);
  return {all.front()};
#endif
}

TEST_P(BackendOpsTest, MatchesFloat64Reference) {
  static const std::vector<OpCase> cases = AllCases();
  static const std::vector<Backend> backends = Backends();
  if (backends.empty()) GTEST_SKIP() << "no CUDA device";
  const OpCase& c = cases.at(GetParam());
  for (const Backend& b : backends) {
    // Two draws: the op computes the same function on any input.
    for (uint64_t seed : {11u, 12u}) {
      const absl::Status status = Check(c, b, seed);
      EXPECT_TRUE(status.ok()) << status.message();
    }
  }
}

std::string CaseName(const ::testing::TestParamInfo<size_t>& info) {
  static const std::vector<OpCase> cases = AllCases();
  std::string name = cases[info.param].op + "_" + std::to_string(info.param);
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Ops, BackendOpsTest, ::testing::Range<size_t>(0, AllCases().size()),
                         CaseName);

}  // namespace
}  // namespace oasr::kernels::testing
