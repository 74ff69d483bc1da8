#include "cache/stream_context.h"

#include <span>
#include <string>
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
  absl::Status status = managers.attention->AllocateSlot(slot, gpu_stream);
  if (status.ok() && managers.states != nullptr) {
    status = managers.states->ZeroSlot(slot, gpu_stream);
    if (!status.ok()) OASR_CHECK(managers.attention->FreeSlot(slot).ok());
  }
  if (status.ok()) return StreamContext(stream_id, slot, managers, gpu_stream);
  OASR_CHECK(managers.slots->Release(slot).ok());
  return absl::Status(status.code(), absl::StrCat("stream ", stream_id, ": ", status.message()));
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
  return managers_.attention->PrepareChunk(slot_);
}

absl::StatusOr<bool> StreamContext::AtCapacity() const {
  OASR_RETURN_IF_ERROR(CheckLive());
  return managers_.attention->AtCapacity(slot_);
}

absl::StatusOr<PagedStateViews> StreamContext::GetPagedStateViews() const {
  OASR_RETURN_IF_ERROR(CheckLive());
  return managers_.attention->GetPagedStateViews(slot_);
}

PagedKvCacheView StreamContext::GetAttCaches(int layer) const {
  return managers_.attention->GetPagedKvCache(layer);
}

absl::StatusOr<int64_t> StreamContext::CachedFrames() const {
  OASR_RETURN_IF_ERROR(CheckLive());
  const int32_t slot = slot_;
  return managers_.attention->CachedFrames(std::span<const int32_t>(&slot, 1));
}

absl::Status StreamContext::CommitChunkPaged(int64_t chunk_frames) {
  OASR_RETURN_IF_ERROR(CheckLive());
  return managers_.attention->CommitChunkPaged(slot_, chunk_frames);
}

absl::Status StreamContext::Free() {
  OASR_RETURN_IF_ERROR(CheckLive());
  live_ = false;
  // Both releases are attempted; the first error (a broken pairing of
  // managers by the caller) is reported.
  absl::Status status = managers_.attention->FreeSlot(slot_);
  status.Update(managers_.slots->Release(slot_));
  return status;
}

}  // namespace oasr::cache
