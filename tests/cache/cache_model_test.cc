// Randomised model-based test of the paged attention cache: a plain model of
// every stream (its expected blocks in logical order, cache length and frames
// written) is driven alongside the real BlockPool + AttentionCacheManager by
// random operations -- allocate, prepare, batched prepare, commits of paged
// writes and of dense chunks through the dense oracle (with eviction), free,
// queries and invalid calls -- and after every
// operation the invariants are checked: no block is owned twice, free + owned
// = total, every block-table row (host, and the device mirror after an
// update) matches its stream's blocks, cache lengths match committed frames,
// and eviction keeps the most recent window (checked through the K/V values
// written at every position, and through the oracle's dense gather).
//
// OASR_CACHE_FUZZ_OPS scales the operation count per geometry (default 100000).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cache/attention_cache_manager.h"
#include "cache/block_pool.h"
#include "cache/stream_slot_pool.h"
#include "tests/cache/cache_test_util.h"
#include "tests/cache/dense_kv_oracle.h"

namespace oasr::cache {
namespace {

int64_t OpsFromEnv() {
  const char* env = std::getenv("OASR_CACHE_FUZZ_OPS");
  return env != nullptr ? std::max<int64_t>(1, std::atoll(env)) : 100000;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ASSERT for the per-element checks run after every operation: a plain
// comparison, with gtest's (costly) machinery only on failure.
#define MODEL_CHECK(cond) \
  if (cond) {             \
  } else                  \
    FAIL() << "check failed: " #cond " "

struct ModelStream {
  int64_t id = 0;  // The model's name for it (the V markers); the manager knows only the slot.
  int slot = 0;
  std::deque<int32_t> blocks;
  int64_t held = 0;     // Cache length.
  int64_t total = 0;    // Frames ever held, prefilled ones included.
  int64_t prefill = 0;  // Leading frames that are prefilled zeros.
};

class CacheModelTest : public testing::CacheDeviceTest {
 protected:
  void Run(const CacheConfig& config, uint64_t seed);

 private:
  // --- The model and its checks ---
  float KMarker(const ModelStream& s, int64_t frame) const {
    return frame < s.prefill ? 0.0f : static_cast<float>(frame % (1 << 22) + 1);
  }
  float VMarker(const ModelStream& s, int64_t frame) const {
    return frame < s.prefill ? 0.0f : static_cast<float>(s.id % 4096) + 0.5f;
  }
  bool AtCapacity(const ModelStream& s) const {
    const int64_t need =
        std::max<int64_t>(0, CeilDiv(s.held + c_.chunk_size, B()) - int64_t(s.blocks.size()));
    return int64_t(s.blocks.size()) + need > c_.blocks_per_stream();
  }
  int B() const { return c_.block_size_frames; }
  // Checks that the manager's blocks for `s` are the model's minus the first
  // `evicted`, plus `expected` new ones that nobody owned, and appends those
  // to the model (eviction itself is applied by ModelAdvance).
  void TakeNewBlocks(ModelStream& s, int64_t expected, int64_t evicted = 0);
  // Blocks a commit of `frames` evicts from `s`.
  int64_t EvictionsFor(const ModelStream& s, int64_t frames) const {
    const int64_t held = s.held + frames;
    if (!c_.eviction_enabled() || held - B() < c_.retained_frames()) return 0;
    return (held - c_.retained_frames()) / B();
  }
  // Applies a commit of `frames` to the model, eviction included.
  void ModelAdvance(ModelStream& s, int64_t frames);
  void WriteFrame(const ModelStream& s, int64_t pos);
  void CheckStructure(bool deep);
  void CheckWindow(const ModelStream& s);
  void CheckMirror();

  // --- Operations ---
  void OpAllocate();
  void OpFree(std::mt19937_64& rng);
  void OpPrepare(ModelStream& s);
  void OpBatchPrepare(std::mt19937_64& rng);
  void OpCommit(ModelStream& s, int64_t frames);
  void OpDenseCommit(ModelStream& s, int64_t frames);
  void OpStacked(const ModelStream& s);

  CacheConfig c_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<AttentionCacheManager> att_;
  std::unique_ptr<StreamSlotPool> slots_;
  std::vector<ModelStream> live_;
  int64_t next_id_ = 0;
  Tensor dense_;                        // Staging for dense chunks on the device.
  std::vector<float> k_host_, v_host_;  // Pool contents (refreshed on CUDA).
  std::vector<int64_t> owner_;          // Block -> owning stream per the model, or -1.
  std::vector<int64_t> seen_owner_;     // Scratch for CheckStructure.
  int64_t stats_evicted_ = 0, stats_rejected_ = 0, stats_freed_ = 0;
};

void CacheModelTest::TakeNewBlocks(ModelStream& s, int64_t expected, int64_t evicted) {
  const std::span<const int32_t> got = *att_->LogicalBlocks(s.slot);
  const int64_t kept = int64_t(s.blocks.size()) - evicted;
  ASSERT_GE(kept, 0) << "these geometries never evict a block in the commit that allocates it";
  ASSERT_EQ(int64_t(got.size()), kept + expected) << "stream " << s.id;
  for (int64_t i = 0; i < kept; ++i) ASSERT_EQ(got[i], s.blocks[evicted + i]) << "stream " << s.id;
  for (int64_t i = kept; i < int64_t(got.size()); ++i) {
    ASSERT_EQ(owner_[got[i]], -1) << "block " << got[i] << " handed to stream " << s.id
                                  << " is owned by " << owner_[got[i]];
    ASSERT_TRUE(pool_->IsAllocated(got[i]));
    owner_[got[i]] = s.id;
    s.blocks.push_back(got[i]);
  }
}

void CacheModelTest::ModelAdvance(ModelStream& s, int64_t frames) {
  s.held += frames;
  s.total += frames;
  if (c_.eviction_enabled() && s.held - B() >= c_.retained_frames()) {
    const int64_t k = (s.held - c_.retained_frames()) / B();
    for (int64_t i = 0; i < k; ++i) {
      ASSERT_FALSE(pool_->IsAllocated(s.blocks.front())) << "evicted block still allocated";
      owner_[s.blocks.front()] = -1;
      s.blocks.pop_front();
    }
    s.held -= k * B();
    stats_evicted_ += k;
  }
}

void CacheModelTest::WriteFrame(const ModelStream& s, int64_t pos) {
  // What the model's paged write does: position p -> block blocks[p / B], row p % B.
  const int32_t block = s.blocks[pos / B()];
  const int64_t per_frame = int64_t{c_.n_kv_head} * c_.head_dim;
  const int64_t frame = s.total - s.held + pos;
  const std::vector<float> k(per_frame, KMarker(s, frame)), v(per_frame, VMarker(s, frame));
  for (int l = 0; l < c_.num_layers; ++l) {
    const KvView kv = pool_->GetKvBlockView(l, block);
    Write<float>(kv.k.Select(pos % B()).Reshape({per_frame}), k);
    Write<float>(kv.v.Select(pos % B()).Reshape({per_frame}), v);
  }
}

void CacheModelTest::CheckWindow(const ModelStream& s) {
  ASSERT_EQ(*att_->CachedFrames(std::vector<int32_t>{s.slot}), s.held);
  if (c_.eviction_enabled()) {
    // The most recent window is kept, and no more than a block beyond it.
    ASSERT_GE(s.held, std::min(s.total, c_.retained_frames()));
    ASSERT_LT(s.held, c_.retained_frames() + B());
  } else {
    ASSERT_EQ(s.held, s.total);
  }
  if (on_cuda()) {
    ReadBytes(pool_->k_pool(), k_host_.data());
    ReadBytes(pool_->v_pool(), v_host_.data());
  }
  const float* k = on_cuda() ? k_host_.data() : static_cast<const float*>(pool_->k_pool().data());
  const float* v = on_cuda() ? v_host_.data() : static_cast<const float*>(pool_->v_pool().data());
  const int64_t per_frame = int64_t{c_.n_kv_head} * c_.head_dim;
  const int64_t per_layer = pool_->num_physical_blocks() * B() * per_frame;
  for (int64_t p = 0; p < s.held; ++p) {
    const int64_t frame = s.total - s.held + p;
    const int64_t at = (int64_t{s.blocks[p / B()]} * B() + p % B()) * per_frame;
    for (int l : {0, c_.num_layers - 1}) {
      MODEL_CHECK(k[l * per_layer + at] == KMarker(s, frame))
          << "K of stream " << s.id << " pos " << p;
      MODEL_CHECK(v[l * per_layer + at + per_frame - 1] == VMarker(s, frame))
          << "V of stream " << s.id << " pos " << p;
    }
  }
}

void CacheModelTest::CheckStructure(bool deep) {
  const BlockTableMirror& m = att_->mirror();
  std::vector<int64_t>& owner = seen_owner_;
  std::fill(owner.begin(), owner.end(), -1);
  std::vector<uint8_t> bound(c_.max_batch_size, 0);
  int64_t owned = 0;
  for (const ModelStream& s : live_) {
    if (deep) {
      ASSERT_TRUE(att_->IsBound(s.slot));
    }
    bound[s.slot] = 1;
    MODEL_CHECK(m.Seqlen(s.slot) == s.held) << "cache_seqlens of stream " << s.id;
    const int32_t* row = m.Row(s.slot);
    const int n = static_cast<int>(s.blocks.size());
    for (int i = 0; i < m.width(); ++i) {
      MODEL_CHECK(row[i] == (i < n ? s.blocks[i] : 0))
          << "block table row of stream " << s.id << " column " << i;
    }
    for (int32_t b : s.blocks) {
      MODEL_CHECK(b >= 0 && b < pool_->num_blocks()) << b;
      MODEL_CHECK(owner[b] == -1) << "block " << b << " owned by " << owner[b] << " and " << s.id;
      owner[b] = s.id;
      if (deep) {
        MODEL_CHECK(pool_->IsAllocated(b)) << "owned block " << b << " is free";
      }
    }
    owned += n;
    MODEL_CHECK(n <= c_.blocks_per_stream()) << "stream " << s.id << " holds " << n;
  }
  ASSERT_EQ(pool_->num_free_blocks() + owned, pool_->num_blocks()) << "free + owned != total";
  ASSERT_EQ(att_->num_streams(), int(live_.size()));
  if (!deep) return;
  for (int slot = 0; slot < c_.max_batch_size; ++slot) {
    if (bound[slot]) continue;
    ASSERT_FALSE(att_->IsBound(slot)) << "unbound slot " << slot;
    ASSERT_EQ(m.Seqlen(slot), 0) << "unbound slot " << slot;
    for (int i = 0; i < m.width(); ++i) ASSERT_EQ(m.Row(slot)[i], 0) << "unbound slot " << slot;
  }
  for (int lane = 0; lane < att_->pad_lanes(); ++lane) {
    const int32_t* row = m.Row(att_->pad_lane_slot(lane));
    for (int i = 0; i < m.width(); ++i) ASSERT_EQ(row[i], pool_->scratch_block());
  }
}

void CacheModelTest::CheckMirror() {
  att_->UpdateDeviceMirror(stream());
  const BlockTableMirror& m = att_->mirror();
  ASSERT_EQ(Read<int32_t>(m.block_table()), Read<int32_t>(m.host_block_table()));
  ASSERT_EQ(Read<int32_t>(m.cache_seqlens()), Read<int32_t>(m.host_cache_seqlens()));
  const std::vector<int32_t> cohort = Read<int32_t>(m.cohort_slots());
  for (int i = 0; i < m.cohort_size(); ++i) ASSERT_EQ(cohort[i], m.CohortSlot(i));
}

void CacheModelTest::OpAllocate() {
  const int slot = *slots_->Acquire();
  ModelStream s;
  s.id = next_id_++;
  s.slot = slot;
  ASSERT_TRUE(att_->AllocateSlot(slot, stream()).ok());
  ASSERT_EQ(att_->AllocateSlot(slot, stream()).code(), absl::StatusCode::kAlreadyExists);
  if (c_.prefill_kv_window) {
    ASSERT_NO_FATAL_FAILURE(TakeNewBlocks(s, c_.max_logical_blocks()));
    s.held = s.total = s.prefill = c_.retained_frames();
  }
  live_.push_back(std::move(s));
  CheckWindow(live_.back());
}

void CacheModelTest::OpFree(std::mt19937_64& rng) {
  // Prefer a stream at capacity: the engine finishes those.
  size_t pick = rng() % live_.size();
  for (size_t i = 0; i < live_.size(); ++i) {
    if (AtCapacity(live_[i])) pick = i;
  }
  ModelStream s = std::move(live_[pick]);
  live_.erase(live_.begin() + pick);
  ASSERT_TRUE(att_->FreeSlot(s.slot).ok());
  for (int32_t b : s.blocks) {
    ASSERT_FALSE(pool_->IsAllocated(b));
    owner_[b] = -1;
  }
  ASSERT_TRUE(slots_->Release(s.slot).ok());
  ASSERT_EQ(att_->FreeSlot(s.slot).code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(att_->PrepareChunk(s.slot).code(), absl::StatusCode::kNotFound);
  ++stats_freed_;
}

void CacheModelTest::OpPrepare(ModelStream& s) {
  ASSERT_EQ(*att_->AtCapacity(s.slot), AtCapacity(s));
  const int64_t need =
      std::max<int64_t>(0, CeilDiv(s.held + c_.chunk_size, B()) - int64_t(s.blocks.size()));
  const absl::Status status = att_->PrepareChunk(s.slot);
  if (AtCapacity(s)) {
    ASSERT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
    ++stats_rejected_;
    ASSERT_NO_FATAL_FAILURE(TakeNewBlocks(s, 0));
    return;
  }
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_NO_FATAL_FAILURE(TakeNewBlocks(s, need));
  ASSERT_TRUE(att_->GetPagedStateViews(s.slot).ok());
}

void CacheModelTest::OpBatchPrepare(std::mt19937_64& rng) {
  std::vector<size_t> idx(live_.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::shuffle(idx.begin(), idx.end(), rng);
  idx.resize(1 + rng() % std::min<size_t>(idx.size(), 64));
  std::vector<int32_t> slots;
  bool any_full = false;
  int64_t need_total = 0;
  for (size_t i : idx) {
    slots.push_back(live_[i].slot);
    any_full |= AtCapacity(live_[i]);
    need_total += std::max<int64_t>(
        0, CeilDiv(live_[i].held + c_.chunk_size, B()) - int64_t(live_[i].blocks.size()));
  }
  const int64_t free_before = pool_->num_free_blocks();
  // 1 in 20 each: a slot that holds no stream (or, with every slot bound,
  // one out of range), a repeated slot.
  const int invalid = rng() % 20;
  if (invalid <= 1) {
    std::vector<int32_t> bad = slots;
    int32_t extra = slots[0];
    if (invalid == 0) {
      extra = -7;
      for (int32_t slot = 0; slot < c_.max_batch_size; ++slot) {
        if (!slots_->IsBound(slot)) extra = slot;
      }
    }
    bad.insert(bad.begin() + rng() % (bad.size() + 1), extra);
    // The first offending slot in order decides the error.
    absl::StatusCode want = absl::StatusCode::kOk;
    std::vector<int32_t> seen;
    for (int32_t slot : bad) {
      const auto it = std::find_if(live_.begin(), live_.end(),
                                   [slot](const ModelStream& m) { return m.slot == slot; });
      if (it == live_.end()) {
        want = slot >= 0 && slot < c_.max_batch_size ? absl::StatusCode::kNotFound
                                                     : absl::StatusCode::kInvalidArgument;
      } else if (std::count(seen.begin(), seen.end(), slot) > 0) {
        want = absl::StatusCode::kInvalidArgument;
      } else if (AtCapacity(*it)) {
        want = absl::StatusCode::kResourceExhausted;
      }
      if (want != absl::StatusCode::kOk) break;
      seen.push_back(slot);
    }
    const absl::Status status = att_->PrepareChunksBatched(bad);
    ASSERT_EQ(status.code(), want) << status;
    ASSERT_EQ(pool_->num_free_blocks(), free_before);
    ++stats_rejected_;
    return;
  }
  const absl::Status status = att_->PrepareChunksBatched(slots);
  if (any_full) {
    ASSERT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
    ASSERT_EQ(pool_->num_free_blocks(), free_before);
    ++stats_rejected_;
    return;
  }
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(pool_->num_free_blocks(), free_before - need_total);
  for (size_t i : idx) {
    ModelStream& s = live_[i];
    ASSERT_NO_FATAL_FAILURE(TakeNewBlocks(
        s, std::max<int64_t>(0, CeilDiv(s.held + c_.chunk_size, B()) - int64_t(s.blocks.size()))));
  }
  ASSERT_EQ(att_->mirror().cohort_size(), int(slots.size()));
  for (size_t b = 0; b < idx.size(); ++b) {
    ASSERT_EQ(att_->mirror().CohortSlot(b), live_[idx[b]].slot);
  }
  if (on_cuda()) CheckMirror();
  int64_t longest = 0;
  for (size_t i : idx) longest = std::max(longest, live_[i].held);
  ASSERT_EQ(*att_->CachedFrames(slots), longest);
}

void CacheModelTest::OpCommit(ModelStream& s, int64_t frames) {
  const int64_t room = int64_t(s.blocks.size()) * B() - s.held;
  if (frames > room) {
    ASSERT_EQ(att_->CommitChunkPaged(s.slot, frames).code(), absl::StatusCode::kFailedPrecondition);
    ++stats_rejected_;
    return;
  }
  // The encoder writes the chunk at positions [held, held + frames), then commits.
  for (int64_t p = s.held; p < s.held + frames; ++p) WriteFrame(s, p);
  ASSERT_TRUE(att_->CommitChunkPaged(s.slot, frames).ok());
  ASSERT_NO_FATAL_FAILURE(ModelAdvance(s, frames));
  ASSERT_NO_FATAL_FAILURE(TakeNewBlocks(s, 0));
  CheckWindow(s);
}

void CacheModelTest::OpDenseCommit(ModelStream& s, int64_t frames) {
  // A dense chunk through the oracle: PrepareChunk, its paged write, commit.
  const int L = c_.num_layers, H = c_.n_kv_head, D = c_.head_dim;
  const TensorView chunk(dense_.data(), DType::kFloat32, {L, H, frames, 2 * D}, device());
  if (frames > c_.chunk_size) {
    ASSERT_EQ(testing::AppendDenseChunk(*att_, s.slot, chunk, stream()).code(),
              absl::StatusCode::kInvalidArgument);
    ASSERT_NO_FATAL_FAILURE(TakeNewBlocks(s, 0));
    ++stats_rejected_;
    return;
  }
  std::vector<float> host(chunk.numel());
  ModelStream after = s;
  after.held += frames;
  after.total += frames;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h)
      for (int64_t f = 0; f < frames; ++f) {
        const int64_t frame = after.total - frames + f;
        for (int d = 0; d < 2 * D; ++d) {
          host[((l * H + h) * frames + f) * 2 * D + d] =
              d < D ? KMarker(after, frame) : VMarker(after, frame);
        }
      }
  Write<float>(chunk, host);
  // PrepareChunk reserves room for a full chunk, whatever this one holds.
  const int64_t need =
      std::max<int64_t>(0, CeilDiv(s.held + c_.chunk_size, B()) - int64_t(s.blocks.size()));
  const absl::Status status = testing::AppendDenseChunk(*att_, s.slot, chunk, stream());
  if (AtCapacity(s)) {
    ASSERT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
    ASSERT_NO_FATAL_FAILURE(TakeNewBlocks(s, 0));
    ++stats_rejected_;
    return;
  }
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_NO_FATAL_FAILURE(TakeNewBlocks(s, need, EvictionsFor(s, frames)));
  ASSERT_NO_FATAL_FAILURE(ModelAdvance(s, frames));
  CheckWindow(s);
}

void CacheModelTest::OpStacked(const ModelStream& s) {
  const Tensor stacked = *testing::GatherDenseHistory(*att_, s.slot, stream());
  ASSERT_EQ(stacked.shape(), (Shape{c_.num_layers, c_.n_kv_head, s.held, c_.kv_last_dim()}));
  const std::vector<float> got = Read<float>(stacked.view());
  const int64_t last = c_.kv_last_dim();
  for (int64_t t = 0; t < s.held; ++t) {
    const int64_t frame = s.total - s.held + t;
    ASSERT_EQ(got[t * last], KMarker(s, frame)) << "stacked K of stream " << s.id;
    ASSERT_EQ(got[t * last + last - 1], VMarker(s, frame)) << "stacked V of stream " << s.id;
  }
}

void CacheModelTest::Run(const CacheConfig& config, uint64_t seed) {
  c_ = config;
  pool_ = *BlockPool::Create(c_, 1);
  att_ = *AttentionCacheManager::Create(pool_.get(), 1);
  slots_ = std::make_unique<StreamSlotPool>(c_.max_batch_size, 1);
  dense_ = *Tensor::Zeros({c_.num_layers, c_.n_kv_head, c_.chunk_size + 1, c_.kv_last_dim()},
                          DType::kFloat32, device());
  owner_.assign(pool_->num_blocks(), -1);
  seen_owner_.assign(pool_->num_blocks(), -1);
  k_host_.resize(pool_->k_pool().numel());
  v_host_.resize(pool_->v_pool().numel());
  std::mt19937_64 rng(seed);
  const int64_t ops = OpsFromEnv();
  for (int64_t op = 0; op < ops; ++op) {
    const int r = static_cast<int>(rng() % 100);
    SCOPED_TRACE("op " + std::to_string(op) + " kind " + std::to_string(r));
    if (live_.empty() || (r < 12 && int(live_.size()) < c_.max_batch_size)) {
      OpAllocate();
    } else if (r < 18) {
      OpFree(rng);
    } else if (r < 20) {
      // A slot out of range, then one that holds no stream (when there is one).
      const int out_of_range =
          rng() % 2 == 0 ? -1 - int(rng() % 1000) : c_.max_batch_size + int(rng() % 1000);
      ASSERT_EQ(att_->CommitChunkPaged(out_of_range, 1).code(), absl::StatusCode::kInvalidArgument);
      ASSERT_EQ(att_->GetPagedStateViews(out_of_range).status().code(),
                absl::StatusCode::kInvalidArgument);
      const int unbound = int(rng() % c_.max_batch_size);
      if (!slots_->IsBound(unbound)) {
        ASSERT_EQ(att_->CommitChunkPaged(unbound, 1).code(), absl::StatusCode::kNotFound);
        ASSERT_EQ(att_->GetPagedStateViews(unbound).status().code(), absl::StatusCode::kNotFound);
      }
    } else if (r < 33) {
      OpPrepare(live_[rng() % live_.size()]);
    } else if (r < 45) {
      OpBatchPrepare(rng);
    } else if (r < 82) {
      OpCommit(live_[rng() % live_.size()], int64_t(rng() % (c_.chunk_size + 1)));
    } else if (r < 96) {
      OpDenseCommit(live_[rng() % live_.size()], 1 + int64_t(rng() % (c_.chunk_size + 1)));
    } else {
      OpStacked(live_[rng() % live_.size()]);
    }
    if (HasFatalFailure()) return;
    CheckStructure(/*deep=*/op % 64 == 0);
    if (HasFatalFailure()) return;
    if (op % 1000 == 999) {
      CheckMirror();
      for (const ModelStream& s : live_) CheckWindow(s);
      if (HasFatalFailure()) return;
    }
  }
  // The run must have exercised what it claims to.
  EXPECT_GT(next_id_, c_.max_batch_size) << "streams were recycled";
  EXPECT_GT(stats_freed_, 0);
  EXPECT_GT(stats_rejected_, 0);
  if (c_.eviction_enabled()) {
    EXPECT_GT(stats_evicted_, 0);
  }
  std::printf(
      "model run: %lld ops, %lld streams, %lld blocks evicted, %lld calls refused, "
      "%lld streams freed\n",
      static_cast<long long>(ops), static_cast<long long>(next_id_),
      static_cast<long long>(stats_evicted_), static_cast<long long>(stats_rejected_),
      static_cast<long long>(stats_freed_));
}

CacheConfig ModelConfig(Device device) {
  CacheConfig c;
  c.num_layers = 2;
  c.n_kv_head = 1;
  c.head_dim = 2;
  c.hidden_dim = 4;
  c.dtype = DType::kFloat32;
  c.device = device;
  c.max_batch_size = 256;
  return c;
}

TEST_P(CacheModelTest, EvictionWithChunksSmallerThanBlocks) {
  CacheConfig c = ModelConfig(device());
  c.chunk_size = 3;
  c.block_size_frames = 4;
  c.num_left_chunks = 3;  // A 9-frame window: not a whole number of blocks.
  c.max_blocks_per_seq = 8;
  c.max_num_blocks = c.min_pool_blocks() + 32;
  Run(c, 1);
}

TEST_P(CacheModelTest, UnlimitedHistoryUpToCapacity) {
  CacheConfig c = ModelConfig(device());
  c.chunk_size = 4;
  c.block_size_frames = 4;
  c.num_left_chunks = -1;
  c.max_blocks_per_seq = 16;
  c.max_num_blocks = 256 * 6;  // Six blocks (24 frames) per stream.
  Run(c, 2);
}

TEST_P(CacheModelTest, PrefilledWindow) {
  CacheConfig c = ModelConfig(device());
  c.chunk_size = 4;
  c.block_size_frames = 4;
  c.num_left_chunks = 2;
  c.prefill_kv_window = true;
  c.max_blocks_per_seq = 4;
  c.max_num_blocks = c.min_pool_blocks();
  Run(c, 3);
}

OASR_INSTANTIATE_CACHE_DEVICE_TEST(CacheModelTest);

}  // namespace
}  // namespace oasr::cache
