#include "cache/ctc_state_cache_manager.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace oasr::cache {

CtcStateCacheManager::CtcStateCacheManager(PooledDecoder* decoder, int reserve)
    : decoder_(decoder) {
  OASR_CHECK(decoder != nullptr);
  OASR_CHECK_GE(reserve, 0);
  pool_.reserve(reserve);
  states_.reserve(reserve);
  for (int i = 0; i < reserve; ++i) {
    pool_.push_back(decoder_->CreateState());
    ++num_created_;
  }
}

absl::Status CtcStateCacheManager::AllocateStream(int64_t stream_id) {
  if (states_.contains(stream_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("CtcStateCacheManager: stream ", stream_id, " is already allocated"));
  }
  std::unique_ptr<DecoderState> state;
  if (!pool_.empty()) {
    state = std::move(pool_.back());
    pool_.pop_back();
    decoder_->ResetState(*state);
  } else {
    state = decoder_->CreateState();
    OASR_CHECK(state != nullptr, "PooledDecoder::CreateState returned null");
    ++num_created_;
  }
  states_.emplace(stream_id, std::move(state));
  return absl::OkStatus();
}

absl::Status CtcStateCacheManager::FreeStream(int64_t stream_id) {
  const auto it = states_.find(stream_id);
  if (it == states_.end()) {
    return absl::NotFoundError(
        absl::StrCat("CtcStateCacheManager: stream ", stream_id, " is unknown or freed"));
  }
  // Pooled, not destroyed: its buffers serve the next stream.
  pool_.push_back(std::move(it->second));
  states_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<StreamHandle> CtcStateCacheManager::GetDecoder(int64_t stream_id) const {
  const auto it = states_.find(stream_id);
  if (it == states_.end()) {
    return absl::NotFoundError(
        absl::StrCat("CtcStateCacheManager: stream ", stream_id, " is unknown or freed"));
  }
  return StreamHandle(decoder_, it->second.get());
}

}  // namespace oasr::cache
