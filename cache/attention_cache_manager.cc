#include "cache/attention_cache_manager.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cache/device_copy.h"
#include "common/check.h"
#include "common/prefetch.h"
#include "common/status.h"

namespace oasr::cache {

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

absl::StatusOr<std::unique_ptr<AttentionCacheManager>> AttentionCacheManager::Create(
    BlockPool* pool, int pad_lanes) {
  OASR_CHECK(pool != nullptr);
  if (pad_lanes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("AttentionCacheManager: pad_lanes = ", pad_lanes, ": must be >= 0"));
  }
  if (pad_lanes > 0 && pool->num_scratch_blocks() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("AttentionCacheManager: pad_lanes = ", pad_lanes,
                                                   " needs a scratch block for the padding rows; "
                                                   "build the BlockPool with scratch_blocks >= 1"));
  }
  const CacheConfig& config = pool->config();
  const int rows = config.max_batch_size + pad_lanes;
  const int cohort_capacity = static_cast<int>(std::bit_ceil(static_cast<unsigned>(rows)));
  // No stream ever holds more than blocks_per_stream blocks, so columns past
  // it would stay zero forever; leaving them out keeps the per-step mirror
  // copy small (6 columns instead of 512 at the seed's eviction defaults).
  const int width =
      static_cast<int>(std::min<int64_t>(config.max_blocks_per_seq, config.blocks_per_stream()));
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<BlockTableMirror> mirror,
                        BlockTableMirror::Create(rows, width, cohort_capacity, config.device));
  return std::unique_ptr<AttentionCacheManager>(
      new AttentionCacheManager(pool, pad_lanes, std::move(mirror)));
}

AttentionCacheManager::AttentionCacheManager(BlockPool* pool, int pad_lanes,
                                             std::unique_ptr<BlockTableMirror> mirror)
    : config_(pool->config()),
      pool_(pool),
      pad_lanes_(pad_lanes),
      mirror_(std::move(mirror)),
      slots_(config_.max_batch_size) {
  plan_slots_.resize(mirror_->cohort_capacity());
  plan_new_blocks_.resize(mirror_->cohort_capacity());
  plan_block_ids_.resize(std::max<int64_t>(mirror_->cohort_capacity(),
                                           std::max<int64_t>(0, config_.max_logical_blocks())));
  seen_epoch_.assign(config_.max_batch_size, 0);
  // The padding lanes read and write only the scratch block, at the length
  // every stream starts with.
  const int32_t start_frames =
      config_.prefill_kv_window ? static_cast<int32_t>(config_.retained_frames()) : 0;
  for (int i = 0; i < pad_lanes_; ++i) {
    int32_t* row = mirror_->MutableRow(pad_lane_slot(i));
    std::fill(row, row + mirror_->width(), pool_->scratch_block(0));
    mirror_->SetSeqlen(pad_lane_slot(i), start_frames);
  }
}

absl::Status AttentionCacheManager::CheckRange(int slot) const {
  if (slot >= 0 && slot < config_.max_batch_size) return absl::OkStatus();
  const bool pad_lane =
      slot >= config_.max_batch_size && slot < config_.max_batch_size + pad_lanes_;
  return absl::InvalidArgumentError(
      absl::StrCat("AttentionCacheManager: slot ", slot,
                   pad_lane ? " is a padding lane, never bound to a stream" : " is out of range",
                   " (stream slots are [0, ", config_.max_batch_size, "))"));
}

void AttentionCacheManager::PrefetchSlot(int slot) const {
  if (slot < 0 || slot >= config_.max_batch_size) return;
  Prefetch(&slots_[slot]);
  Prefetch(mirror_->Row(slot));
}

absl::Status AttentionCacheManager::CheckBound(int slot) const {
  OASR_RETURN_IF_ERROR(CheckRange(slot));
  if (slots_[slot].bound) return absl::OkStatus();
  return absl::NotFoundError(
      absl::StrCat("AttentionCacheManager: slot ", slot, " holds no stream"));
}

absl::Status AttentionCacheManager::AllocateSlot(int slot, GpuStream gpu_stream) {
  OASR_RETURN_IF_ERROR(CheckRange(slot));
  SlotState& state = slots_[slot];
  if (state.bound) {
    return absl::AlreadyExistsError(
        absl::StrCat("AttentionCacheManager: slot ", slot, " already holds a stream"));
  }
  int32_t* row = mirror_->MutableRow(slot);
  int64_t frames = 0;
  int32_t num_blocks = 0;
  if (config_.prefill_kv_window) {
    num_blocks = static_cast<int32_t>(config_.max_logical_blocks());
    OASR_RETURN_IF_ERROR(pool_->Allocate(std::span<int32_t>(row, num_blocks)));
    // Zeroed, not just reserved: attention multiplies even zero-weight
    // columns into P @ V, so stale or non-finite values must not be there.
    const size_t block_bytes = pool_->k_pool().nbytes() / config_.num_layers /
                               static_cast<size_t>(pool_->num_physical_blocks());
    const size_t layer_bytes = pool_->k_pool().nbytes() / config_.num_layers;
    for (int i = 0; i < num_blocks; ++i) {
      for (const TensorView& pool_view : {pool_->k_pool(), pool_->v_pool()}) {
        ZeroRows(static_cast<char*>(pool_view.data()) + row[i] * block_bytes, layer_bytes,
                 block_bytes, config_.num_layers, config_.device, gpu_stream);
      }
    }
    frames = config_.retained_frames();
  }
  state = SlotState{true, false, num_blocks, frames};
  mirror_->SetSeqlen(slot, static_cast<int32_t>(frames));
  ++num_bound_;
  return absl::OkStatus();
}

