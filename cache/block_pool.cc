#include "cache/block_pool.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace oasr::cache {

absl::StatusOr<std::unique_ptr<BlockPool>> BlockPool::Create(const CacheConfig& config,
                                                             int scratch_blocks) {
  OASR_RETURN_IF_ERROR(config.Validate());
  if (config.max_num_blocks <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BlockPool: CacheConfig.max_num_blocks = ", config.max_num_blocks,
                     " is unresolved; build the config with ResolveCacheConfig"));
  }
  if (scratch_blocks < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BlockPool: scratch_blocks = ", scratch_blocks, ": must be >= 0"));
  }
  const Shape shape{config.num_layers, config.max_num_blocks + scratch_blocks,
                    config.block_size_frames, config.n_kv_head, config.head_dim};
  // Zeroed so that no block ever holds a non-finite bit pattern: attention
  // multiplies past-the-length columns by a zero weight, and 0 * NaN is NaN.
  OASR_ASSIGN_OR_RETURN(Tensor k, Tensor::Zeros(shape, config.dtype, config.device));
  OASR_ASSIGN_OR_RETURN(Tensor v, Tensor::Zeros(shape, config.dtype, config.device));
  return std::unique_ptr<BlockPool>(
      new BlockPool(config, scratch_blocks, std::move(k), std::move(v)));
}

BlockPool::BlockPool(const CacheConfig& config, int scratch_blocks, Tensor k, Tensor v)
    : config_(config),
      scratch_blocks_(scratch_blocks),
      k_(std::move(k)),
      v_(std::move(v)),
      ring_(static_cast<size_t>(config.max_num_blocks)),
      free_count_(config.max_num_blocks),
      allocated_(static_cast<size_t>(config.max_num_blocks), 0) {
  for (int64_t i = 0; i < config.max_num_blocks; ++i) ring_[i] = static_cast<int32_t>(i);
}

absl::Status BlockPool::Allocate(std::span<int32_t> out) {
  const int64_t n = static_cast<int64_t>(out.size());
  std::lock_guard<std::mutex> lock(mu_);
  if (n > free_count_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "BlockPool exhausted: requested ", n, " blocks, ", free_count_, " free of ", num_blocks()));
  }
  const int64_t capacity = num_blocks();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = ring_[head_];
    head_ = head_ + 1 == capacity ? 0 : head_ + 1;
    allocated_[id] = 1;
    out[i] = id;
  }
  free_count_ -= n;
  return absl::OkStatus();
}

absl::Status BlockPool::Free(std::span<const int32_t> ids) {
  std::lock_guard<std::mutex> lock(mu_);
  // Plan: check every id (clearing its flag so a repeat within `ids` is seen
  // as a double free), and restore the flags if any is bad.
  absl::Status status;
  size_t checked = 0;
  for (; checked < ids.size(); ++checked) {
    const int32_t id = ids[checked];
    if (id < 0 || id >= num_physical_blocks()) {
      status = absl::InvalidArgumentError(
          absl::StrCat("BlockPool::Free: block ", id, " is out of range [0, ", num_blocks(), ")"));
      break;
    }
    if (IsScratchBlock(id)) {
      status = absl::InvalidArgumentError(
          absl::StrCat("BlockPool::Free: block ", id, " is a scratch block and never allocated"));
      break;
    }
    if (!allocated_[id]) {
      status = absl::FailedPreconditionError(
          absl::StrCat("BlockPool::Free: block ", id, " is not allocated (double free)"));
      break;
    }
    allocated_[id] = 0;
  }
  if (!status.ok()) {
    for (size_t i = 0; i < checked; ++i) allocated_[ids[i]] = 1;
    return status;
  }
  // Commit: append to the tail of the ring.
  const int64_t capacity = num_blocks();
  int64_t tail = (head_ + free_count_) % capacity;
  for (const int32_t id : ids) {
    ring_[tail] = id;
    tail = tail + 1 == capacity ? 0 : tail + 1;
  }
  free_count_ += static_cast<int64_t>(ids.size());
  return absl::OkStatus();
}

int64_t BlockPool::num_free_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return free_count_;
}

int32_t BlockPool::scratch_block(int i) const {
  OASR_CHECK(i >= 0 && i < scratch_blocks_,
             absl::StrCat("scratch block ", i, " of ", scratch_blocks_));
  return static_cast<int32_t>(num_blocks() + i);
}

bool BlockPool::IsScratchBlock(int32_t id) const {
  return id >= num_blocks() && id < num_physical_blocks();
}

bool BlockPool::IsAllocated(int32_t id) const {
  if (id < 0 || id >= num_blocks()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return allocated_[id] != 0;
}

KvView BlockPool::GetKvView(int layer) const {
  return {k_.view().Select(layer), v_.view().Select(layer)};
}

KvView BlockPool::GetKvBlockView(int layer, int32_t block) const {
  return {k_.view().Select(layer).Select(block), v_.view().Select(layer).Select(block)};
}

}  // namespace oasr::cache
