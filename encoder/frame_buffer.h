// Feature frames of a stream, [n, dim] values (floats; 16-bit samples for
// PCM rows), numbered from its start: new frames are appended, old ones
// discarded. Discarded frames stay in memory
// until they are at least as many as the kept ones, then one move compacts
// the buffer, so a stream that drops a chunk at a time moves each frame
// O(1) times instead of its whole backlog every chunk.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace oasr::encoder {

// An allocator whose value-initialization leaves floats as they are: Append
// hands out room its caller fills at once, so zeroing it first (a memset
// of every frame, kilobytes a message) would be wasted.
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <typename T>
class BasicFrameBuffer {
 public:
  explicit BasicFrameBuffer(int dim) : dim_(dim) {}

  // Frames appended since the start (including discarded ones).
  int64_t end() const { return base_ + static_cast<int64_t>(data_.size()) / dim_; }
  // The first frame still held.
  int64_t first() const { return first_; }

  // Room for `n` more frames at the end: [n, dim] values to fill (not
  // zeroed: the caller writes every one).
  T* Append(int64_t n) {
    const size_t at = data_.size();
    data_.resize(at + static_cast<size_t>(n) * dim_);
    return data_.data() + at;
  }

  // Copies frames [start, start + count) to out; OUT_OF_RANGE (naming
  // `owner`) when they are not there yet or were discarded.
  absl::Status Get(int64_t start, int64_t count, T* out, const char* owner) const {
    const absl::StatusOr<const T*> held = Held(start, count, owner);
    if (!held.ok()) return held.status();
    std::memcpy(out, *held, static_cast<size_t>(count) * dim_ * sizeof(T));
    return absl::OkStatus();
  }
  // Frames [start, start + count) where they are held (valid until the next
  // Append or DiscardBefore); errors as Get.
  absl::StatusOr<const T*> Held(int64_t start, int64_t count, const char* owner) const {
    if (start < first_ || count < 0 || start + count > end()) {
      return absl::OutOfRangeError(absl::StrCat(owner, ": frames [", start, ", ", start + count,
                                                ") not held (have [", first_, ", ", end(), "))"));
    }
    return data_.data() + (start - base_) * dim_;
  }

  // Forgets frames before `frame` (clamped to what is held).
  void DiscardBefore(int64_t frame) {
    first_ = std::clamp<int64_t>(frame, first_, end());
    const int64_t dropped = first_ - base_;
    if (dropped == 0 || dropped < end() - first_) return;
    data_.erase(data_.begin(), data_.begin() + static_cast<std::ptrdiff_t>(dropped * dim_));
    base_ = first_;
  }

 private:
  int dim_;
  std::vector<T, DefaultInitAllocator<T>> data_;  // [n, dim] from frame base_ on.
  int64_t base_ = 0;                              // The frame data_ starts with.
  int64_t first_ = 0;                             // The first frame not discarded (>= base_).
};

using FrameBuffer = BasicFrameBuffer<float>;

}  // namespace oasr::encoder
