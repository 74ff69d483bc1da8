// BlockPool: the one owner of the preallocated paged K/V storage and of the
// free list of physical block ids that every stream's block table points into.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/cache_config.h"
#include "common/tensor.h"

namespace oasr::cache {

// K and V views of the same layer (and block).
struct KvView {
  TensorView k;
  TensorView v;
};

// Two tensors K and V of shape
//   (num_layers, max_num_blocks + scratch_blocks, block_size_frames, n_kv_head, head_dim)
// in config.dtype on config.device, allocated and zeroed once at creation,
// plus a FIFO free list of the block ids [0, max_num_blocks). Scratch blocks
// (ids max_num_blocks + i) are storage for the padding lane: never on the
// free list, never allocatable, and Free rejects them.
//
// Allocation is all-or-nothing and never allocates on the heap: the free list
// is a ring of fixed capacity. Thread-safety: Allocate, Free and the counters
// are safe to call from any thread (one mutex); the views are immutable.
class BlockPool {
 public:
  // Builds the pool for a resolved config (max_num_blocks > 0; see
  // ResolveCacheConfig). INVALID_ARGUMENT for an invalid or unresolved config
  // or negative scratch_blocks; RESOURCE_EXHAUSTED when the memory cannot be
  // had (nothing is kept).
  static absl::StatusOr<std::unique_ptr<BlockPool>> Create(const CacheConfig& config,
                                                           int scratch_blocks = 0);

  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // Takes out.size() blocks off the free list into `out`, oldest-freed first.
  // RESOURCE_EXHAUSTED naming the requested and free counts when fewer are
  // free; then nothing changes. Allocating zero blocks succeeds.
  absl::Status Allocate(std::span<int32_t> out);

  // Returns `ids` to the free list. Every id is checked before any is freed:
  // INVALID_ARGUMENT for an id out of range or a scratch block,
  // FAILED_PRECONDITION for an id that is not allocated (a double free, also
  // within `ids`); on error nothing changes.
  absl::Status Free(std::span<const int32_t> ids);

  int64_t num_free_blocks() const;
  // Allocatable blocks: config.max_num_blocks.
  int64_t num_blocks() const { return config_.max_num_blocks; }
  int num_scratch_blocks() const { return scratch_blocks_; }
  // Blocks in the tensors: num_blocks() + num_scratch_blocks().
  int64_t num_physical_blocks() const { return num_blocks() + scratch_blocks_; }
  // The id of scratch block `i` (0 <= i < num_scratch_blocks()).
  int32_t scratch_block(int i = 0) const;
  bool IsScratchBlock(int32_t id) const;
  // Whether `id` is currently handed out. For invariant checks.
  bool IsAllocated(int32_t id) const;

  const CacheConfig& config() const { return config_; }
  // The whole K or V pool, shape above.
  TensorView k_pool() const { return k_.view(); }
  TensorView v_pool() const { return v_.view(); }
  // K and V of `layer`: (num_physical_blocks, block_size_frames, n_kv_head, head_dim).
  KvView GetKvView(int layer) const;
  // K and V of one block of `layer`: (block_size_frames, n_kv_head, head_dim).
  KvView GetKvBlockView(int layer, int32_t block) const;
  // Bytes of one block over all layers, K and V: config().bytes_per_kv_block().
  size_t bytes_per_kv_block() const { return config_.bytes_per_kv_block(); }

 private:
  BlockPool(const CacheConfig& config, int scratch_blocks, Tensor k, Tensor v);

  const CacheConfig config_;
  const int scratch_blocks_;
  Tensor k_;
  Tensor v_;

  mutable std::mutex mu_;
  std::vector<int32_t> ring_;  // Free ids; capacity num_blocks, never grows.
  int64_t head_ = 0;           // Index of the oldest free id in ring_.
  int64_t free_count_ = 0;
  std::vector<uint8_t> allocated_;  // Per id: 1 while handed out.
};

}  // namespace oasr::cache
