// CnnCacheManager: the causal depthwise conv's left context per stream, the
// single-spec instance of SlotStateCache in the historical
// (num_layers, slots, kernel_size - 1, hidden_dim) layout.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/cache_config.h"
#include "cache/slot_state_cache.h"
#include "cache/stream_bindings.h"
#include "common/gpu_stream.h"
#include "common/tensor.h"

namespace oasr::cache {

// Streams are keyed by id and bound to a slot from StreamSlotPool (the same
// slot as their attention rows). One stored tensor, zeroed per stream at
// allocation and overwritten in place every chunk: no per-chunk allocation.
//
// Thread-safety: none; the engine's scheduler thread only.
class CnnCacheManager {
 public:
  static constexpr const char* kStateName = "cnn";

  // The stored tensor (num_layers, max_batch_size + pad_lanes,
  // cnn_cache_frames, hidden_dim) in config.dtype on config.device.
  // INVALID_ARGUMENT for an invalid config or pad_lanes < 0;
  // RESOURCE_EXHAUSTED when memory cannot be had.
  static absl::StatusOr<std::unique_ptr<CnnCacheManager>> Create(const CacheConfig& config,
                                                                 int pad_lanes = 0);

  // Binds `stream_id` to `slot` and zeroes its context (enqueued on
  // `gpu_stream`). ALREADY_EXISTS for a live id; INVALID_ARGUMENT for a slot
  // outside [0, max_batch_size); FAILED_PRECONDITION when the slot holds
  // another stream. May allocate (the id map).
  absl::Status AllocateStream(int64_t stream_id, int slot, GpuStream gpu_stream);
  // NOT_FOUND for an unknown or freed id.
  absl::Status FreeStream(int64_t stream_id);

  // Overwrites the stream's context with `new_cache` (num_layers, 1,
  // cnn_cache_frames, hidden_dim), same dtype and device. INVALID_ARGUMENT
  // naming expected and actual shapes; NOT_FOUND for an unknown id.
  absl::Status Update(int64_t stream_id, const TensorView& new_cache, GpuStream gpu_stream);
  // Copies the stream's context into `out`, shaped as in Update.
  absl::Status GetCache(int64_t stream_id, const TensorView& out, GpuStream gpu_stream) const;

  // The same for a cohort: `out` / `in` are (num_layers, B, cnn_cache_frames,
  // hidden_dim) with B = stream_ids.size() (at most max_batch_size + pad_lanes).
  absl::Status Gather(std::span<const int64_t> stream_ids, const TensorView& out,
                      GpuStream gpu_stream) const;
  absl::Status Scatter(std::span<const int64_t> stream_ids, const TensorView& in,
                       GpuStream gpu_stream);

  // The dense shape of a cohort of `count` streams.
  Shape CohortShape(int64_t count) const { return states_->CohortShape(0, count); }
  // The stored tensor, stable for the manager's lifetime (kernels that index
  // it by slot, graph capture).
  TensorView buffer() const { return states_->buffer(0); }
  SlotStateCache& states() { return *states_; }
  absl::StatusOr<int> SlotOf(int64_t stream_id) const { return bindings_.Find(stream_id); }
  int num_streams() const { return bindings_.size(); }

 private:
  CnnCacheManager(const CacheConfig& config, int pad_lanes, std::unique_ptr<SlotStateCache> states);
  // Resolves `stream_ids` into slots_buffer_. NOT_FOUND for an unknown id,
  // INVALID_ARGUMENT past the buffer.
  absl::StatusOr<std::span<const int32_t>> Slots(std::span<const int64_t> stream_ids) const;

  const CacheConfig config_;
  std::unique_ptr<SlotStateCache> states_;
  StreamBindings bindings_;
  mutable std::vector<int32_t> slots_buffer_;
};

}  // namespace oasr::cache
