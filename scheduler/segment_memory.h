// What attention rescoring needs of each stream between chunks: the encoder
// output of its current segment (WeNet rescores a segment's n-best over all
// of its frames). One fixed extent per slot, [max_frames, d] float32 on the
// host, allocated once for every slot, so admission has reserved a stream's
// ceiling and nothing grows while it runs.
//
// A slot holds the frames [start, start + frames) of its stream. Chunks are
// appended in order; a chunk that would pass the ceiling starts the slot
// over at that chunk, so a segment longer than max_frames is not held whole
// (it is then not rescored) while the segments after it are. Forget drops a
// finished segment's frames, keeping those of the next one.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace oasr::scheduler {

class SegmentMemory {
 public:
  // RESOURCE_EXHAUSTED when the buffer (slots x max_frames x dim floats)
  // cannot be had; INVALID_ARGUMENT for non-positive sizes.
  static absl::StatusOr<SegmentMemory> Create(int slots, int64_t max_frames, int64_t dim);

  int64_t max_frames() const { return max_frames_; }
  int64_t dim() const { return dim_; }

  // A new stream in `slot`: nothing held, its next frame is 0.
  void Reset(int slot) { extents_[slot] = Extent{}; }

  // Appends `n` frames [frame, frame + n) of `rows` ([n, dim]). A gap (frame
  // past the end held) or the ceiling starts the slot over at `frame`; n
  // above max_frames leaves it empty from frame + n.
  void Append(int slot, int64_t frame, const float* rows, int64_t n);

  // The held frames [begin, end) of `slot`, [end - begin, dim]; nullptr when
  // any of them is not held (or the range is empty).
  const float* Frames(int slot, int64_t begin, int64_t end) const;

  // Drops the frames before `frame` (moving the rest to the front).
  void Forget(int slot, int64_t frame);

 private:
  struct Extent {
    int64_t start = 0;   // Stream frame of row 0.
    int64_t frames = 0;  // Rows held.
  };
  SegmentMemory(int slots, int64_t max_frames, int64_t dim);
  float* Row(int slot, int64_t row) {
    return data_.data() + (static_cast<int64_t>(slot) * max_frames_ + row) * dim_;
  }

  int64_t max_frames_ = 0;
  int64_t dim_ = 0;
  std::vector<float> data_;
  std::vector<Extent> extents_;
};

}  // namespace oasr::scheduler
