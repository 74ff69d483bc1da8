#include "cache/pool_sizing.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

namespace oasr::cache {

absl::StatusOr<int64_t> PoolBlocksForBytes(const CacheConfig& config, int64_t usable_bytes) {
  const int64_t per_block = static_cast<int64_t>(config.bytes_per_kv_block());
  const int64_t fit = usable_bytes > 0 ? usable_bytes / per_block : 0;
  if (config.eviction_enabled()) {
    const int64_t need = config.min_pool_blocks();
    if (fit < need) {
      return absl::ResourceExhaustedError(
          absl::StrCat("K/V pool: the retained history of ", config.max_batch_size,
                       " streams needs ", need, " blocks (", need * per_block, " bytes) but only ",
                       usable_bytes, " bytes are usable on ", config.device.ToString()));
    }
    return need;
  }
  const int64_t cap = int64_t{config.max_batch_size} * config.max_blocks_per_seq;
  const int64_t blocks = std::min(fit, cap);
  if (blocks < config.max_batch_size) {
    return absl::ResourceExhaustedError(
        absl::StrCat("K/V pool: ", config.max_batch_size, " streams need at least one block each (",
                     int64_t{config.max_batch_size} * per_block, " bytes) but only ", usable_bytes,
                     " bytes are usable on ", config.device.ToString()));
  }
  return blocks;
}

absl::StatusOr<int64_t> UsablePoolBytes(const CacheConfig& config) {
  if (config.device.is_cpu()) return config.host_pool_budget_bytes;
  OASR_ASSIGN_OR_RETURN(const DeviceMemoryInfo info, QueryDeviceMemory(config.device));
  return static_cast<int64_t>(static_cast<double>(info.free_bytes) * config.pool_memory_fraction);
}

absl::StatusOr<CacheConfig> ResolveCacheConfig(CacheConfig config) {
  OASR_RETURN_IF_ERROR(config.Validate());
  if (config.max_num_blocks == 0) {
    OASR_ASSIGN_OR_RETURN(const int64_t usable, UsablePoolBytes(config));
    OASR_ASSIGN_OR_RETURN(config.max_num_blocks, PoolBlocksForBytes(config, usable));
    OASR_RETURN_IF_ERROR(config.Validate());
  }
  if (config.eviction_enabled()) {
    spdlog::info(
        "cache: {} blocks ({:.1f} MiB) on {}; eviction keeps {} frames per stream "
        "(num_left_chunks {}), at most {} blocks per stream",
        config.max_num_blocks, static_cast<double>(config.pool_bytes()) / (1 << 20),
        config.device.ToString(), config.retained_frames(), config.num_left_chunks,
        config.blocks_per_stream());
  } else {
    spdlog::info(
        "cache: {} blocks ({:.1f} MiB) on {}; max_stream_frames {} ({} blocks of {} frames, "
        "{:.1f} s of audio): a longer stream is finished with finish_reason \"length\"",
        config.max_num_blocks, static_cast<double>(config.pool_bytes()) / (1 << 20),
        config.device.ToString(), config.max_stream_frames(), config.blocks_per_stream(),
        config.block_size_frames, config.max_stream_seconds());
  }
  return config;
}

}  // namespace oasr::cache
