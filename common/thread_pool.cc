#include "common/thread_pool.h"

#include <algorithm>

#include "common/thread_name.h"

namespace oasr {
namespace {

thread_local bool in_parallel_for = false;

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) {
    workers_.emplace_back([this] {
      SetThreadName("oasr-pool");
      WorkerLoop();
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

int64_t ThreadPool::Drain(const std::function<void(int64_t)>& fn, int64_t n) {
  int64_t done = 0;
  for (int64_t i = next_.fetch_add(1); i < n; i = next_.fetch_add(1)) {
    fn(i);
    ++done;
  }
  return done;
}

void ThreadPool::WorkerLoop() {
  in_parallel_for = true;
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t)>* fn = nullptr;
    int64_t n = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (fn_ == nullptr) continue;  // Woke after that job had ended.
      fn = fn_;
      n = n_;
      ++active_;
    }
    const int64_t done = Drain(*fn, n);
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ += done;
    --active_;
    done_.notify_all();
  }
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1 || in_parallel_for) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::lock_guard<std::mutex> call(call_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    finished_ = 0;
    next_.store(0);
    ++generation_;
  }
  // Only as many workers as there are indices beyond the caller's first are
  // woken: a small job on a wide pool does not stir every thread (a worker
  // that wakes anyway finds the job and helps, or finds it gone).
  const int64_t wanted = std::min<int64_t>(n - 1, static_cast<int64_t>(workers_.size()));
  if (wanted == static_cast<int64_t>(workers_.size())) {
    wake_.notify_all();
  } else {
    for (int64_t i = 0; i < wanted; ++i) wake_.notify_one();
  }
  in_parallel_for = true;
  const int64_t done = Drain(fn, n);
  in_parallel_for = false;
  std::unique_lock<std::mutex> lock(mutex_);
  finished_ += done;
  // Wait for every index and for every worker to leave the job, so that no
  // worker touches `fn` after this returns.
  done_.wait(lock, [&] { return finished_ == n_ && active_ == 0; });
  fn_ = nullptr;
}

}  // namespace oasr
