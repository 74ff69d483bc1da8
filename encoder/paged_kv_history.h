// The encoder's own description of a paged K/V pool (flash-attention's
// contract: a block table row per stream plus a page size), and the
// AttentionHistory that reads one stream's retained keys straight from it.
// Plain pointers, so that the encoder needs nothing from cache/: the caller
// (scheduler/conformer_streaming_model.cc) translates the cache managers'
// views into these.
#pragma once

#include <cstdint>
#include <vector>

#include "encoder/rel_pos_attention.h"

namespace oasr::encoder {

// One layer's K and V pools, float32 on the CPU, each laid out
// [num_blocks, block_size, heads, d_k] (a row of d = heads * d_k floats per
// frame). Non-owning.
struct PagedKvLayer {
  float* k = nullptr;
  float* v = nullptr;
  int64_t num_blocks = 0;  // Physical blocks in the pool (bounds the table entries).
  int64_t block_size = 0;  // Frames per block.
};

// One stream's place in the pool: history position p (0 = oldest retained
// frame) lives in block block_row[p / block_size] at row p % block_size. The
// same row serves every layer. Non-owning.
struct PagedKvRow {
  const int32_t* block_row = nullptr;
  int64_t length = 0;  // Retained frames (the cache length, t1).
};

// AttentionHistory over one stream's paged row. `layers` must outlive this
// object and hold one entry per encoder layer.
class PagedKvHistory final : public AttentionHistory {
 public:
  PagedKvHistory(const PagedKvLayer* layers, PagedKvRow row, int heads, int64_t d_k)
      : layers_(layers), row_(row), heads_(heads), d_k_(d_k) {}

  int64_t length() const override { return row_.length; }
  // One segment per block, oldest first; the last may be partly filled.
  void AppendSegments(int layer, int head, std::vector<KvSegment>* out) const override;

 private:
  const PagedKvLayer* layers_;
  PagedKvRow row_;
  int heads_;
  int64_t d_k_;
};

}  // namespace oasr::encoder
