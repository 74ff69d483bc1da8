#include "scheduler/segment_memory.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"

namespace oasr::scheduler {

SegmentMemory::SegmentMemory(int slots, int64_t max_frames, int64_t dim)
    : max_frames_(max_frames), dim_(dim), extents_(static_cast<size_t>(slots)) {}

absl::StatusOr<SegmentMemory> SegmentMemory::Create(int slots, int64_t max_frames, int64_t dim) {
  if (slots < 1 || max_frames < 1 || dim < 1) {
    return absl::InvalidArgumentError(absl::StrCat("segment memory: slots=", slots, ", max_frames=",
                                                   max_frames, ", dim=", dim,
                                                   " (each must be positive)"));
  }
  SegmentMemory m(slots, max_frames, dim);
  try {
    m.data_.resize(static_cast<size_t>(slots) * max_frames * dim);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("segment memory: ", slots, " x ", max_frames, " x ", dim,
                     " floats cannot be allocated"));
  }
  return m;
}

void SegmentMemory::Append(int slot, int64_t frame, const float* rows, int64_t n) {
  Extent& e = extents_[slot];
  if (frame != e.start + e.frames || e.frames + n > max_frames_) {
    e.start = frame;
    e.frames = 0;
  }
  if (n > max_frames_) {
    e.start = frame + n;
    return;
  }
  std::memcpy(Row(slot, e.frames), rows, static_cast<size_t>(n * dim_) * sizeof(float));
  e.frames += n;
}

const float* SegmentMemory::Frames(int slot, int64_t begin, int64_t end) const {
  const Extent& e = extents_[slot];
  if (begin >= end || begin < e.start || end > e.start + e.frames) return nullptr;
  return data_.data() + (static_cast<int64_t>(slot) * max_frames_ + (begin - e.start)) * dim_;
}

void SegmentMemory::Forget(int slot, int64_t frame) {
  Extent& e = extents_[slot];
  const int64_t drop = std::min(std::max<int64_t>(frame - e.start, 0), e.frames);
  if (drop == 0) return;
  const int64_t keep = e.frames - drop;
  if (keep > 0) {
    std::memmove(Row(slot, 0), Row(slot, drop), static_cast<size_t>(keep * dim_) * sizeof(float));
  }
  e.start += drop;
  e.frames = keep;
}

}  // namespace oasr::scheduler
