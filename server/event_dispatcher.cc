#include "server/event_dispatcher.h"

#include <algorithm>
#include <chrono>

#include "common/thread_name.h"

namespace oasr::server {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

EventDispatcher::EventDispatcher(int threads,
                                 std::function<void(int64_t wait_ns, int64_t run_ns)> on_run)
    : on_run_(std::move(on_run)) {
  const int n = std::max(1, threads);
  threads_.reserve(n);
  for (int i = 0; i < n; ++i) {
    threads_.emplace_back([this] {
      SetThreadName("oasr-events");
      Work();
    });
  }
}

EventDispatcher::~EventDispatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

int EventDispatcher::DefaultThreads() {
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()) / 4, 2, 4);
}

void EventDispatcher::Post(const std::shared_ptr<Task>& task) {
  // Only the Post that finds the task idle queues it; the others are counted
  // and answered by the run in progress or the one queued.
  if (task->posts_.fetch_add(1, std::memory_order_acq_rel) == 0) Enqueue(task);
}

void EventDispatcher::Enqueue(std::shared_ptr<Task> task) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Task* raw = task.get();
    raw->queued_self_ = std::move(task);
    raw->next_ = nullptr;
    if (on_run_) raw->queued_at_ns_ = NowNs();
    if (tail_ == nullptr) {
      head_ = raw;
    } else {
      tail_->next_ = raw;
    }
    tail_ = raw;
    wake = idle_ > 0;
  }
  if (wake) cv_.notify_one();
}

void EventDispatcher::Work() {
  while (true) {
    std::shared_ptr<Task> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++idle_;
      cv_.wait(lock, [this] { return head_ != nullptr || stopping_; });
      --idle_;
      // Stopping still runs what is queued: a call's last events.
      if (head_ == nullptr) return;
      Task* raw = head_;
      head_ = raw->next_;
      if (head_ == nullptr) tail_ = nullptr;
      raw->next_ = nullptr;
      task = std::move(raw->queued_self_);
    }
    // Every Post counted here happened after its event was queued, so this
    // run sees those events; Posts after the load are answered below.
    const uint64_t answered = task->posts_.load(std::memory_order_acquire);
    if (on_run_) {
      const int64_t started = NowNs();
      task->Run();
      on_run_(started - task->queued_at_ns_, NowNs() - started);
    } else {
      task->Run();
    }
    if (task->posts_.fetch_sub(answered, std::memory_order_acq_rel) != answered) {
      Enqueue(std::move(task));
    }
  }
}

}  // namespace oasr::server
