// StreamContext: the per-request facade over the cache managers, so the
// engine's hot loop reads as allocate / prepare / views / commit / decode /
// free instead of juggling a stream id across four managers.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/attention_cache_manager.h"
#include "cache/cnn_cache_manager.h"
#include "cache/ctc_state_cache_manager.h"
#include "cache/slot_state_cache.h"
#include "cache/stream_slot_pool.h"
#include "common/gpu_stream.h"
#include "common/tensor.h"

namespace oasr::cache {

// The managers a context spans; none is owned, all must outlive every context.
struct CacheManagers {
  StreamSlotPool* slots = nullptr;             // Required.
  AttentionCacheManager* attention = nullptr;  // Required.
  CnnCacheManager* cnn = nullptr;              // Optional: the conv left context.
  SlotStateCache* states = nullptr;            // Optional: further declared states.
  CtcStateCacheManager* ctc = nullptr;         // Optional: the CTC decoder state.
};

// Owns one stream's claim on every manager: a slot, its attention rows and
// blocks, its conv context and declared states (zeroed), and a decoder state.
// Free (or destruction) gives all of them back exactly once. Move-only.
//
// Thread-safety: none; the engine's scheduler thread only.
class StreamContext {
 public:
  // Claims a slot and allocates `stream_id` in every manager present; device
  // work (zeroing) is enqueued on `gpu_stream`, which the context keeps for
  // its later calls. All-or-nothing: on error every claim made so far is
  // released. Errors are the managers' (RESOURCE_EXHAUSTED when no slot or no
  // prefill blocks are left, ALREADY_EXISTS for a live id);
  // INVALID_ARGUMENT when slots or attention is missing.
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

  // AttentionCacheManager::PrepareChunk for this stream (the cohort becomes
  // [this stream]).
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

  // The conv context, copied into `out` (num_layers, 1, cnn_cache_frames,
  // hidden_dim). FAILED_PRECONDITION without a CnnCacheManager.
  absl::Status GetCnnCache(const TensorView& out) const;

  // Commits a paged chunk of `chunk_frames` frames and, when `new_cnn` is not
  // empty, overwrites the conv context with it. `new_cnn` is checked first,
  // so on error nothing changes. Errors: CommitChunkPaged's and Update's.
  absl::Status CommitChunkPaged(int64_t chunk_frames, const TensorView& new_cnn = TensorView());
  // Dense mode: AttentionCacheManager::Commit plus the conv update, same rules.
  absl::Status CommitChunk(const TensorView& kv_chunk, const TensorView& new_cnn = TensorView());
  // Dense mode: the stacked history (AttentionCacheManager::GetStackedCache).
  absl::StatusOr<Tensor> GetAttCache() const;

  // The stream's decoder. FAILED_PRECONDITION without a CtcStateCacheManager.
  absl::StatusOr<StreamHandle> GetDecoder() const;

  // Releases the blocks, the slot, the conv and declared states and returns
  // the decoder state to its pool. FAILED_PRECONDITION when already freed;
  // nothing is released twice.
  absl::Status Free();

 private:
  StreamContext(int64_t stream_id, int slot, const CacheManagers& managers, GpuStream gpu_stream)
      : stream_id_(stream_id),
        slot_(slot),
        managers_(managers),
        gpu_stream_(gpu_stream),
        live_(true) {}
  absl::Status CheckLive() const;
  absl::Status CheckCnn(const TensorView& new_cnn) const;

  int64_t stream_id_ = -1;
  int slot_ = -1;
  CacheManagers managers_;
  GpuStream gpu_stream_ = nullptr;
  bool live_ = false;
};

}  // namespace oasr::cache
