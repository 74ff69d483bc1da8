#include "cache/attention_cache_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "tests/cache/cache_test_util.h"
#include "tests/cache/dense_kv_oracle.h"

namespace oasr::cache {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class AttentionCacheTest : public testing::CacheDeviceTest {
 protected:
  // Builds the pool (one scratch block) and the manager for `config`.
  void Build(const CacheConfig& config, int pad_lanes = 0) {
    absl::StatusOr<std::unique_ptr<BlockPool>> pool = BlockPool::Create(config, 1);
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = std::move(*pool);
    absl::StatusOr<std::unique_ptr<AttentionCacheManager>> att =
        AttentionCacheManager::Create(pool_.get(), pad_lanes);
    ASSERT_TRUE(att.ok()) << att.status();
    att_ = std::move(*att);
  }
  void Add(int slot) { ASSERT_TRUE(att_->AllocateSlot(slot, stream()).ok()); }
  std::vector<int32_t> Blocks(int slot) {
    const std::span<const int32_t> b = *att_->LogicalBlocks(slot);
    return {b.begin(), b.end()};
  }
  int64_t Frames(int slot) { return *att_->CachedFrames(std::vector<int32_t>{slot}); }
  // The device mirror's row and length for `slot`, after UpdateDeviceMirror.
  std::vector<int32_t> DeviceRow(int slot) {
    att_->UpdateDeviceMirror(stream());
    const std::vector<int32_t> table = Read<int32_t>(att_->mirror().block_table());
    const int w = att_->mirror().width();
    return {table.begin() + slot * w, table.begin() + (slot + 1) * w};
  }
  int32_t DeviceSeqlen(int slot) {
    att_->UpdateDeviceMirror(stream());
    return Read<int32_t>(att_->mirror().cache_seqlens())[slot];
  }
  // Row `slot` as a device view would show it: `blocks`, then zeros.
  std::vector<int32_t> Padded(std::vector<int32_t> blocks) {
    blocks.resize(att_->mirror().width(), 0);
    return blocks;
  }
  // Fills K and V of every layer at stream position `pos` with `value`, as the
  // model's paged write would: block row[pos / B], row pos % B.
  void WriteFrame(int slot, int64_t pos, float value) {
    const int B = att_->config().block_size_frames;
    const int32_t block = Blocks(slot)[pos / B];
    const int per_frame = att_->config().n_kv_head * att_->config().head_dim;
    for (int l = 0; l < att_->config().num_layers; ++l) {
      const KvView kv = pool_->GetKvBlockView(l, block);
      for (const TensorView& t : {kv.k, kv.v}) {
        Write<float>(t.Select(pos % B).Reshape({per_frame}),
                     std::vector<float>(per_frame, value + (t.data() == kv.v.data() ? 0.5f : 0)));
      }
    }
  }
  float ReadFrameK(int slot, int64_t pos, int layer = 0) {
    const int B = att_->config().block_size_frames;
    return Read<float>(pool_->GetKvBlockView(layer, Blocks(slot)[pos / B]).k.Select(pos % B))[0];
  }

  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<AttentionCacheManager> att_;
};

TEST_P(AttentionCacheTest, PagedLifecycleKeepsRowLengthAndMirrorInStep) {
  Build(SmallConfig());
  Add(3);
  EXPECT_TRUE(att_->IsBound(3));
  EXPECT_EQ(att_->num_streams(), 1);
  EXPECT_EQ(att_->GetPagedStateViews(3).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(att_->PrepareChunk(3).ok());
  EXPECT_EQ(Blocks(3), (std::vector<int32_t>{0}));
  EXPECT_EQ(pool_->num_free_blocks(), 63);
  const PagedStateViews views = *att_->GetPagedStateViews(3);
  // Eight streams share 64 blocks: no stream can hold more than 8, so the
  // table is 8 columns wide although max_blocks_per_seq is 16.
  EXPECT_EQ(views.block_table.shape(), (Shape{1, 8}));
  EXPECT_EQ(views.cache_seqlens.shape(), (Shape{1}));
  EXPECT_EQ(views.block_table.device(), device());
  att_->UpdateDeviceMirror(stream());
  EXPECT_EQ(Read<int32_t>(views.block_table), Padded({0}));
  ASSERT_TRUE(att_->CommitChunkPaged(3, 4).ok());
  EXPECT_EQ(Frames(3), 4);
  EXPECT_EQ(DeviceSeqlen(3), 4);
  ASSERT_TRUE(att_->PrepareChunk(3).ok());
  ASSERT_TRUE(att_->CommitChunkPaged(3, 4).ok());
  EXPECT_EQ(Blocks(3), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(DeviceRow(3), Padded({0, 1}));
  EXPECT_EQ(DeviceSeqlen(3), 8);
  // The views are the slot's rows of the whole-table mirror.
  EXPECT_EQ(Read<int32_t>(att_->GetPagedStateViews(3)->block_table), Padded({0, 1}));
  EXPECT_THAT(Read<int32_t>(att_->GetPagedStateViews(3)->cache_seqlens), ElementsAre(8));
  ASSERT_TRUE(att_->FreeSlot(3).ok());
  EXPECT_FALSE(att_->IsBound(3));
  EXPECT_EQ(att_->num_streams(), 0);
  EXPECT_EQ(pool_->num_free_blocks(), 64);
  EXPECT_EQ(DeviceRow(3), Padded({}));
  EXPECT_EQ(DeviceSeqlen(3), 0);
}

TEST_P(AttentionCacheTest, ViewsBeforeTheFirstPrepareAreAPreconditionError) {
  Build(SmallConfig());
  Add(0);
  const absl::Status s = att_->GetPagedStateViews(0).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("PrepareChunk"));
}

TEST_P(AttentionCacheTest, BoundUnboundAndInvalidSlotsAreStatuses) {
  Build(SmallConfig());
  Add(5);
  absl::Status s = att_->AllocateSlot(5, stream());
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(s.message()), HasSubstr("slot 5 already holds a stream"));
  // A slot that holds no stream.
  const std::vector<int32_t> unbound = {6};
  EXPECT_EQ(att_->PrepareChunk(6).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(att_->PrepareChunksBatched(unbound).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(att_->CommitChunkPaged(6, 1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(att_->GetPagedStateViews(6).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(att_->AtCapacity(6).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(att_->CachedFrames(unbound).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(att_->LogicalBlocks(6).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(att_->FreeSlot(6).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(att_->FreeSlot(5).ok());
  EXPECT_EQ(att_->FreeSlot(5).code(), absl::StatusCode::kNotFound);
  s = att_->PrepareChunk(5);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(s.message()), "AttentionCacheManager: slot 5 holds no stream");
  // Slots outside [0, max_batch_size), for every per-slot call.
  for (const int bad : {-1, 8, 100}) {
    const std::vector<int32_t> cohort = {bad};
    EXPECT_EQ(att_->AllocateSlot(bad, stream()).code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(att_->PrepareChunk(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(att_->PrepareChunksBatched(cohort).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(att_->CommitChunkPaged(bad, 1).code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(att_->AtCapacity(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(att_->CachedFrames(cohort).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(att_->FreeSlot(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_FALSE(att_->IsBound(bad));
  }
  EXPECT_THAT(std::string(att_->PrepareChunk(8).message()),
              AllOf(HasSubstr("slot 8 is out of range"), HasSubstr("[0, 8)")));
  // The freed slot serves the next stream.
  Add(5);
  EXPECT_EQ(att_->num_streams(), 1);
}

TEST_P(AttentionCacheTest, EvictionIsFifoAndKeepsTheMostRecentWindow) {
  CacheConfig c = SmallConfig();
  c.num_left_chunks = 2;  // Keep 8 frames = 2 blocks.
  Build(c);
  Add(1);
  for (int chunk = 0; chunk < 5; ++chunk) {
    ASSERT_TRUE(att_->PrepareChunk(1).ok());
    for (int f = 0; f < 4; ++f) WriteFrame(1, Frames(1) + f, chunk * 4 + f);
    ASSERT_TRUE(att_->CommitChunkPaged(1, 4).ok());
  }
  // Blocks were handed out 0..4; the first three were evicted oldest first.
  EXPECT_EQ(Blocks(1), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(Frames(1), 8);
  EXPECT_EQ(DeviceSeqlen(1), 8);
  EXPECT_EQ(DeviceRow(1), Padded({3, 4}));  // Vacated columns blanked.
  EXPECT_EQ(pool_->num_free_blocks(), 62);
  EXPECT_FALSE(pool_->IsAllocated(0));
  for (int p = 0; p < 8; ++p) EXPECT_EQ(ReadFrameK(1, p), 12 + p) << p;
  // While a chunk is in flight the stream holds one more block.
  ASSERT_TRUE(att_->PrepareChunk(1).ok());
  EXPECT_EQ(Blocks(1).size(), 3u);
  EXPECT_FALSE(*att_->AtCapacity(1));
}

TEST_P(AttentionCacheTest, EvictionWithChunksSmallerThanBlocksKeepsAtLeastTheWindow) {
  CacheConfig c = SmallConfig();
  c.chunk_size = 3;
  c.num_left_chunks = 3;  // Window 9 frames in blocks of 4.
  Build(c);
  Add(1);
  int64_t total = 0;
  for (int chunk = 0; chunk < 20; ++chunk) {
    ASSERT_TRUE(att_->PrepareChunk(1).ok());
    const int frames = chunk == 7 ? 2 : 3;  // One short chunk breaks the alignment.
    for (int f = 0; f < frames; ++f) WriteFrame(1, Frames(1) + f, total + f);
    ASSERT_TRUE(att_->CommitChunkPaged(1, frames).ok());
    total += frames;
    const int64_t held = Frames(1);
    EXPECT_GE(held, std::min<int64_t>(total, 9));
    EXPECT_LT(held, 9 + 4);
    // Blocks cover what is held, plus at most a block reserved for frames
    // the short chunk did not use.
    const int64_t blocks = static_cast<int64_t>(Blocks(1).size());
    EXPECT_GE(blocks, (held + 3) / 4);
    EXPECT_LE(blocks, (held + 3 + 3) / 4);
    EXPECT_LE(blocks, c.blocks_per_stream());
    for (int64_t p = 0; p < held; ++p) ASSERT_EQ(ReadFrameK(1, p), total - held + p) << chunk;
  }
}

TEST_P(AttentionCacheTest, FullChunksNeedNoPartlyFilledBlock) {
  // Chunks of a block each, a window of two: with full_chunks a stream holds
  // at most three blocks (the window and the chunk in flight), and a pool of
  // exactly that per stream serves long streams ending in a short chunk.
  CacheConfig c = SmallConfig();
  c.num_left_chunks = 2;
  c.full_chunks = true;
  c.max_batch_size = 2;
  c.max_num_blocks = 6;
  ASSERT_EQ(c.blocks_per_stream(), 3);
  ASSERT_TRUE(c.Validate().ok()) << c.Validate();
  Build(c);
  Add(0);
  Add(1);
  int64_t total = 0;
  for (int chunk = 0; chunk < 30; ++chunk) {
    for (int slot : {0, 1}) {
      ASSERT_TRUE(att_->PrepareChunk(slot).ok()) << chunk;
      const int frames = chunk == 29 ? 2 : 4;  // The last one short.
      for (int f = 0; f < frames; ++f) WriteFrame(slot, Frames(slot) + f, total + f);
      ASSERT_TRUE(att_->CommitChunkPaged(slot, frames).ok());
      EXPECT_LE(Blocks(slot).size(), 3u);
    }
    total += chunk == 29 ? 2 : 4;
  }
  for (int slot : {0, 1}) {
    const int64_t held = Frames(slot);
    EXPECT_EQ(held, 10);  // The window (8) and the short chunk's 2.
    for (int64_t p = 0; p < held; ++p) EXPECT_EQ(ReadFrameK(slot, p), total - held + p) << p;
  }
  // A chunk after a short one would straddle blocks: refused, unchanged.
  const absl::Status s = att_->PrepareChunk(0);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Blocks(0).size(), 3u);
}

TEST_P(AttentionCacheTest, AStreamAtCapacityIsReportedAndRefusedWithoutChange) {
  CacheConfig c = SmallConfig();
  c.max_num_blocks = 16;  // 8 streams: 2 blocks each, 8 frames.
  Build(c);
  ASSERT_EQ(c.blocks_per_stream(), 2);
  Add(1);
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(*att_->AtCapacity(1));
    ASSERT_TRUE(att_->PrepareChunk(1).ok());
    ASSERT_TRUE(att_->CommitChunkPaged(1, 4).ok());
  }
  EXPECT_TRUE(*att_->AtCapacity(1));
  const absl::Status s = att_->PrepareChunk(1);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("at capacity"), HasSubstr("8 frames")));
  EXPECT_EQ(Blocks(1).size(), 2u);
  EXPECT_EQ(pool_->num_free_blocks(), 14);
  // A short last chunk still fits in the room left.
  Add(2);
  ASSERT_TRUE(att_->PrepareChunk(2).ok());
  ASSERT_TRUE(att_->CommitChunkPaged(2, 3).ok());
  ASSERT_TRUE(att_->PrepareChunk(2).ok());
  ASSERT_TRUE(att_->CommitChunkPaged(2, 4).ok());
  EXPECT_TRUE(*att_->AtCapacity(2));
}

TEST_P(AttentionCacheTest, BatchedPrepareIsOneAllocationAndAllOrNothing) {
  Build(SmallConfig());
  const std::vector<int32_t> slots = {7, 6, 5, 4};
  for (int32_t slot : slots) Add(slot);
  ASSERT_TRUE(att_->PrepareChunksBatched(slots).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Blocks(slots[i]), (std::vector<int32_t>{i})) << i;
  att_->UpdateDeviceMirror(stream());
  EXPECT_THAT(Read<int32_t>(att_->mirror().cohort_slots()), ElementsAre(7, 6, 5, 4));
  for (int32_t slot : slots) ASSERT_TRUE(att_->CommitChunkPaged(slot, 2).ok());
  // A 4-frame chunk at length 2 needs a second block each.
  const int64_t free_before = pool_->num_free_blocks();
  const std::vector<int32_t> with_unbound = {7, 6, 3};
  EXPECT_EQ(att_->PrepareChunksBatched(with_unbound).code(), absl::StatusCode::kNotFound);
  const std::vector<int32_t> repeated = {7, 6, 7};
  const absl::Status twice = att_->PrepareChunksBatched(repeated);
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(twice.message()), HasSubstr("slot 7 appears twice"));
  EXPECT_EQ(pool_->num_free_blocks(), free_before);
  EXPECT_EQ(Blocks(7).size(), 1u);
  // The cohort did not change either.
  EXPECT_EQ(att_->mirror().cohort_size(), 4);
  ASSERT_TRUE(att_->PrepareChunksBatched(slots).ok());
  EXPECT_EQ(pool_->num_free_blocks(), free_before - 4);
  EXPECT_EQ(*att_->CachedFrames(slots), 2);
}

TEST_P(AttentionCacheTest, PoolExhaustionInABatchChangesNothing) {
  Build(SmallConfig());
  const std::vector<int32_t> slots = {0, 1, 2};
  for (int32_t slot : slots) Add(slot);
  std::vector<int32_t> taken(62);  // Another user of the shared pool.
  ASSERT_TRUE(pool_->Allocate(taken).ok());
  const absl::Status s = att_->PrepareChunksBatched(slots);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("requested 3"), HasSubstr("2 free")));
  for (int32_t slot : slots) EXPECT_TRUE(Blocks(slot).empty());
  EXPECT_EQ(pool_->num_free_blocks(), 2);
  EXPECT_EQ(att_->GetPagedStateViews(1).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_P(AttentionCacheTest, CommitChecksFramesAndReservedRoom) {
  Build(SmallConfig());
  Add(1);
  EXPECT_EQ(att_->CommitChunkPaged(1, 1).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(att_->PrepareChunk(1).ok());
  EXPECT_EQ(att_->CommitChunkPaged(1, 5).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(att_->CommitChunkPaged(1, -1).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(att_->CommitChunkPaged(1, 3).ok());
  EXPECT_EQ(att_->CommitChunkPaged(1, 2).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(att_->CommitChunkPaged(1, 1).ok());
  EXPECT_EQ(Frames(1), 4);
  // Preparing twice reserves once.
  ASSERT_TRUE(att_->PrepareChunk(1).ok());
  ASSERT_TRUE(att_->PrepareChunk(1).ok());
  EXPECT_EQ(Blocks(1).size(), 2u);
}

// (L, H, frames, 2D) with element (l, h, t, j) = base + 1000 l + 100 h + t + j / 100.
Tensor DenseChunk(const CacheConfig& c, int frames, float base) {
  Tensor t = *Tensor::Empty({c.num_layers, c.n_kv_head, frames, c.kv_last_dim()}, DType::kFloat32);
  float* p = t.data<float>();
  for (int l = 0; l < c.num_layers; ++l)
    for (int h = 0; h < c.n_kv_head; ++h)
      for (int f = 0; f < frames; ++f)
        for (int j = 0; j < c.kv_last_dim(); ++j) *p++ = base + 1000 * l + 100 * h + f + j / 100.0f;
  return t;
}

// The paged history holds what a dense (WeNet forward_chunk) cache of the
// same stream would: chunks appended through the paged write and commit,
// gathered back by the oracle in the dense layout.
TEST_P(AttentionCacheTest, PagedHistoryEqualsTheDenseCacheInWenetLayout) {
  CacheConfig c = SmallConfig();
  c.num_left_chunks = 3;
  c.chunk_size = 3;  // Chunks of 3 straddle the 4-frame blocks.
  Build(c);
  Add(1);
  Tensor dev_chunk;
  std::vector<Tensor> host_chunks;
  for (int i = 0; i < 6; ++i) {
    host_chunks.push_back(DenseChunk(c, 3, 10.0f * i));
    dev_chunk = *Tensor::Empty(host_chunks.back().shape(), DType::kFloat32, device());
    Write<float>(dev_chunk.view(),
                 std::vector<float>(host_chunks.back().data<float>(),
                                    host_chunks.back().data<float>() + host_chunks.back().numel()));
    ASSERT_TRUE(testing::AppendDenseChunk(*att_, 1, dev_chunk.view(), stream()).ok());
  }
  // 18 frames written; the window is 9 and eviction drops whole blocks:
  // 18 - 2 * 4 = 10 frames are kept, the last 10 written.
  ASSERT_EQ(Frames(1), 10);
  const Tensor stacked = *testing::GatherDenseHistory(*att_, 1, stream());
  ASSERT_EQ(stacked.shape(), (Shape{2, 2, 10, 6}));
  const std::vector<float> got = Read<float>(stacked.view());
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h)
      for (int t = 0; t < 10; ++t) {
        const int global = 8 + t;  // Position in the whole stream.
        const Tensor& src = host_chunks[global / 3];
        for (int j = 0; j < 6; ++j) {
          const float want = src.data<float>()[((l * 2 + h) * 3 + global % 3) * 6 + j];
          ASSERT_EQ(got[((l * 2 + h) * 10 + t) * 6 + j], want) << l << h << t << j;
        }
      }
}

// The oracle refuses what a dense cache could not hold, before the manager
// is touched, so a wrong chunk in a test shows as a status, not as garbage.
TEST_P(AttentionCacheTest, TheDenseOracleRefusesBadChunksAndChangesNothing) {
  Build(SmallConfig());
  Add(1);
  const CacheConfig& c = att_->config();
  Tensor wrong = *Tensor::Zeros({2, 3, 4, 6}, DType::kFloat32, device());
  absl::Status s = testing::AppendDenseChunk(*att_, 1, wrong.view(), stream());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("[2, 3, 4, 6]"), HasSubstr("expected [2, 2")));
  Tensor wide =
      *Tensor::Zeros({c.num_layers, c.n_kv_head, 5, c.kv_last_dim()}, DType::kFloat32, device());
  EXPECT_EQ(testing::AppendDenseChunk(*att_, 1, wide.view(), stream()).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor ints =
      *Tensor::Zeros({c.num_layers, c.n_kv_head, 2, c.kv_last_dim()}, DType::kInt32, device());
  EXPECT_THAT(std::string(testing::AppendDenseChunk(*att_, 1, ints.view(), stream()).message()),
              HasSubstr("int32"));
  EXPECT_EQ(Frames(1), 0);
  EXPECT_EQ(pool_->num_free_blocks(), 64);
  EXPECT_EQ(testing::GatherDenseHistory(*att_, 2, stream()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(AttentionCacheTest, PrefillGivesAZeroedWindowAndAConstantLength) {
  CacheConfig c = SmallConfig();
  c.num_left_chunks = 2;
  c.prefill_kv_window = true;
  Build(c, 1);
  // Dirty the whole pool so "zeroed" is observable.
  Write<float>(pool_->k_pool(), std::vector<float>(pool_->k_pool().numel(), 7.0f));
  Write<float>(pool_->v_pool(), std::vector<float>(pool_->v_pool().numel(), 7.0f));
  Add(2);
  const std::vector<int32_t> window = Blocks(2);
  ASSERT_EQ(window.size(), 2u);
  EXPECT_EQ(Frames(2), 8);
  const std::vector<float> k = Read<float>(pool_->k_pool());
  const std::vector<float> v = Read<float>(pool_->v_pool());
  const int per_block = 4 * 2 * 3, nb = 65;
  for (int l = 0; l < 2; ++l)
    for (int32_t b : window)
      for (int i = 0; i < per_block; ++i) {
        ASSERT_EQ(k[(l * nb + b) * per_block + i], 0.0f);
        ASSERT_EQ(v[(l * nb + b) * per_block + i], 0.0f);
      }
  EXPECT_EQ(k[(1 * nb + 10) * per_block], 7.0f);  // Other blocks untouched.
  for (int chunk = 0; chunk < 3; ++chunk) {
    ASSERT_TRUE(att_->PrepareChunk(2).ok());
    EXPECT_EQ(DeviceSeqlen(2), 8);
    ASSERT_TRUE(att_->CommitChunkPaged(2, 4).ok());
    EXPECT_EQ(Frames(2), 8);
  }
  // The padding lane starts at the same length and points only at scratch.
  const int pad = att_->pad_lane_slot();
  EXPECT_EQ(DeviceSeqlen(pad), 8);
  EXPECT_EQ(DeviceRow(pad), std::vector<int32_t>(4, pool_->scratch_block()));
}

TEST_P(AttentionCacheTest, PaddingLanePadsTheCohortOntoTheScratchBlock) {
  Build(SmallConfig(), 1);
  const int pad = att_->pad_lane_slot();
  EXPECT_EQ(pad, 8);
  EXPECT_EQ(DeviceRow(pad), std::vector<int32_t>(8, 64));
  EXPECT_EQ(DeviceSeqlen(pad), 0);
  Add(0);
  Add(1);
  const std::vector<int32_t> slots = {1, 0};
  ASSERT_TRUE(att_->PrepareChunksBatched(slots).ok());
  ASSERT_TRUE(att_->PadCohort(4).ok());
  att_->UpdateDeviceMirror(stream());
  const PagedKvCacheView view = att_->GetPagedKvCache(1);
  EXPECT_THAT(Read<int32_t>(view.cohort_slots), ElementsAre(1, 0, 8, 8));
  EXPECT_EQ(view.block_table.shape(), (Shape{9, 8}));
  EXPECT_EQ(view.cache_seqlens.shape(), (Shape{9}));
  EXPECT_EQ(view.k_cache.shape(), (Shape{65, 4, 2, 3}));
  EXPECT_EQ(view.k_cache.data(), pool_->GetKvView(1).k.data());
  EXPECT_EQ(view.block_size, 4);
  EXPECT_EQ(view.block_table_stride, 8);
  EXPECT_EQ(att_->PadCohort(3).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(att_->PadCohort(17).code(), absl::StatusCode::kInvalidArgument);
  // Freeing a stream outside the cohort leaves it; so does a cohort refused
  // (a slot twice), which changes nothing.
  Add(2);
  Add(3);
  ASSERT_TRUE(att_->FreeSlot(2).ok());
  EXPECT_EQ(att_->mirror().cohort_size(), 4);
  const std::vector<int32_t> twice = {3, 0, 3};
  EXPECT_EQ(att_->PrepareChunksBatched(twice).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(att_->mirror().cohort_size(), 4);
  ASSERT_TRUE(att_->FreeSlot(3).ok());
  EXPECT_EQ(att_->mirror().cohort_size(), 4);
  // Freeing a stream of the cohort clears it.
  ASSERT_TRUE(att_->FreeSlot(0).ok());
  EXPECT_EQ(att_->mirror().cohort_size(), 0);
  // The one left in it, freed later, finds nothing to clear.
  const std::vector<int32_t> one = {1};
  ASSERT_TRUE(att_->PrepareChunksBatched(one).ok());
  EXPECT_EQ(att_->mirror().cohort_size(), 1);
  Add(0);
  ASSERT_TRUE(att_->FreeSlot(0).ok());
  EXPECT_EQ(att_->mirror().cohort_size(), 1);
  ASSERT_TRUE(att_->FreeSlot(1).ok());
  EXPECT_EQ(att_->mirror().cohort_size(), 0);
}

TEST_P(AttentionCacheTest, PaddingNeedsALaneAndAScratchBlock) {
  Build(SmallConfig());
  EXPECT_EQ(att_->PadCohort(2).code(), absl::StatusCode::kFailedPrecondition);
  auto no_scratch = *BlockPool::Create(SmallConfig(), 0);
  const absl::Status s = AttentionCacheManager::Create(no_scratch.get(), 1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("scratch"));
}

TEST_P(AttentionCacheTest, TheMirrorIsOneCopyPerStepOnCudaAndNoneOnTheCpu) {
  CacheConfig c = SmallConfig();
  c.max_batch_size = 64;
  c.max_num_blocks = 64 * 4;
  c.num_left_chunks = 1;
  Build(c);
  std::vector<int32_t> slots(64);
  std::iota(slots.begin(), slots.end(), 0);
  for (int32_t slot : slots) Add(slot);
  att_->UpdateDeviceMirror(stream());
  const int64_t before = att_->mirror().num_copies();
  for (int step = 0; step < 10; ++step) {
    ASSERT_TRUE(att_->PrepareChunksBatched(slots).ok());
    att_->UpdateDeviceMirror(stream());
    for (int32_t slot : slots) ASSERT_TRUE(att_->CommitChunkPaged(slot, 4).ok());
  }
  att_->UpdateDeviceMirror(stream());
  att_->UpdateDeviceMirror(stream());  // Nothing changed: no copy.
  EXPECT_EQ(att_->mirror().num_copies() - before, on_cuda() ? 11 : 0);
  // And the device tables equal the host tables.
  EXPECT_EQ(Read<int32_t>(att_->mirror().block_table()),
            Read<int32_t>(att_->mirror().host_block_table()));
  EXPECT_EQ(Read<int32_t>(att_->mirror().cache_seqlens()),
            Read<int32_t>(att_->mirror().host_cache_seqlens()));
}

OASR_INSTANTIATE_CACHE_DEVICE_TEST(AttentionCacheTest);

}  // namespace
}  // namespace oasr::cache
