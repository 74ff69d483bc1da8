// StreamSlotPool: the fixed slot ids [0, max_batch_size) that address every
// slot-indexed cache row (block-table rows, cache_seqlens, declared states),
// plus padding-lane slots past them that no stream can ever be bound to.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace oasr::cache {

// Hands out the lowest free slot first, so the rows a cohort touches stay a
// short prefix of every slot-indexed table (the device mirror copies only
// that prefix). Allocation-free after construction.
//
// Thread-safety: none; used from the engine's scheduler thread only.
class StreamSlotPool {
 public:
  // `max_batch_size` stream slots [0, max_batch_size) and `pad_lanes` padding
  // slots [max_batch_size, max_batch_size + pad_lanes). Both must be valid
  // (max_batch_size > 0, pad_lanes >= 0); CHECK-fails otherwise, a programming
  // error of the caller's config validation.
  StreamSlotPool(int max_batch_size, int pad_lanes = 0);

  // The lowest free stream slot. RESOURCE_EXHAUSTED naming the capacity when
  // all max_batch_size slots are bound; never returns a padding-lane slot.
  absl::StatusOr<int> Acquire();

  // Returns `slot` to the pool. INVALID_ARGUMENT for a slot out of range or a
  // padding lane, FAILED_PRECONDITION for a slot that is not bound.
  absl::Status Release(int slot);

  int capacity() const { return max_batch_size_; }
  int pad_lanes() const { return pad_lanes_; }
  // Stream slots plus padding lanes: the row count of slot-indexed tables.
  int num_rows() const { return max_batch_size_ + pad_lanes_; }
  int num_free() const { return static_cast<int>(free_heap_.size()); }
  // The slot of padding lane `i` (0 <= i < pad_lanes()).
  int pad_lane_slot(int i = 0) const;
  bool IsPadLane(int slot) const { return slot >= max_batch_size_ && slot < num_rows(); }
  bool IsBound(int slot) const;

 private:
  const int max_batch_size_;
  const int pad_lanes_;
  std::vector<int> free_heap_;  // Min-heap of free slots.
  std::vector<uint8_t> bound_;
};

}  // namespace oasr::cache
