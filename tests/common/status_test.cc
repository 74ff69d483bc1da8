#include "common/status.h"

#include <gtest/gtest.h>

namespace oasr {
namespace {

absl::Status FailIf(bool fail) {
  return fail ? absl::InvalidArgumentError("asked to fail") : absl::OkStatus();
}

absl::Status Chain(bool fail, int* reached) {
  OASR_RETURN_IF_ERROR(FailIf(fail));
  *reached = 1;
  return absl::OkStatus();
}

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  OASR_ASSIGN_OR_RETURN(int half, Half(x));
  OASR_ASSIGN_OR_RETURN(half, Half(half));
  return half;
}

TEST(StatusTest, ReturnIfErrorStopsOnError) {
  int reached = 0;
  EXPECT_EQ(Chain(true, &reached).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reached, 0);
  EXPECT_TRUE(Chain(false, &reached).ok());
  EXPECT_EQ(reached, 1);
}

TEST(StatusTest, AssignOrReturnPropagatesAndAssigns) {
  EXPECT_EQ(*Quarter(12), 3);
  EXPECT_EQ(Quarter(6).status().message(), "odd");
  EXPECT_EQ(Quarter(7).status().message(), "odd");
}

}  // namespace
}  // namespace oasr
