// CnnCacheManager: the causal depthwise conv's left context per stream, the
// single-spec instance of SlotStateCache in the historical
// (num_layers, slots, kernel_size - 1, hidden_dim) layout.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "cache/cache_config.h"
#include "cache/slot_state_cache.h"
#include "common/tensor.h"

namespace oasr::cache {

// The conv context is slot-addressed like every other fixed-extent state: a
// stream's rows are those of its slot (from StreamSlotPool, the same slot as
// its attention rows), zeroed when a stream takes the slot
// (SlotStateCache::ZeroSlot, which StreamContext calls) and overwritten in
// place every chunk by the model. One stored tensor: no per-chunk allocation.
// The manager keeps no stream ids; cohorts read and write it through
// states().View / Gather / Scatter by slot.
//
// Thread-safety: none; the engine's scheduler thread only.
class CnnCacheManager {
 public:
  // The state's name among a model's declared states (StreamingModel::StreamStates).
  static constexpr const char* kStateName = "cnn";

  // The conv state's declaration for `config`: per-slot shape (num_layers,
  // cnn_cache_frames, hidden_dim) with the slot on axis 1, config.dtype.
  static StreamStateSpec Spec(const CacheConfig& config);

  // The stored tensor (num_layers, max_batch_size + pad_lanes,
  // cnn_cache_frames, hidden_dim) in config.dtype on config.device, zeroed.
  // INVALID_ARGUMENT for an invalid config or pad_lanes < 0;
  // RESOURCE_EXHAUSTED when memory cannot be had.
  static absl::StatusOr<std::unique_ptr<CnnCacheManager>> Create(const CacheConfig& config,
                                                                 int pad_lanes = 0);

  // The dense shape of a cohort of `count` slots (Gather / Scatter).
  Shape CohortShape(int64_t count) const { return states_->CohortShape(0, count); }
  // The stored tensor, stable for the manager's lifetime (kernels that index
  // it by slot, graph capture).
  TensorView buffer() const { return states_->buffer(0); }
  // The one-spec cache itself (spec 0), for ZeroSlot, View, Gather, Scatter.
  SlotStateCache& states() { return *states_; }
  const SlotStateCache& states() const { return *states_; }

 private:
  explicit CnnCacheManager(std::unique_ptr<SlotStateCache> states) : states_(std::move(states)) {}

  std::unique_ptr<SlotStateCache> states_;
};

}  // namespace oasr::cache
