#include "scheduler/stream_events.h"

#include <chrono>

namespace oasr::scheduler {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kEndpoint:
      return "endpoint";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

void StreamOutbox::Push(StreamEvent event) {
  event.pushed = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (event.finish.has_value()) finished_ = true;
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
  if (notify_) notify_();
}

bool StreamOutbox::TryPop(StreamEvent* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.empty()) return false;
  *out = std::move(events_.front());
  events_.pop_front();
  return true;
}

bool StreamOutbox::WaitPop(StreamEvent* out, double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                    [this] { return !events_.empty(); })) {
    return false;
  }
  *out = std::move(events_.front());
  events_.pop_front();
  return true;
}

bool StreamOutbox::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

}  // namespace oasr::scheduler
