#include "cache/stream_slot_pool.h"

#include <gtest/gtest.h>

#include <set>

namespace oasr::cache {
namespace {

TEST(StreamSlotPoolTest, HandsOutTheLowestFreeSlotFirst) {
  StreamSlotPool pool(4, 1);
  EXPECT_EQ(pool.num_rows(), 5);
  EXPECT_EQ(*pool.Acquire(), 0);
  EXPECT_EQ(*pool.Acquire(), 1);
  EXPECT_EQ(*pool.Acquire(), 2);
  ASSERT_TRUE(pool.Release(1).ok());
  ASSERT_TRUE(pool.Release(0).ok());
  EXPECT_EQ(*pool.Acquire(), 0);
  EXPECT_EQ(*pool.Acquire(), 1);
  EXPECT_EQ(*pool.Acquire(), 3);
  EXPECT_EQ(pool.num_free(), 0);
}

TEST(StreamSlotPoolTest, ExhaustionIsAStatusNamingTheCapacity) {
  StreamSlotPool pool(2, 1);
  ASSERT_TRUE(pool.Acquire().ok());
  ASSERT_TRUE(pool.Acquire().ok());
  const absl::StatusOr<int> none = pool.Acquire();
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(none.status().message().find("all 2 stream slots"), std::string::npos);
}

TEST(StreamSlotPoolTest, ThePaddingLaneIsNeverBound) {
  StreamSlotPool pool(3, 2);
  EXPECT_EQ(pool.pad_lane_slot(0), 3);
  EXPECT_EQ(pool.pad_lane_slot(1), 4);
  EXPECT_TRUE(pool.IsPadLane(3));
  EXPECT_FALSE(pool.IsPadLane(2));
  // Many cycles of acquiring everything never reach a padding lane.
  for (int round = 0; round < 50; ++round) {
    std::set<int> got;
    while (pool.num_free() > 0) got.insert(*pool.Acquire());
    EXPECT_EQ(got, (std::set<int>{0, 1, 2}));
    for (int s : got) ASSERT_TRUE(pool.Release(s).ok());
  }
  EXPECT_EQ(pool.Release(3).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pool.Release(4).message().find("padding lane"), std::string::npos);
}

TEST(StreamSlotPoolTest, ReleaseRejectsUnboundAndOutOfRangeSlots) {
  StreamSlotPool pool(2);
  EXPECT_EQ(pool.Release(0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(pool.Release(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.Release(2).code(), absl::StatusCode::kInvalidArgument);
  const int s = *pool.Acquire();
  EXPECT_TRUE(pool.IsBound(s));
  ASSERT_TRUE(pool.Release(s).ok());
  EXPECT_EQ(pool.Release(s).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(pool.num_free(), 2);
}

}  // namespace
}  // namespace oasr::cache
