// StreamContext: one stream's claim on the cache layer -- its slot, the
// attention rows and blocks of that slot, and its declared states -- so the
// engine's hot loop reads as allocate / prepare / views / commit / free, and
// the stream's id is bound to its slot in exactly one place.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/attention_cache_manager.h"
#include "cache/slot_state_cache.h"
#include "cache/stream_slot_pool.h"
#include "common/gpu_stream.h"
#include "common/tensor.h"

namespace oasr::cache {

// The managers a context spans; none is owned, all must outlive every context.
struct CacheManagers {
  StreamSlotPool* slots = nullptr;             // Required.
  AttentionCacheManager* attention = nullptr;  // Required.
  // Optional: the slot-addressed states (a model's declared states, the conv
  // context among them), zeroed for every new stream.
  SlotStateCache* states = nullptr;
};

// Owns one stream's slot and what is addressed by it: the slot from the slot
// pool, its attention rows and blocks, and its declared states (zeroed).
// The context is the stream's only id-to-slot binding: the managers are
// addressed by slot and keep no ids. Free (or destruction) gives everything
// back exactly once. Move-only.
//
// Thread-safety: none; the engine's scheduler thread only.
class StreamContext {
 public:
  // Claims a slot for `stream_id`, starts it in the attention manager and
  // zeroes its states; device work (zeroing) is enqueued on `gpu_stream`,
  // which the context keeps for its later calls. All-or-nothing: on error
  // every claim made so far is released. Errors are the managers'
  // (RESOURCE_EXHAUSTED when no slot or no prefill blocks are left,
  // INVALID_ARGUMENT when the states have no row for the slot);
  // INVALID_ARGUMENT when slots or attention is missing. The id is the
  // caller's and only named in messages.
  static absl::StatusOr<StreamContext> Allocate(int64_t stream_id, const CacheManagers& managers,
                                                GpuStream gpu_stream);

  StreamContext(StreamContext&& other) noexcept;
  StreamContext& operator=(StreamContext&& other) noexcept;
  StreamContext(const StreamContext&) = delete;
  StreamContext& operator=(const StreamContext&) = delete;
  // Frees the stream if Free was not called.
  ~StreamContext();

  int64_t stream_id() const { return stream_id_; }
  int slot() const { return slot_; }
  // False after Free, and for a moved-from context.
  bool live() const { return live_; }

  // AttentionCacheManager::PrepareChunk for this stream's slot (the cohort
  // becomes [this stream]). FAILED_PRECONDITION after Free, here and below.
  absl::Status PrepareChunk();
  // AttentionCacheManager::AtCapacity / GetPagedStateViews for this stream.
  absl::StatusOr<bool> AtCapacity() const;
  absl::StatusOr<PagedStateViews> GetPagedStateViews() const;
  // The paged cache of `layer` for the current cohort; refresh the device
  // mirror (UpdateDeviceMirror) before kernels read it.
  PagedKvCacheView GetAttCaches(int layer) const;
  void UpdateDeviceMirror() { managers_.attention->UpdateDeviceMirror(gpu_stream_); }
  // The history length this stream holds (cache_t1).
  absl::StatusOr<int64_t> CachedFrames() const;

  // Commits a chunk of `chunk_frames` frames the model wrote into the
  // reserved blocks (AttentionCacheManager::CommitChunkPaged; its errors).
  // The declared states need no commit: the model overwrote them in place.
  absl::Status CommitChunkPaged(int64_t chunk_frames);

  // Releases the blocks and the slot. FAILED_PRECONDITION when already
  // freed; nothing is released twice.
  absl::Status Free();

 private:
  StreamContext(int64_t stream_id, int slot, const CacheManagers& managers, GpuStream gpu_stream)
      : stream_id_(stream_id),
        slot_(slot),
        managers_(managers),
        gpu_stream_(gpu_stream),
        live_(true) {}
  absl::Status CheckLive() const;

  int64_t stream_id_ = -1;
  int slot_ = -1;
  CacheManagers managers_;
  GpuStream gpu_stream_ = nullptr;
  bool live_ = false;
};

}  // namespace oasr::cache
