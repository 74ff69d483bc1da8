#include "cache/cache_config.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace oasr::cache {

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

absl::Status RequirePositive(const char* field, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("CacheConfig.", field, " = ", value, ": must be positive (limit > 0)"));
}

}  // namespace

absl::Status CacheConfig::Validate() const {
  struct Field {
    const char* name;
    int64_t value;
  };
  const Field positive[] = {
      {"num_layers", num_layers},
      {"n_kv_head", n_kv_head},
      {"head_dim", head_dim},
      {"hidden_dim", hidden_dim},
      {"kernel_size", kernel_size},
      {"chunk_size", chunk_size},
      {"block_size_frames", block_size_frames},
      {"max_blocks_per_seq", max_blocks_per_seq},
      {"max_batch_size", max_batch_size},
      {"encoder_frame_ms", encoder_frame_ms},
      {"host_pool_budget_bytes", host_pool_budget_bytes},
  };
  for (const Field& f : positive) {
    if (absl::Status s = RequirePositive(f.name, f.value); !s.ok()) return s;
  }
  if (num_left_chunks < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CacheConfig.num_left_chunks = ", num_left_chunks, ": must be -1 (unlimited) or >= 0"));
  }
  if (max_num_blocks < 0) {
    return absl::InvalidArgumentError(absl::StrCat("CacheConfig.max_num_blocks = ", max_num_blocks,
                                                   ": must be >= 0 (0 derives it from memory)"));
  }
  // Block ids are int32 and the scratch blocks sit past max_num_blocks.
  constexpr int64_t kMaxBlocks = std::numeric_limits<int32_t>::max() / 2;
  if (max_num_blocks > kMaxBlocks) {
    return absl::InvalidArgumentError(absl::StrCat("CacheConfig.max_num_blocks = ", max_num_blocks,
                                                   ": above the int32 block-id limit ",
                                                   kMaxBlocks));
  }
  if (!(pool_memory_fraction > 0.0 && pool_memory_fraction <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CacheConfig.pool_memory_fraction = ", pool_memory_fraction, ": must be in (0, 1]"));
  }
  if (chunk_size > block_size_frames) {
    // One block receives at most one chunk's frames in a step; a wider chunk
    // would spill into the block the next chunk reads as its own page.
    return absl::InvalidArgumentError(
        absl::StrCat("CacheConfig.chunk_size = ", chunk_size,
                     ": must not exceed block_size_frames = ", block_size_frames));
  }
  if (blocks_per_stream() > std::numeric_limits<int32_t>::max() / block_size_frames) {
    return absl::InvalidArgumentError(
        absl::StrCat("CacheConfig: a stream could hold ", blocks_per_stream(), " blocks of ",
                     block_size_frames, " frames, past the int32 cache_seqlens limit"));
  }
  if (eviction_enabled() && max_blocks_per_seq < blocks_per_stream()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CacheConfig.max_blocks_per_seq = ", max_blocks_per_seq,
        ": the block table cannot address the history num_left_chunks = ", num_left_chunks,
        " keeps (max_logical_blocks = ", max_logical_blocks(), ", ", blocks_per_stream(),
        " blocks with a partly filled tail and the chunk in flight)"));
  }
  if (max_num_blocks > 0 && max_num_blocks < min_pool_blocks()) {
    if (eviction_enabled()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CacheConfig.max_num_blocks = ", max_num_blocks, ": below ", min_pool_blocks(),
          " = max_batch_size ", max_batch_size, " x blocks_per_stream ", blocks_per_stream(),
          ", so concurrent streams could exhaust the pool"));
    }
    return absl::InvalidArgumentError(absl::StrCat("CacheConfig.max_num_blocks = ", max_num_blocks,
                                                   ": below max_batch_size = ", max_batch_size,
                                                   ", not one block per stream"));
  }
  if (prefill_kv_window) {
    if (num_left_chunks <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CacheConfig.prefill_kv_window needs a window: num_left_chunks = ", num_left_chunks,
          " (limit >= 1)"));
    }
    // Only then does every stream report exactly the same cache length
    // after every full chunk, which is what prefilling is for.
    if (chunk_size != block_size_frames) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CacheConfig.prefill_kv_window needs chunk_size == block_size_frames, got chunk_size = ",
          chunk_size, ", block_size_frames = ", block_size_frames));
    }
  }
  return absl::OkStatus();
}

int64_t CacheConfig::retained_frames() const {
  return eviction_enabled() ? int64_t{chunk_size} * num_left_chunks : -1;
}

int64_t CacheConfig::max_logical_blocks() const {
  return eviction_enabled() ? CeilDiv(retained_frames(), block_size_frames) : -1;
}

int64_t CacheConfig::blocks_per_stream() const {
  if (eviction_enabled()) {
    // The retained window and the chunk in flight, plus a partly filled
    // block when a chunk may start mid-block.
    const bool aligned = full_chunks && chunk_size == block_size_frames;
    return CeilDiv(retained_frames() + (aligned ? 0 : block_size_frames - 1) + chunk_size,
                   block_size_frames);
  }
  if (max_batch_size <= 0) return 0;
  return std::min<int64_t>(max_blocks_per_seq, max_num_blocks / max_batch_size);
}

int64_t CacheConfig::max_stream_frames() const { return blocks_per_stream() * block_size_frames; }

double CacheConfig::max_stream_seconds() const {
  return static_cast<double>(max_stream_frames()) * encoder_frame_ms / 1000.0;
}

int64_t CacheConfig::min_pool_blocks() const {
  return eviction_enabled() ? int64_t{max_batch_size} * blocks_per_stream() : max_batch_size;
}

size_t CacheConfig::bytes_per_kv_block() const {
  return 2 * static_cast<size_t>(num_layers) * block_size_frames * n_kv_head * head_dim *
         DTypeSize(dtype);
}

size_t CacheConfig::pool_bytes() const {
  return bytes_per_kv_block() * static_cast<size_t>(max_num_blocks);
}

}  // namespace oasr::cache
