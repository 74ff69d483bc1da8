// The event dispatcher: every Post is answered by a run that starts after
// it, a task never runs on two threads at once, a burst of Posts while it
// runs costs one more run, a slow task holds one thread only, the dispatcher
// keeps a queued task alive, and destroying it runs what is queued.
#include "server/event_dispatcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace oasr::server {
namespace {

using namespace std::chrono_literals;

// A task with an outbox of numbered items: Run takes everything queued and
// records the concurrency it saw. Optionally its first run waits on a latch.
class CountingTask : public EventDispatcher::Task {
 public:
  void Push(int64_t item) {
    std::lock_guard<std::mutex> lock(mu_);
    queued_.push_back(item);
  }
  // The first run waits until Release() (bounded, so a bug cannot hang).
  void HoldFirstRun() { hold_ = true; }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool WaitRunning(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return running_; });
  }
  // Waits until `n` items were handled; false on timeout.
  bool WaitHandled(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return handled_.size() >= n; });
  }
  std::vector<int64_t> handled() {
    std::lock_guard<std::mutex> lock(mu_);
    return handled_;
  }
  int runs() const { return runs_.load(); }
  int max_concurrent() const { return max_concurrent_.load(); }

 protected:
  void Run() override {
    const int now = concurrent_.fetch_add(1) + 1;
    if (now > max_concurrent_.load()) max_concurrent_ = now;
    const int run = runs_.fetch_add(1);
    std::unique_lock<std::mutex> lock(mu_);
    running_ = true;
    cv_.notify_all();
    if (run == 0 && hold_) cv_.wait_for(lock, 10s, [this] { return released_; });
    for (int64_t item : queued_) handled_.push_back(item);
    queued_.clear();
    cv_.notify_all();
    lock.unlock();
    concurrent_.fetch_sub(1);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int64_t> queued_;
  std::vector<int64_t> handled_;
  bool hold_ = false;
  bool released_ = false;
  bool running_ = false;
  std::atomic<int> runs_{0};
  std::atomic<int> concurrent_{0};
  std::atomic<int> max_concurrent_{0};
};

TEST(EventDispatcherTest, DefaultSizeIsBetweenTwoAndFour) {
  EXPECT_GE(EventDispatcher::DefaultThreads(), 2);
  EXPECT_LE(EventDispatcher::DefaultThreads(), 4);
  EventDispatcher dispatcher(0);
  EXPECT_EQ(dispatcher.threads(), 1) << "at least one thread";
}

TEST(EventDispatcherTest, EveryPostIsAnsweredAndATaskRunsOnOneThreadAtATime) {
  EventDispatcher dispatcher(4);
  auto task = std::make_shared<CountingTask>();
  constexpr int kPosters = 4;
  constexpr int kPerPoster = 2000;
  std::vector<std::thread> posters;
  for (int p = 0; p < kPosters; ++p) {
    posters.emplace_back([&, p] {
      for (int i = 0; i < kPerPoster; ++i) {
        task->Push(int64_t{p} * kPerPoster + i);
        dispatcher.Post(task);
      }
    });
  }
  for (std::thread& t : posters) t.join();
  ASSERT_TRUE(task->WaitHandled(kPosters * kPerPoster, 30s));
  std::vector<int64_t> handled = task->handled();
  std::sort(handled.begin(), handled.end());
  ASSERT_EQ(handled.size(), size_t{kPosters * kPerPoster});
  for (size_t i = 0; i < handled.size(); ++i) ASSERT_EQ(handled[i], static_cast<int64_t>(i));
  EXPECT_EQ(task->max_concurrent(), 1);
  EXPECT_LE(task->runs(), kPosters * kPerPoster) << "never more runs than posts";
}

TEST(EventDispatcherTest, PostsWhileItRunsCostOneMoreRun) {
  EventDispatcher dispatcher(2);
  auto task = std::make_shared<CountingTask>();
  task->HoldFirstRun();
  dispatcher.Post(task);
  ASSERT_TRUE(task->WaitRunning(10s));
  for (int i = 0; i < 100; ++i) {
    task->Push(i);
    dispatcher.Post(task);
  }
  task->Release();
  ASSERT_TRUE(task->WaitHandled(100, 10s));
  // Give a wrong extra run the chance to happen before counting.
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(task->runs(), 2);
  EXPECT_EQ(task->max_concurrent(), 1);
}

