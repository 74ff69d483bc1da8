// AttentionCacheManager: per-stream paged K/V bookkeeping on top of the shared
// BlockPool -- the logical block list (the stream's block-table row), the
// cache length, eviction, and the device mirror of both that attention
// kernels read. Streams are addressed by their slot alone.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/block_pool.h"
#include "cache/block_table_mirror.h"
#include "cache/cache_config.h"
#include "common/gpu_stream.h"
#include "common/tensor.h"

namespace oasr::cache {

// One stream's rows of the device mirror. The table is W =
// min(max_blocks_per_seq, blocks_per_stream) columns wide: no stream can hold
// more blocks, so wider columns would only ever be zero.
struct PagedStateViews {
  TensorView block_table;    // int32 (1, W)
  TensorView cache_seqlens;  // int32 (1)
};

// What a paged attention kernel reads for one layer and the current cohort.
// Batch row b uses slot s = cohort_slots[b]: its physical blocks are
// block_table[s, 0 .. ceil(len / block_size)), len = cache_seqlens[s], and
// history position p lives in block block_table[s, p / block_size] at row
// p % block_size. The chunk being computed is written at positions
// [len, len + chunk) (blocks reserved by the Prepare call).
struct PagedKvCacheView {
  TensorView k_cache;        // (num_physical_blocks, block_size, n_kv_head, head_dim)
  TensorView v_cache;        // same
  TensorView block_table;    // int32 (rows, W); rows = slots + pad lanes
  TensorView cache_seqlens;  // int32 (rows)
  TensorView cohort_slots;   // int32 (cohort size)
  int block_size = 0;
  int64_t block_table_stride = 0;  // Elements between consecutive rows.
};

// Positions of a stream's retained history are dense: position p is row
// p % B of logical block p / B (B = block_size_frames). Prepare reserves the
// blocks the next chunk_size frames need (at most one new block per chunk);
// commit advances the length and then evicts whole blocks from the front,
// oldest first, while the frames left after dropping one would still cover
// retained_frames -- so a stream always keeps at least the most recent
// retained_frames frames (and fewer than retained_frames + B).
//
// A stream is addressed by its slot (from StreamSlotPool), which names its
// block-table row: the manager keeps no stream ids, so the one binding of a
// stream to its slot is its owner's (cache::StreamContext, the engine's
// stream). A slot is allocated (bound) from AllocateSlot to FreeSlot; every
// other per-stream call takes a bound slot. `pad_lanes` extra rows past
// max_batch_size point only at the pool's scratch block, at the cache length
// every stream starts with, for padding a cohort to a fixed width; they are
// never bound.
//
// Slot errors, everywhere: INVALID_ARGUMENT for a slot outside
// [0, max_batch_size) (a padding lane named as such); NOT_FOUND for a slot
// that holds no stream.
//
// Nothing here allocates on the heap after Create (the plan buffers are
// sized then), and the steady-state loop (PrepareChunksBatched, PadCohort,
// UpdateDeviceMirror, the views and queries, CommitChunkPaged) touches the
// device only through the mirror's one staged copy. The dense WeNet layout
// (forward_chunk's att_cache) is a test oracle's business
// (tests/cache/dense_kv_oracle.h), not this class's.
//
// Thread-safety: none; the engine's scheduler thread only (the pool it draws
// from is thread-safe). The pool must outlive the manager.
class AttentionCacheManager {
 public:
  // `pool` is not owned. INVALID_ARGUMENT when pad_lanes < 0, or pad_lanes > 0
  // and the pool has no scratch block.
  static absl::StatusOr<std::unique_ptr<AttentionCacheManager>> Create(BlockPool* pool,
                                                                       int pad_lanes = 0);

  // Starts a stream in block-table row `slot`. With prefill_kv_window the
  // stream receives max_logical_blocks zeroed blocks and a cache length of
  // retained_frames at once (the zeroing is enqueued on `gpu_stream`; ignored
  // on the CPU). ALREADY_EXISTS when the slot holds a stream; INVALID_ARGUMENT
  // for a slot out of range (a padding lane included); RESOURCE_EXHAUSTED
  // when the prefill blocks cannot be had. On error nothing changes.
  absl::Status AllocateSlot(int slot, GpuStream gpu_stream);

  // Returns the slot's blocks to the pool and clears its row. Clears the
  // cohort when the slot is in it. Slot errors as above.
  absl::Status FreeSlot(int slot);

  // Reserves room for the slot's next chunk (chunk_size frames) and makes
  // the cohort [slot]. RESOURCE_EXHAUSTED when the stream is at capacity (see
  // AtCapacity) or the pool is exhausted; nothing changes on error.
  absl::Status PrepareChunk(int slot);

  // PrepareChunk for a cohort with one pool call for all its new blocks; the
  // cohort becomes `slots` in this order. All-or-nothing: slot errors as
  // above, INVALID_ARGUMENT for a repeated slot or more slots than the
  // cohort capacity, RESOURCE_EXHAUSTED as PrepareChunk.
  absl::Status PrepareChunksBatched(std::span<const int32_t> slots);

