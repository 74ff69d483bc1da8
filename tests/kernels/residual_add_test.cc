#include <gtest/gtest.h>

#include <vector>

#include "kernels/residual_add.h"

namespace oasr::kernels {
namespace {

TEST(ResidualAddCpuTest, AddsScaledInput) {
  std::vector<float> y = {1, 2, 3, 4};
  const std::vector<float> x = {10, 20, 30, 40};
  ResidualAddCpu({y.data(), x.data(), 0.5f, 4});
  EXPECT_EQ(y, (std::vector<float>{6, 12, 18, 24}));
}

}  // namespace
}  // namespace oasr::kernels