TEST(EventDispatcherTest, ASlowTaskHoldsOneThreadOnly) {
  EventDispatcher dispatcher(2);
  auto slow = std::make_shared<CountingTask>();
  slow->HoldFirstRun();
  dispatcher.Post(slow);
  ASSERT_TRUE(slow->WaitRunning(10s));
  // The slow task keeps being posted (its stream keeps producing events)...
  auto other = std::make_shared<CountingTask>();
  for (int i = 0; i < 50; ++i) {
    slow->Push(i);
    dispatcher.Post(slow);
    other->Push(i);
    dispatcher.Post(other);
    // ...and the other task is served meanwhile, every time.
    ASSERT_TRUE(other->WaitHandled(i + 1, 10s)) << i;
  }
  EXPECT_EQ(slow->runs(), 1);
  slow->Release();
  EXPECT_TRUE(slow->WaitHandled(50, 10s));
}

TEST(EventDispatcherTest, KeepsAQueuedTaskAliveUntilItRan) {
  std::weak_ptr<CountingTask> weak;
  {
    EventDispatcher dispatcher(1);
    auto blocker = std::make_shared<CountingTask>();
    blocker->HoldFirstRun();
    dispatcher.Post(blocker);
    ASSERT_TRUE(blocker->WaitRunning(10s));
    {
      auto task = std::make_shared<CountingTask>();
      task->Push(7);
      weak = task;
      dispatcher.Post(task);
    }
    EXPECT_FALSE(weak.expired()) << "queued behind the blocker, held by the dispatcher";
    blocker->Release();
    for (int i = 0; i < 1000 && !weak.expired(); ++i) std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(weak.expired()) << "released once it ran";
  }
}

TEST(EventDispatcherTest, DestructionRunsWhatIsQueued) {
  auto blocker = std::make_shared<CountingTask>();
  std::vector<std::shared_ptr<CountingTask>> tasks;
  {
    EventDispatcher dispatcher(1);
    blocker->HoldFirstRun();
    dispatcher.Post(blocker);
    ASSERT_TRUE(blocker->WaitRunning(10s));
    for (int i = 0; i < 10; ++i) {
      tasks.push_back(std::make_shared<CountingTask>());
      tasks.back()->Push(i);
      dispatcher.Post(tasks.back());
    }
    blocker->Release();
  }
  for (const auto& task : tasks) EXPECT_EQ(task->handled().size(), 1u);
}

// The timing hook sees every run: how long the task waited queued (here
// behind a held run on the only thread) and how long it ran.
TEST(EventDispatcherTest, TimingHookSeesEachRunsWaitAndLength) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> timings;
  auto slow = std::make_shared<CountingTask>();
  auto queued = std::make_shared<CountingTask>();
  {
    EventDispatcher dispatcher(1, [&](int64_t wait_ns, int64_t run_ns) {
      std::lock_guard<std::mutex> lock(mu);
      timings.emplace_back(wait_ns, run_ns);
    });
    slow->HoldFirstRun();
    slow->Push(1);
    dispatcher.Post(slow);
    ASSERT_TRUE(slow->WaitRunning(10s));
    queued->Push(2);
    dispatcher.Post(queued);  // Waits behind the held run.
    std::this_thread::sleep_for(50ms);
    slow->Release();
    ASSERT_TRUE(queued->WaitHandled(1, 10s));
  }
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(timings.size(), 2u);
  EXPECT_GE(timings[0].second, 50'000'000) << "the held run lasted the hold";
  EXPECT_GE(timings[1].first, 50'000'000) << "the queued task waited for it";
  for (const auto& [wait, run] : timings) {
    EXPECT_GE(wait, 0);
    EXPECT_GE(run, 0);
  }
}

}  // namespace
}  // namespace oasr::server
