#include "cache/stream_context.h"

#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

namespace oasr::cache {

absl::StatusOr<StreamContext> StreamContext::Allocate(int64_t stream_id,
                                                      const CacheManagers& managers,
                                                      GpuStream gpu_stream) {
  if (managers.slots == nullptr || managers.attention == nullptr) {
    return absl::InvalidArgumentError(
        "StreamContext: CacheManagers.slots and CacheManagers.attention are required");
  }
  OASR_ASSIGN_OR_RETURN(const int slot, managers.slots->Acquire());
  // Each step that succeeded is undone, in reverse, if a later one fails.
  int done = 0;
  absl::Status status = managers.attention->AllocateStream(stream_id, slot, gpu_stream);
  if (status.ok()) {
    ++done;
    if (managers.cnn != nullptr) status = managers.cnn->AllocateStream(stream_id, slot, gpu_stream);
  }
  if (status.ok()) {
    ++done;
    if (managers.states != nullptr) status = managers.states->ZeroSlot(slot, gpu_stream);
  }
  if (status.ok()) {
    ++done;
    if (managers.ctc != nullptr) status = managers.ctc->AllocateStream(stream_id);
  }
  if (status.ok()) return StreamContext(stream_id, slot, managers, gpu_stream);
  if (done >= 2 && managers.cnn != nullptr) OASR_CHECK(managers.cnn->FreeStream(stream_id).ok());
  if (done >= 1) OASR_CHECK(managers.attention->FreeStream(stream_id).ok());
  OASR_CHECK(managers.slots->Release(slot).ok());
  return status;
}

StreamContext::StreamContext(StreamContext&& other) noexcept
    : stream_id_(other.stream_id_),
      slot_(other.slot_),
      managers_(other.managers_),
      gpu_stream_(other.gpu_stream_),
      live_(std::exchange(other.live_, false)) {}

StreamContext& StreamContext::operator=(StreamContext&& other) noexcept {
  if (this != &other) {
    if (live_) Free().IgnoreError();
    stream_id_ = other.stream_id_;
    slot_ = other.slot_;
    managers_ = other.managers_;
    gpu_stream_ = other.gpu_stream_;
    live_ = std::exchange(other.live_, false);
  }
  return *this;
}

StreamContext::~StreamContext() {
  if (live_) {
    const absl::Status status = Free();
    if (!status.ok())
      spdlog::error("StreamContext: freeing stream {}: {}", stream_id_,
                    std::string(status.message()));
  }
}

absl::Status StreamContext::CheckLive() const {
  if (live_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("StreamContext: stream ", stream_id_, " is already freed"));
}

absl::Status StreamContext::PrepareChunk() {
  OASR_RETURN_IF_ERROR(CheckLive());
  return managers_.attention->PrepareChunk(stream_id_);
}

absl::StatusOr<bool> StreamContext::AtCapacity() const {
  OASR_RETURN_IF_ERROR(CheckLive());
  return managers_.attention->AtCapacity(stream_id_);
}

absl::StatusOr<PagedStateViews> StreamContext::GetPagedStateViews() const {
  OASR_RETURN_IF_ERROR(CheckLive());
  return managers_.attention->GetPagedStateViews(stream_id_);
}

PagedKvCacheView StreamContext::GetAttCaches(int layer) const {
  return managers_.attention->GetPagedKvCache(layer);
}

absl::StatusOr<int64_t> StreamContext::CachedFrames() const {
  OASR_RETURN_IF_ERROR(CheckLive());
  return managers_.attention->CachedFrames(std::span<const int64_t>(&stream_id_, 1));
}

absl::Status StreamContext::GetCnnCache(const TensorView& out) const {
  OASR_RETURN_IF_ERROR(CheckLive());
  if (managers_.cnn == nullptr) {
    return absl::FailedPreconditionError("StreamContext: no CnnCacheManager");
  }
  return managers_.cnn->GetCache(stream_id_, out, gpu_stream_);
}

absl::Status StreamContext::CheckCnn(const TensorView& new_cnn) const {
  if (new_cnn.empty()) return absl::OkStatus();
  if (managers_.cnn == nullptr) {
    return absl::FailedPreconditionError(
        "StreamContext: a conv cache update without a CnnCacheManager");
  }
  const CacheConfig& config = managers_.attention->config();
  const Shape expected = managers_.cnn->CohortShape(1);
  if (!(new_cnn.shape() == expected) || new_cnn.dtype() != config.dtype ||
      !(new_cnn.device() == config.device)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "StreamContext: new conv cache ", DTypeName(new_cnn.dtype()), new_cnn.shape().ToString(),
        " on ", new_cnn.device().ToString(), ", expected ", DTypeName(config.dtype),
        expected.ToString(), " on ", config.device.ToString()));
  }
  return absl::OkStatus();
}

absl::Status StreamContext::CommitChunkPaged(int64_t chunk_frames, const TensorView& new_cnn) {
  OASR_RETURN_IF_ERROR(CheckLive());
  OASR_RETURN_IF_ERROR(CheckCnn(new_cnn));
  OASR_RETURN_IF_ERROR(managers_.attention->CommitChunkPaged(stream_id_, chunk_frames));
  if (new_cnn.empty()) return absl::OkStatus();
  return managers_.cnn->Update(stream_id_, new_cnn, gpu_stream_);
}

absl::Status StreamContext::CommitChunk(const TensorView& kv_chunk, const TensorView& new_cnn) {
  OASR_RETURN_IF_ERROR(CheckLive());
  OASR_RETURN_IF_ERROR(CheckCnn(new_cnn));
  OASR_RETURN_IF_ERROR(managers_.attention->Commit(stream_id_, kv_chunk, gpu_stream_));
  if (new_cnn.empty()) return absl::OkStatus();
  return managers_.cnn->Update(stream_id_, new_cnn, gpu_stream_);
}

absl::StatusOr<Tensor> StreamContext::GetAttCache() const {
  OASR_RETURN_IF_ERROR(CheckLive());
  return managers_.attention->GetStackedCache(stream_id_, gpu_stream_);
}

absl::StatusOr<StreamHandle> StreamContext::GetDecoder() const {
  OASR_RETURN_IF_ERROR(CheckLive());
  if (managers_.ctc == nullptr) {
    return absl::FailedPreconditionError("StreamContext: no CtcStateCacheManager");
  }
  return managers_.ctc->GetDecoder(stream_id_);
}

absl::Status StreamContext::Free() {
  OASR_RETURN_IF_ERROR(CheckLive());
  live_ = false;
  // Every release is attempted; the first error (a broken pairing of
  // managers by the caller) is reported.
  absl::Status status = managers_.attention->FreeStream(stream_id_);
  if (managers_.cnn != nullptr) status.Update(managers_.cnn->FreeStream(stream_id_));
  if (managers_.ctc != nullptr) status.Update(managers_.ctc->FreeStream(stream_id_));
  status.Update(managers_.slots->Release(slot_));
  return status;
}

}  // namespace oasr::cache
