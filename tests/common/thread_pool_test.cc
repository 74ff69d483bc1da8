#include "common/thread_pool.h"

#include <atomic>
#include <vector>

#include "gtest/gtest.h"

namespace oasr {
namespace {

TEST(ThreadPoolTest, RunsEveryIndexOnce) {
  ThreadPool pool(3);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::atomic<int>> hits(97);
    pool.ParallelFor(97, [&](int64_t i) { hits[i].fetch_add(1); });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
  // Nested calls run inline instead of deadlocking.
  std::atomic<int> total{0};
  pool.ParallelFor(4, [&](int64_t) { pool.ParallelFor(5, [&](int64_t) { total.fetch_add(1); }); });
  EXPECT_EQ(total.load(), 20);
}

TEST(ThreadPoolTest, JobsSmallerThanThePoolRunEveryIndexOnce) {
  // Fewer indices than workers: only some are woken, and the ones left
  // asleep still join the next, wider job.
  ThreadPool pool(8);
  for (int round = 0; round < 200; ++round) {
    const int n = 1 + round % 11;
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, [&](int64_t i) { hits[i].fetch_add(1); });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "round " << round;
  }
}

}  // namespace
}  // namespace oasr
