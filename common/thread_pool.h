// A small fork-join pool for CPU compute: ParallelFor splits a loop over
// `threads` threads (the caller plus threads - 1 workers) and returns when
// every index is done.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace oasr {

class ThreadPool {
 public:
  // threads >= 1; 1 runs everything on the caller.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(i) once for each i in [0, n), spread over the threads, and
  // returns when all calls are done. Thread-safe: concurrent ParallelFor
  // calls run one after the other (a nested call runs inline).
  void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn);

 private:
  void WorkerLoop();
  // Runs indices of the current job until none are left; returns how many.
  int64_t Drain(const std::function<void(int64_t)>& fn, int64_t n);

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // One ParallelFor at a time.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
  int64_t finished_ = 0;  // Indices completed in the current job (guarded by mutex_).
  int active_ = 0;        // Workers inside the current job (guarded by mutex_).
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace oasr