absl::Status AttentionCacheManager::FreeSlot(int slot) {
  OASR_RETURN_IF_ERROR(CheckBound(slot));
  SlotState& state = slots_[slot];
  int32_t* row = mirror_->MutableRow(slot);
  const absl::Status freed = pool_->Free(std::span<const int32_t>(row, state.num_blocks));
  // The manager is the only owner of these ids; a failure is a broken invariant.
  OASR_CHECK(freed.ok(), std::string(freed.message()));
  std::fill(row, row + state.num_blocks, 0);
  mirror_->SetSeqlen(slot, 0);
  if (cohort_epoch_ != 0 && state.cohort_epoch == cohort_epoch_) {
    // The cohort names a slot that is free now.
    mirror_->ClearCohort();
    cohort_epoch_ = 0;
  }
  state = SlotState{};
  --num_bound_;
  return absl::OkStatus();
}

int64_t AttentionCacheManager::NewBlocksFor(int slot, int64_t frames) const {
  const SlotState& s = slots_[slot];
  return std::max<int64_t>(0, CeilDiv(s.frames + frames, config_.block_size_frames) - s.num_blocks);
}

absl::Status AttentionCacheManager::CheckCapacity(int slot, int64_t new_blocks) const {
  const SlotState& s = slots_[slot];
  if (s.num_blocks + new_blocks <= config_.blocks_per_stream()) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "AttentionCacheManager: the stream in slot ", slot, " is at capacity: ", s.frames,
      " frames in ", s.num_blocks, " blocks, blocks_per_stream ", config_.blocks_per_stream(),
      " (max_stream_frames ", config_.max_stream_frames(), ")"));
}

void AttentionCacheManager::AppendBlock(int slot, int32_t block) {
  SlotState& s = slots_[slot];
  OASR_DCHECK(s.num_blocks < mirror_->width());
  mirror_->MutableRow(slot)[s.num_blocks++] = block;
}

absl::Status AttentionCacheManager::PrepareChunk(int slot) {
  const int32_t one = slot;
  return PrepareChunksBatched(std::span<const int32_t>(&one, 1));
}

absl::Status AttentionCacheManager::PrepareChunksBatched(std::span<const int32_t> slots) {
  const int n = static_cast<int>(slots.size());
  if (n > mirror_->cohort_capacity()) {
    return absl::InvalidArgumentError(absl::StrCat("AttentionCacheManager: a cohort of ", n,
                                                   " streams exceeds the cohort capacity ",
                                                   mirror_->cohort_capacity()));
  }
  // Plan: check every slot and its new blocks before touching anything.
  if (++epoch_ == 0) {
    std::fill(seen_epoch_.begin(), seen_epoch_.end(), 0);
    for (SlotState& state : slots_) state.cohort_epoch = 0;
    cohort_epoch_ = 0;
    epoch_ = 1;
  }
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    if (i + static_cast<int>(kPrefetchFar) < n) PrefetchSlot(slots[i + kPrefetchFar]);
    const int slot = slots[i];
    OASR_RETURN_IF_ERROR(CheckBound(slot));
    if (seen_epoch_[slot] == epoch_) {
      return absl::InvalidArgumentError(
          absl::StrCat("AttentionCacheManager: slot ", slot, " appears twice in one cohort"));
    }
    seen_epoch_[slot] = epoch_;
    const int64_t blocks = NewBlocksFor(slot, config_.chunk_size);
    OASR_RETURN_IF_ERROR(CheckCapacity(slot, blocks));
    plan_slots_[i] = slot;
    plan_new_blocks_[i] = static_cast<int32_t>(blocks);
    total += blocks;
  }
  // One pool call (one lock) for the whole cohort; all-or-nothing.
  OASR_RETURN_IF_ERROR(pool_->Allocate(std::span<int32_t>(plan_block_ids_.data(), total)));
  // Commit.
  mirror_->ClearCohort();
  int64_t next = 0;
  for (int i = 0; i < n; ++i) {
    const int slot = plan_slots_[i];
    for (int32_t b = 0; b < plan_new_blocks_[i]; ++b) AppendBlock(slot, plan_block_ids_[next++]);
    slots_[slot].prepared = true;
    slots_[slot].cohort_epoch = epoch_;
    mirror_->AppendCohort(slot);
  }
  cohort_epoch_ = epoch_;
  return absl::OkStatus();
}

