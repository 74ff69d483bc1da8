#include "scheduler/engine_stats.h"

#include <algorithm>

namespace oasr::scheduler {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) { Observe(std::span<const double>(&value, 1)); }

void Histogram::Observe(std::span<const double> values) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const double value : values) {
    ++counts_[std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin()];
    sum_ += value;
  }
  count_ += values.size();
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

EngineStats::EngineStats()
    : chunk_latency_s({0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2, 5}),
      queue_time_s({0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30}),
      batch_size({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096}) {}

}  // namespace oasr::scheduler
