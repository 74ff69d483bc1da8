// linear_pos(pe) of every layer, per absolute position (spec section 7), on
// the CPU: the position term of attention depends only on a key's absolute
// position and the weights, so it is projected once and shared by every
// stream, whatever its offset. The table is one address range [layers,
// max_positions, d] reserved up front and committed as rows are filled, in
// blocks, on demand; positions at or beyond max_positions are projected by
// the attention op itself (kernels/rel_pos_attention.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "encoder/model_weights.h"

namespace oasr::encoder {

class RelPositionTable {
 public:
  static constexpr int64_t kBlockRows = 256;
  // `weights` must outlive the table. max_positions is rounded up to whole
  // blocks. CHECK-fails when the address range cannot be reserved.
  RelPositionTable(const ConformerWeights* weights, int d, int64_t max_positions);
  ~RelPositionTable();
  RelPositionTable(const RelPositionTable&) = delete;
  RelPositionTable& operator=(const RelPositionTable&) = delete;

  // Ensures rows [0, min(end, max_positions())) exist. Thread-safe: may run
  // concurrently with reads of rows already ensured.
  void Ensure(int64_t end);
  int64_t max_positions() const { return max_blocks_ * kBlockRows; }
  // Layer `layer`'s rows, [max_positions, d] floats (those ensured are valid).
  const float* layer(int layer) const { return data_ + layer * max_positions() * d_; }

 private:
  const ConformerWeights* weights_;
  int d_;
  int layers_;
  int64_t max_blocks_;
  float* data_ = nullptr;
  size_t bytes_ = 0;
  std::atomic<int64_t> ready_blocks_{0};
  std::mutex mutex_;
};

}  // namespace oasr::encoder