  // Pads the cohort up to `width` rows with the first padding lane, whose
  // K/V writes land in the scratch block. FAILED_PRECONDITION without a
  // padding lane; INVALID_ARGUMENT when width is below the cohort's size or
  // above its capacity.
  absl::Status PadCohort(int width);

  // Records that the model wrote `chunk_frames` new frames at the slot's
  // cache length, then evicts (see the class comment). INVALID_ARGUMENT for
  // chunk_frames outside [0, chunk_size]; FAILED_PRECONDITION when the frames
  // exceed the reserved room (no Prepare).
  absl::Status CommitChunkPaged(int slot, int64_t chunk_frames);

  // Copies what changed in the block tables, cache lengths and cohort since
  // the last call to the device, in one asynchronous copy on `gpu_stream`
  // (nothing on the CPU, where the mirror is the host table). Call after the
  // Prepare calls and before launching kernels that read the views.
  void UpdateDeviceMirror(GpuStream gpu_stream) { mirror_->Sync(gpu_stream); }

  // The slot's block-table row and cache length in the device mirror.
  // FAILED_PRECONDITION before its first Prepare.
  absl::StatusOr<PagedStateViews> GetPagedStateViews(int slot) const;

  // The paged cache of `layer` for the current cohort (0 <= layer < num_layers).
  PagedKvCacheView GetPagedKvCache(int layer) const;

  // --- Queries --------------------------------------------------------------
  // Whether the slot's next full chunk would need more than
  // blocks_per_stream blocks; the engine finishes such a stream
  // (finish_reason "length") instead of dispatching the chunk. Never true
  // with eviction on.
  absl::StatusOr<bool> AtCapacity(int slot) const;

  // The largest cache length among `slots`: the history (cache_t1) a
  // batched forward over them attends to.
  absl::StatusOr<int64_t> CachedFrames(std::span<const int32_t> slots) const;

  // The slot's physical blocks in logical order (a view of its host row,
  // valid until the slot's next Prepare/Commit/Free).
  absl::StatusOr<std::span<const int32_t>> LogicalBlocks(int slot) const;

  // Asks for the slot's state and block-table row (a prefetch hint for
  // loops over many slots; no effect on results; slots out of range are
  // ignored).
  void PrefetchSlot(int slot) const;

  // Whether `slot` holds a stream (false for any slot out of range).
  bool IsBound(int slot) const {
    return slot >= 0 && slot < config_.max_batch_size && slots_[slot].bound;
  }

  // Slots holding a stream.
  int num_streams() const { return num_bound_; }
  int pad_lanes() const { return pad_lanes_; }
  // The row of padding lane `i`: max_batch_size + i.
  int pad_lane_slot(int i = 0) const { return config_.max_batch_size + i; }
  const CacheConfig& config() const { return config_; }
  BlockPool& pool() const { return *pool_; }
  const BlockTableMirror& mirror() const { return *mirror_; }

 private:
  struct SlotState {
    bool bound = false;
    bool prepared = false;
    int32_t num_blocks = 0;     // Entries of the row in use.
    int64_t frames = 0;         // Committed frames retained; the cache length.
    uint32_t cohort_epoch = 0;  // epoch_ of the last cohort it joined.
  };

  AttentionCacheManager(BlockPool* pool, int pad_lanes, std::unique_ptr<BlockTableMirror> mirror);
  // OK for a bound slot; the slot errors of the class comment otherwise.
  absl::Status CheckBound(int slot) const;
  // INVALID_ARGUMENT for a slot outside the stream slots.
  absl::Status CheckRange(int slot) const;
  // Blocks the slot needs to hold `frames` more frames than it has.
  int64_t NewBlocksFor(int slot, int64_t frames) const;
  absl::Status CheckCapacity(int slot, int64_t new_blocks) const;
  void AppendBlock(int slot, int32_t block);
  // Advances the cache length by `frames` and evicts.
  void Advance(int slot, int64_t frames);

  const CacheConfig config_;
  BlockPool* const pool_;
  const int pad_lanes_;
  std::unique_ptr<BlockTableMirror> mirror_;
  std::vector<SlotState> slots_;  // max_batch_size entries.
  int num_bound_ = 0;
  // Preallocated plan buffers for PrepareChunksBatched.
  std::vector<int32_t> plan_slots_;
  std::vector<int32_t> plan_new_blocks_;
  std::vector<int32_t> plan_block_ids_;
  std::vector<uint32_t> seen_epoch_;
  uint32_t epoch_ = 0;
  // epoch_ of the cohort the mirror holds; 0 once it was cleared. A slot is
  // in it when its cohort_epoch equals this (FreeSlot's check, O(1)).
  uint32_t cohort_epoch_ = 0;
};

}  // namespace oasr::cache
