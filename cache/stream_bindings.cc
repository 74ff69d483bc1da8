#include "cache/stream_bindings.h"

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status.h"

namespace oasr::cache {

StreamBindings::StreamBindings(const char* owner, int max_batch_size, int pad_lanes)
    : owner_(owner),
      max_batch_size_(max_batch_size),
      pad_lanes_(pad_lanes),
      stream_of_slot_(max_batch_size, -1) {
  slot_of_.reserve(max_batch_size);
}

absl::Status StreamBindings::CheckBind(int64_t stream_id, int slot) const {
  if (slot_of_.contains(stream_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat(owner_, ": stream ", stream_id, " is already allocated"));
  }
  if (slot < 0 || slot >= max_batch_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat(owner_, ": slot ", slot, " for stream ", stream_id,
                     slot >= max_batch_size_ && slot < max_batch_size_ + pad_lanes_
                         ? " is a padding lane, never bound to a stream"
                         : " is out of range",
                     " (stream slots are [0, ", max_batch_size_, "))"));
  }
  if (stream_of_slot_[slot] != -1) {
    return absl::FailedPreconditionError(
        absl::StrCat(owner_, ": slot ", slot, " already holds stream ", stream_of_slot_[slot]));
  }
  return absl::OkStatus();
}

void StreamBindings::Bind(int64_t stream_id, int slot) {
  OASR_DCHECK(CheckBind(stream_id, slot).ok());
  stream_of_slot_[slot] = stream_id;
  slot_of_.emplace(stream_id, slot);
}

absl::StatusOr<int> StreamBindings::Find(int64_t stream_id) const {
  const auto it = slot_of_.find(stream_id);
  if (it == slot_of_.end()) {
    return absl::NotFoundError(
        absl::StrCat(owner_, ": stream ", stream_id, " is unknown or freed"));
  }
  return it->second;
}

absl::StatusOr<int> StreamBindings::Unbind(int64_t stream_id) {
  OASR_ASSIGN_OR_RETURN(const int slot, Find(stream_id));
  slot_of_.erase(stream_id);
  stream_of_slot_[slot] = -1;
  return slot;
}

}  // namespace oasr::cache
