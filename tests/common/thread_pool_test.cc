#include "common/thread_pool.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/thread_name.h"
#include "gtest/gtest.h"

namespace oasr {
namespace {

std::string CurrentThreadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

TEST(ThreadNameTest, NamesTheCallingThreadAndShortensLongNames) {
  std::string named, shortened;
  std::thread([&] {
    SetThreadName("oasr-test");
    named = CurrentThreadName();
    SetThreadName("a-name-longer-than-fifteen");
    shortened = CurrentThreadName();
  }).join();
  EXPECT_EQ(named, "oasr-test");
  EXPECT_EQ(shortened, "a-name-longer-t");
}

TEST(ThreadPoolTest, WorkersAreNamed) {
  ThreadPool pool(3);
  std::mutex mu;
  std::set<std::string> names;
  // Enough indices that the workers take some; the caller keeps its name.
  for (int round = 0; round < 20 && names.count("oasr-pool") == 0; ++round) {
    pool.ParallelFor(64, [&](int64_t) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::lock_guard<std::mutex> lock(mu);
      names.insert(CurrentThreadName());
    });
  }
  EXPECT_EQ(names.count("oasr-pool"), 1u);
}

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
