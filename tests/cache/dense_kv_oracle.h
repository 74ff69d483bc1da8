// The dense K/V layout as a test oracle: WeNet's forward_chunk keeps each
// stream's attention history as one tensor (num_layers, n_kv_head, frames,
// 2 * head_dim), K then V on the last axis. The serving path never builds it
// -- the model writes K/V into the paged pool by block table and the cache
// layer only keeps the books -- so it lives here, where tests check that the
// paged state holds exactly what a dense cache of the same stream would.
//
// Both functions go through the AttentionCacheManager's public API only
// (LogicalBlocks, CachedFrames, PrepareChunk, CommitChunkPaged) and the
// pool's tensors, so they test the books as a kernel would read them. They
// work on CPU and CUDA storage (copies enqueued on `gpu_stream`).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/attention_cache_manager.h"
#include "common/gpu_stream.h"
#include "common/tensor.h"

namespace oasr::cache::testing {

// The retained history of the stream in `slot`, gathered from the pool into
// a new dense tensor (num_layers, n_kv_head, cached_frames, 2 * head_dim) on
// the config's device: the att_cache a dense forward_chunk would hold (the
// old AttentionCacheManager::GetStackedCache). Allocates. Slot errors are
// the manager's.
absl::StatusOr<Tensor> GatherDenseHistory(const AttentionCacheManager& att, int slot,
                                          GpuStream gpu_stream);

// Appends a dense chunk to the stream in `slot` the way the serving path
// does: PrepareChunk, a paged write of `kv_chunk` (num_layers, n_kv_head,
// frames, 2 * head_dim; 1 <= frames <= chunk_size; the config's dtype on its
// device) at positions [cache length, + frames), then CommitChunkPaged (which
// evicts). INVALID_ARGUMENT naming expected and actual for a bad chunk,
// before anything changes; otherwise the manager's errors (nothing written
// when PrepareChunk refuses).
absl::Status AppendDenseChunk(AttentionCacheManager& att, int slot, const TensorView& kv_chunk,
                              GpuStream gpu_stream);

}  // namespace oasr::cache::testing
