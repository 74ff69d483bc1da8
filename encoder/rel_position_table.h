// linear_pos(pe) of every layer, per absolute position (spec section 7):
// the position term of attention depends only on a key's absolute position
// and the weights, so it is projected once and shared by every stream,
// whatever its offset. Rows are computed on demand in blocks; positions at
// or beyond `max_positions` are not kept and are projected per call instead
// (ProjectRows), so a stream may run for any length.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "encoder/model_weights.h"

namespace oasr::encoder {

// Row `position` of the sinusoid table (d values, interleaved sin/cos):
// float32 angle = float32(position) * float32 frequency, sin/cos evaluated in
// float64 and rounded, as the PyTorch reference computes it.
void SinusoidRow(int64_t position, int d, float* out);

class RelPositionTable {
 public:
  static constexpr int64_t kBlockRows = 256;

  // `weights` must outlive the table. max_positions is rounded up to whole
  // blocks.
  RelPositionTable(const ConformerWeights* weights, int d, int64_t max_positions);

  // Ensures rows [0, min(end, max_positions())) exist. Thread-safe: may run
  // concurrently with Rows() on rows already ensured.
  void Ensure(int64_t end);

  int64_t max_positions() const { return max_blocks_ * kBlockRows; }

  // Pointer to row `position` (< max_positions, already ensured) of layer
  // `layer`, [d] floats; *contiguous receives how many following rows share
  // that block (row stride d).
  const float* Rows(int layer, int64_t position, int64_t* contiguous) const;

  // Projects rows [start, start + count) for all layers into out
  // ([layers][count][d]) without storing them.
  void ProjectRows(int64_t start, int64_t count, float* out) const;

 private:
  const ConformerWeights* weights_;
  int d_;
  int layers_;
  int64_t max_blocks_;
  std::unique_ptr<std::unique_ptr<float[]>[]> blocks_;  // [max_blocks] of [layers][kBlockRows][d].
  std::atomic<int64_t> ready_blocks_{0};
  std::mutex mutex_;
};

}  // namespace oasr::encoder
