// StreamBindings: which stream id holds which slot, for a manager whose state
// is slot-addressed. One implementation of the id and slot checks every such
// manager makes (duplicate id, padding lane, slot in use, unknown id).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace oasr::cache {

// Thread-safety: none. Binding may allocate (the id map) -- admission, not
// the step; lookups never do.
class StreamBindings {
 public:
  // `owner` prefixes error messages (a string literal: it is not copied).
  // Stream slots are [0, max_batch_size); [max_batch_size, + pad_lanes) are
  // padding lanes that no stream may hold.
  StreamBindings(const char* owner, int max_batch_size, int pad_lanes);

  // Whether `stream_id` may take `slot`: ALREADY_EXISTS for a live id;
  // INVALID_ARGUMENT for a padding lane or a slot out of range;
  // FAILED_PRECONDITION when another stream holds the slot.
  absl::Status CheckBind(int64_t stream_id, int slot) const;
  // Records the binding; CheckBind must have passed.
  void Bind(int64_t stream_id, int slot);
  // The slot of a live stream; NOT_FOUND naming the id.
  absl::StatusOr<int> Find(int64_t stream_id) const;
  // Removes a live stream's binding, returning its slot; NOT_FOUND naming it.
  absl::StatusOr<int> Unbind(int64_t stream_id);

  int size() const { return static_cast<int>(slot_of_.size()); }

 private:
  const char* owner_;
  const int max_batch_size_;
  const int pad_lanes_;
  absl::flat_hash_map<int64_t, int> slot_of_;
  std::vector<int64_t> stream_of_slot_;  // -1: free.
};

}  // namespace oasr::cache
