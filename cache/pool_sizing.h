// Sizing the K/V block pool from memory, and turning a CacheConfig into the
// resolved one every manager is built from.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "cache/cache_config.h"

namespace oasr::cache {

// The number of blocks a pool for `config` gets out of `usable_bytes` (memory
// the pool may take, margin already applied). `config.max_num_blocks` is
// ignored.
//  * Eviction on: a stream never holds more than blocks_per_stream blocks, so
//    the pool is exactly max_batch_size * blocks_per_stream blocks and this
//    only checks that the retained history fits.
//  * Eviction off: as many blocks as fit, capped at what the block tables can
//    address (max_batch_size * max_blocks_per_seq).
// RESOURCE_EXHAUSTED, naming the bytes needed and available, when the history
// does not fit (eviction on) or not even one block per stream fits (off).
absl::StatusOr<int64_t> PoolBlocksForBytes(const CacheConfig& config, int64_t usable_bytes);

// The memory the pool may take on `config.device`: pool_memory_fraction of the
// device's free memory on CUDA (the rest is a safety margin for weights and
// activations), host_pool_budget_bytes on the CPU. Errors from the device
// query pass through.
absl::StatusOr<int64_t> UsablePoolBytes(const CacheConfig& config);

// Validates `config`, fills max_num_blocks from memory when it is 0, and logs
// at INFO the per-stream ceiling (max_stream_frames and its seconds of audio)
// or, with eviction on, the retained window. The returned config is what
// BlockPool and the managers are built from. Thread-safe.
absl::StatusOr<CacheConfig> ResolveCacheConfig(CacheConfig config);

}  // namespace oasr::cache
