// CacheConfig: the one geometry every cache manager is built from (layers,
// heads, dims, chunk and block sizes, pool capacity, dtype, device), with the
// derived sizes the managers and the engine's sizing share.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"
#include "common/dtype.h"

namespace oasr::cache {

struct CacheConfig {
  // Encoder geometry.
  int num_layers = 12;
  int n_kv_head = 4;
  int head_dim = 64;
  int hidden_dim = 256;
  int kernel_size = 15;  // Depthwise conv kernel; the conv cache keeps kernel_size - 1 frames.

  // Streaming geometry, in encoder output frames.
  int chunk_size = 16;
  // Chunks of history kept per stream; -1 keeps everything (eviction off),
  // n >= 0 keeps the most recent chunk_size * n frames (eviction on).
  int num_left_chunks = -1;
  int block_size_frames = 16;

  // Pool capacity in blocks. 0 means "derive from memory" (ResolveCacheConfig):
  // free device memory on CUDA, host_pool_budget_bytes on the CPU.
  int64_t max_num_blocks = 1024;
  // Block-table capacity per stream: a stream never holds more blocks. The
  // mirrored table is min(max_blocks_per_seq, blocks_per_stream()) wide.
  int max_blocks_per_seq = 512;
  // Streams served at once (the number of slots).
  int max_batch_size = 32;

  // A stream starts with its whole retained window, zeroed, so every stream
  // reports the same cache length (seed section 10.2). Needs eviction on and
  // chunk_size == block_size_frames.
  bool prefill_kv_window = false;
  // Every chunk of a stream but its last has chunk_size frames (the
  // engine's streams: a short chunk only at the end of the audio). With
  // eviction and chunk_size == block_size_frames a stream's history then
  // always ends on a block boundary before a chunk, so it needs no partly
  // filled block: blocks_per_stream is one less. A stream that breaks it
  // (a short chunk, then another) finds itself at capacity.
  bool full_chunks = false;

  DType dtype = DType::kFloat16;
  Device device = Device::Cpu();

  // Pool sizing when max_num_blocks == 0: the fraction of free device memory
  // the pool may take (the rest is the model's and the activations'), and on
  // the CPU the byte budget it may take.
  double pool_memory_fraction = 0.9;
  int64_t host_pool_budget_bytes = int64_t{1} << 30;

  // Duration of one encoder output frame (4x subsampling of 10 ms features),
  // used only to report the per-stream ceiling in seconds.
  int encoder_frame_ms = 40;

  // Rejects geometries that cannot work, naming the field, its value and the
  // limit: non-positive sizes; chunk_size > block_size_frames (a chunk would
  // spill into a block the next chunk owns); max_blocks_per_seq below what a
  // stream can hold; an explicit pool too small for max_batch_size streams
  // (with eviction on: their retained history plus one chunk in flight; with
  // it off: one block each); prefill without eviction or with
  // chunk_size != block_size_frames.
  absl::Status Validate() const;

  // head_dim * 2: K and V packed along the last axis in the dense API.
  int kv_last_dim() const { return head_dim * 2; }
  // kernel_size - 1: left-context frames the causal conv keeps per layer.
  int cnn_cache_frames() const { return kernel_size - 1; }
  bool eviction_enabled() const { return num_left_chunks >= 0; }
  // chunk_size * num_left_chunks frames kept after each commit, or -1 when
  // history is unlimited.
  int64_t retained_frames() const;
  // ceil(retained_frames / block_size_frames), or -1 when history is unlimited.
  int64_t max_logical_blocks() const;
  // The most blocks one stream may hold at any moment. With eviction on: its
  // retained window, a partly filled tail block and the chunk in flight,
  // ceil((retained + block - 1 + chunk) / block) -- the bound that makes the
  // pool impossible to exhaust with max_batch_size streams. With eviction off:
  // min(max_blocks_per_seq, max_num_blocks / max_batch_size); a stream that
  // reaches it is at capacity.
  int64_t blocks_per_stream() const;
  // blocks_per_stream * block_size_frames: the frames a stream can hold; with
  // eviction off, the longest stream served.
  int64_t max_stream_frames() const;
  // max_stream_frames in seconds of audio (encoder_frame_ms per frame).
  double max_stream_seconds() const;
  // Blocks the pool needs so that max_batch_size streams can never exhaust it
  // (eviction on), or one block per stream (eviction off).
  int64_t min_pool_blocks() const;
  // Bytes of one physical block, K and V over all layers:
  // 2 * num_layers * block_size_frames * n_kv_head * head_dim * DTypeSize(dtype).
  size_t bytes_per_kv_block() const;
  // bytes_per_kv_block * max_num_blocks.
  size_t pool_bytes() const;
};

}  // namespace oasr::cache
