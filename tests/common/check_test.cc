#include "common/check.h"

#include <gtest/gtest.h>

namespace oasr {
namespace {

TEST(CheckDeathTest, CheckAbortsWithConditionAndMessage) {
  EXPECT_DEATH(OASR_CHECK(1 + 1 == 3, "arithmetic"), "Check failed: 1 \\+ 1 == 3 \\(arithmetic\\)");
}

TEST(CheckDeathTest, CheckOpPrintsBothValues) {
  const int free_blocks = 2;
  EXPECT_DEATH(OASR_CHECK_GE(free_blocks, 5), "free_blocks >= 5 \\(2 vs 5\\)");
}

TEST(CheckTest, PassingChecksDoNothing) {
  OASR_CHECK(true);
  OASR_CHECK_EQ(4, 4);
  OASR_CHECK_LT(1, 2);
  SUCCEED();
}

}  // namespace
}  // namespace oasr
