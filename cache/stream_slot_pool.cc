#include "cache/stream_slot_pool.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace oasr::cache {

StreamSlotPool::StreamSlotPool(int max_batch_size, int pad_lanes)
    : max_batch_size_(max_batch_size), pad_lanes_(pad_lanes) {
  OASR_CHECK(max_batch_size > 0 && pad_lanes >= 0,
             absl::StrCat("StreamSlotPool(", max_batch_size, ", ", pad_lanes, ")"));
  free_heap_.reserve(max_batch_size);
  // Ascending order is already a valid min-heap.
  for (int s = 0; s < max_batch_size; ++s) free_heap_.push_back(s);
  bound_.assign(max_batch_size, 0);
}

absl::StatusOr<int> StreamSlotPool::Acquire() {
  if (free_heap_.empty()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("StreamSlotPool: all ", max_batch_size_, " stream slots are bound"));
  }
  std::pop_heap(free_heap_.begin(), free_heap_.end(), std::greater<int>());
  const int slot = free_heap_.back();
  free_heap_.pop_back();
  bound_[slot] = 1;
  return slot;
}

absl::Status StreamSlotPool::Release(int slot) {
  if (IsPadLane(slot)) {
    return absl::InvalidArgumentError(
        absl::StrCat("StreamSlotPool: slot ", slot, " is a padding lane, never bound"));
  }
  if (slot < 0 || slot >= max_batch_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("StreamSlotPool: slot ", slot, " is out of range [0, ", max_batch_size_, ")"));
  }
  if (!bound_[slot]) {
    return absl::FailedPreconditionError(
        absl::StrCat("StreamSlotPool: slot ", slot, " is not bound"));
  }
  bound_[slot] = 0;
  free_heap_.push_back(slot);
  std::push_heap(free_heap_.begin(), free_heap_.end(), std::greater<int>());
  return absl::OkStatus();
}

int StreamSlotPool::pad_lane_slot(int i) const {
  OASR_CHECK(i >= 0 && i < pad_lanes_, absl::StrCat("padding lane ", i, " of ", pad_lanes_));
  return max_batch_size_ + i;
}

bool StreamSlotPool::IsBound(int slot) const {
  return slot >= 0 && slot < max_batch_size_ && bound_[slot] != 0;
}

}  // namespace oasr::cache
