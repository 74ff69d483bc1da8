#include "cache/cnn_cache_manager.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace oasr::cache {

absl::StatusOr<std::unique_ptr<CnnCacheManager>> CnnCacheManager::Create(const CacheConfig& config,
                                                                         int pad_lanes) {
  OASR_RETURN_IF_ERROR(config.Validate());
  if (pad_lanes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CnnCacheManager: pad_lanes = ", pad_lanes, ": must be >= 0"));
  }
  StreamStateSpec spec;
  spec.name = kStateName;
  spec.per_slot_shape = {config.num_layers, config.cnn_cache_frames(), config.hidden_dim};
  spec.slot_axis = 1;
  spec.dtype = config.dtype;
  std::vector<StreamStateSpec> specs;
  specs.push_back(std::move(spec));
  OASR_ASSIGN_OR_RETURN(
      std::unique_ptr<SlotStateCache> states,
      SlotStateCache::Create(std::move(specs), config.max_batch_size + pad_lanes, config.device));
  return std::unique_ptr<CnnCacheManager>(
      new CnnCacheManager(config, pad_lanes, std::move(states)));
}

CnnCacheManager::CnnCacheManager(const CacheConfig& config, int pad_lanes,
                                 std::unique_ptr<SlotStateCache> states)
    : config_(config),
      states_(std::move(states)),
      bindings_("CnnCacheManager", config.max_batch_size, pad_lanes),
      slots_buffer_(states_->num_slots()) {}

absl::Status CnnCacheManager::AllocateStream(int64_t stream_id, int slot, GpuStream gpu_stream) {
  OASR_RETURN_IF_ERROR(bindings_.CheckBind(stream_id, slot));
  OASR_RETURN_IF_ERROR(states_->ZeroSlot(slot, gpu_stream));
  bindings_.Bind(stream_id, slot);
  return absl::OkStatus();
}

absl::Status CnnCacheManager::FreeStream(int64_t stream_id) {
  return bindings_.Unbind(stream_id).status();
}

absl::StatusOr<std::span<const int32_t>> CnnCacheManager::Slots(
    std::span<const int64_t> stream_ids) const {
  if (stream_ids.size() > slots_buffer_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("CnnCacheManager: a cohort of ",
                                                   stream_ids.size(), " streams exceeds ",
                                                   slots_buffer_.size(), " slots"));
  }
  for (size_t i = 0; i < stream_ids.size(); ++i) {
    OASR_ASSIGN_OR_RETURN(slots_buffer_[i], SlotOf(stream_ids[i]));
  }
  return std::span<const int32_t>(slots_buffer_.data(), stream_ids.size());
}

absl::Status CnnCacheManager::Update(int64_t stream_id, const TensorView& new_cache,
                                     GpuStream gpu_stream) {
  return Scatter(std::span<const int64_t>(&stream_id, 1), new_cache, gpu_stream);
}

absl::Status CnnCacheManager::GetCache(int64_t stream_id, const TensorView& out,
                                       GpuStream gpu_stream) const {
  return Gather(std::span<const int64_t>(&stream_id, 1), out, gpu_stream);
}

absl::Status CnnCacheManager::Gather(std::span<const int64_t> stream_ids, const TensorView& out,
                                     GpuStream gpu_stream) const {
  OASR_ASSIGN_OR_RETURN(const std::span<const int32_t> slots, Slots(stream_ids));
  return states_->Gather(0, slots, out, gpu_stream);
}

absl::Status CnnCacheManager::Scatter(std::span<const int64_t> stream_ids, const TensorView& in,
                                      GpuStream gpu_stream) {
  OASR_ASSIGN_OR_RETURN(const std::span<const int32_t> slots, Slots(stream_ids));
  return states_->Scatter(0, slots, in, gpu_stream);
}

}  // namespace oasr::cache
