#include "encoder/paged_kv_history.h"

#include <algorithm>

namespace oasr::encoder {

void PagedKvHistory::AppendSegments(int layer, int head, std::vector<KvSegment>* out) const {
  const PagedKvLayer& pool = layers_[layer];
  const int64_t row_floats = heads_ * d_k_;
  for (int64_t start = 0; start < row_.length; start += pool.block_size) {
    const int64_t block = row_.block_row[start / pool.block_size];
    const int64_t base = block * pool.block_size * row_floats + head * d_k_;
    out->push_back({pool.k + base, pool.v + base, std::min(pool.block_size, row_.length - start),
                    row_floats});
  }
}

}  // namespace oasr::encoder
