#include "cache/cnn_cache_manager.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace oasr::cache {

StreamStateSpec CnnCacheManager::Spec(const CacheConfig& config) {
  StreamStateSpec spec;
  spec.name = kStateName;
  spec.per_slot_shape = {config.num_layers, config.cnn_cache_frames(), config.hidden_dim};
  spec.slot_axis = 1;
  spec.dtype = config.dtype;
  return spec;
}

absl::StatusOr<std::unique_ptr<CnnCacheManager>> CnnCacheManager::Create(const CacheConfig& config,
                                                                         int pad_lanes) {
  OASR_RETURN_IF_ERROR(config.Validate());
  if (pad_lanes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CnnCacheManager: pad_lanes = ", pad_lanes, ": must be >= 0"));
  }
  std::vector<StreamStateSpec> specs;
  specs.push_back(Spec(config));
  OASR_ASSIGN_OR_RETURN(
      std::unique_ptr<SlotStateCache> states,
      SlotStateCache::Create(std::move(specs), config.max_batch_size + pad_lanes, config.device));
  return std::unique_ptr<CnnCacheManager>(new CnnCacheManager(std::move(states)));
}

}  // namespace oasr::cache