absl::Status AttentionCacheManager::PadCohort(int width) {
  if (pad_lanes_ == 0) {
    return absl::FailedPreconditionError(
        "AttentionCacheManager::PadCohort: built without a padding lane (pad_lanes = 0)");
  }
  if (width < mirror_->cohort_size() || width > mirror_->cohort_capacity()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AttentionCacheManager::PadCohort: width ", width, " outside [cohort size ",
        mirror_->cohort_size(), ", cohort capacity ", mirror_->cohort_capacity(), "]"));
  }
  while (mirror_->cohort_size() < width) mirror_->AppendCohort(pad_lane_slot(0));
  return absl::OkStatus();
}

void AttentionCacheManager::Advance(int slot, int64_t frames) {
  SlotState& s = slots_[slot];
  s.frames += frames;
  const int64_t block = config_.block_size_frames;
  if (config_.eviction_enabled() && s.frames - block >= config_.retained_frames()) {
    // Drop whole blocks from the front while the rest still covers the window.
    const int32_t evict = static_cast<int32_t>((s.frames - config_.retained_frames()) / block);
    int32_t* row = mirror_->MutableRow(slot);
    const absl::Status freed = pool_->Free(std::span<const int32_t>(row, evict));
    OASR_CHECK(freed.ok(), std::string(freed.message()));
    std::memmove(row, row + evict, sizeof(int32_t) * (s.num_blocks - evict));
    // Blank the vacated columns so a row never names a block it does not own.
    std::fill(row + s.num_blocks - evict, row + s.num_blocks, 0);
    s.num_blocks -= evict;
    s.frames -= int64_t{evict} * block;
  }
  mirror_->SetSeqlen(slot, static_cast<int32_t>(s.frames));
}

absl::Status AttentionCacheManager::CommitChunkPaged(int slot, int64_t chunk_frames) {
  OASR_RETURN_IF_ERROR(CheckBound(slot));
  if (chunk_frames < 0 || chunk_frames > config_.chunk_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("AttentionCacheManager::CommitChunkPaged: ", chunk_frames, " frames for slot ",
                     slot, " outside [0, chunk_size ", config_.chunk_size, "]"));
  }
  const SlotState& s = slots_[slot];
  const int64_t room = int64_t{s.num_blocks} * config_.block_size_frames - s.frames;
  if (chunk_frames > room) {
    return absl::FailedPreconditionError(
        absl::StrCat("AttentionCacheManager::CommitChunkPaged: slot ", slot, " commits ",
                     chunk_frames, " frames but has room for ", room, "; call PrepareChunk first"));
  }
  Advance(slot, chunk_frames);
  return absl::OkStatus();
}

absl::StatusOr<PagedStateViews> AttentionCacheManager::GetPagedStateViews(int slot) const {
  OASR_RETURN_IF_ERROR(CheckBound(slot));
  if (!slots_[slot].prepared) {
    return absl::FailedPreconditionError(absl::StrCat("AttentionCacheManager: slot ", slot,
                                                      " has no paged state before PrepareChunk"));
  }
  return PagedStateViews{mirror_->block_table().Slice(slot, 1),
                         mirror_->cache_seqlens().Slice(slot, 1)};
}

PagedKvCacheView AttentionCacheManager::GetPagedKvCache(int layer) const {
  const KvView kv = pool_->GetKvView(layer);
  return PagedKvCacheView{kv.k,
                          kv.v,
                          mirror_->block_table(),
                          mirror_->cache_seqlens(),
                          mirror_->cohort_slots(),
                          config_.block_size_frames,
                          mirror_->width()};
}

absl::StatusOr<bool> AttentionCacheManager::AtCapacity(int slot) const {
  OASR_RETURN_IF_ERROR(CheckBound(slot));
  return slots_[slot].num_blocks + NewBlocksFor(slot, config_.chunk_size) >
         config_.blocks_per_stream();
}

absl::StatusOr<int64_t> AttentionCacheManager::CachedFrames(std::span<const int32_t> slots) const {
  int64_t frames = 0;
  for (const int32_t slot : slots) {
    OASR_RETURN_IF_ERROR(CheckBound(slot));
    frames = std::max(frames, slots_[slot].frames);
  }
  return frames;
}

absl::StatusOr<std::span<const int32_t>> AttentionCacheManager::LogicalBlocks(int slot) const {
  OASR_RETURN_IF_ERROR(CheckBound(slot));
  return std::span<const int32_t>(mirror_->Row(slot), slots_[slot].num_blocks);
}

}  // namespace oasr::cache
