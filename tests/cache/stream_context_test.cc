#include "cache/stream_context.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "cache/cnn_cache_manager.h"
#include "tests/cache/cache_test_util.h"
#include "tests/cache/dense_kv_oracle.h"

namespace oasr::cache {
namespace {

using ::testing::HasSubstr;

class StreamContextTest : public testing::CacheDeviceTest {
 protected:
  void SetUp() override {
    testing::CacheDeviceTest::SetUp();
    if (IsSkipped()) return;
    config_ = SmallConfig();
    config_.num_left_chunks = 2;
    pool_ = *BlockPool::Create(config_, 1);
    att_ = *AttentionCacheManager::Create(pool_.get(), 1);
    // The conv context as a model declares it, next to a persistent state.
    std::vector<StreamStateSpec> specs = {CnnCacheManager::Spec(config_),
                                          {"prompt", Shape{1}, 0, true, DType::kInt32}};
    states_ = *SlotStateCache::Create(specs, config_.max_batch_size + 1, device());
    slots_.emplace(config_.max_batch_size, 1);
    managers_ = {&*slots_, att_.get(), states_.get()};
  }
  // The conv context of `slot`.
  std::vector<float> Conv(int slot) {
    Tensor out = *Tensor::Zeros(states_->CohortShape(0, 1), DType::kFloat32, device());
    const std::vector<int32_t> one = {slot};
    EXPECT_TRUE(states_->Gather(0, one, out.view(), stream()).ok());
    return Read<float>(out.view());
  }

  CacheConfig config_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<AttentionCacheManager> att_;
  std::unique_ptr<SlotStateCache> states_;
  std::optional<StreamSlotPool> slots_;
  CacheManagers managers_;
};

TEST_P(StreamContextTest, TheHotLoopReadsCleanlyThroughOneHandle) {
  StreamContext ctx = *StreamContext::Allocate(42, managers_, stream());
  EXPECT_EQ(ctx.stream_id(), 42);
  EXPECT_EQ(ctx.slot(), 0);
  EXPECT_TRUE(att_->IsBound(0));
  Tensor new_cnn = *Tensor::Empty(states_->CohortShape(0, 1), DType::kFloat32, device());
  const std::vector<int32_t> slot = {ctx.slot()};
  for (int chunk = 0; chunk < 4; ++chunk) {
    ASSERT_FALSE(*ctx.AtCapacity());
    ASSERT_TRUE(ctx.PrepareChunk().ok());
    ctx.UpdateDeviceMirror();
    const PagedStateViews views = *ctx.GetPagedStateViews();
    EXPECT_EQ(Read<int32_t>(views.cache_seqlens)[0], std::min(chunk * 4, 8));
    EXPECT_EQ(ctx.GetAttCaches(0).cohort_slots.numel(), 1);
    // What the model reads of the conv context by slot, then overwrites.
    EXPECT_EQ(Conv(ctx.slot()), std::vector<float>(30, chunk == 0 ? 0.0f : chunk - 1.0f));
    Write<float>(new_cnn.view(), std::vector<float>(30, static_cast<float>(chunk)));
    ASSERT_TRUE(states_->Scatter(0, slot, new_cnn.view(), stream()).ok());
    ASSERT_TRUE(ctx.CommitChunkPaged(4).ok());
  }
  EXPECT_EQ(*ctx.CachedFrames(), 8);
  ASSERT_TRUE(ctx.Free().ok());
}

TEST_P(StreamContextTest, FreeReleasesEverythingExactlyOnce) {
  StreamContext ctx = *StreamContext::Allocate(1, managers_, stream());
  ASSERT_TRUE(ctx.PrepareChunk().ok());
  ASSERT_TRUE(ctx.CommitChunkPaged(4).ok());
  ASSERT_TRUE(ctx.PrepareChunk().ok());
  EXPECT_EQ(pool_->num_free_blocks(), 62);
  EXPECT_EQ(slots_->num_free(), 7);
  ASSERT_TRUE(ctx.Free().ok());
  EXPECT_FALSE(ctx.live());
  EXPECT_EQ(pool_->num_free_blocks(), 64);
  EXPECT_EQ(slots_->num_free(), 8);
  EXPECT_EQ(att_->num_streams(), 0);
  EXPECT_FALSE(att_->IsBound(0));
  const absl::Status again = ctx.Free();
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(again.message()), HasSubstr("already freed"));
  EXPECT_EQ(ctx.PrepareChunk().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ctx.CommitChunkPaged(1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(slots_->num_free(), 8);
  // The slot serves the next stream, its conv context zeroed again.
  Write<float>(states_->buffer(0), std::vector<float>(states_->buffer(0).numel(), 3.0f));
  StreamContext next = *StreamContext::Allocate(2, managers_, stream());
  EXPECT_EQ(next.slot(), 0);
  EXPECT_EQ(Conv(0), std::vector<float>(30, 0.0f));
  EXPECT_EQ(Conv(1), std::vector<float>(30, 3.0f));
}

TEST_P(StreamContextTest, DestructionAndMoveFreeOnce) {
  {
    StreamContext a = *StreamContext::Allocate(1, managers_, stream());
    ASSERT_TRUE(a.PrepareChunk().ok());
    StreamContext b = std::move(a);
    EXPECT_FALSE(a.live());
    EXPECT_TRUE(b.live());
    EXPECT_EQ(pool_->num_free_blocks(), 63);
  }
  EXPECT_EQ(pool_->num_free_blocks(), 64);
  EXPECT_EQ(slots_->num_free(), 8);
  EXPECT_EQ(att_->num_streams(), 0);
}

TEST_P(StreamContextTest, AFailedAllocationReleasesWhatItClaimed) {
  // States with rows for two slots only: the third stream's slot and
  // attention rows are claimed, then its states cannot be zeroed.
  auto few = *SlotStateCache::Create({CnnCacheManager::Spec(config_)}, 2, device());
  const CacheManagers short_states{&*slots_, att_.get(), few.get()};
  StreamContext a = *StreamContext::Allocate(1, short_states, stream());
  StreamContext b = *StreamContext::Allocate(2, short_states, stream());
  const absl::StatusOr<StreamContext> c = StreamContext::Allocate(3, short_states, stream());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("stream 3"));
  EXPECT_EQ(slots_->num_free(), 6);
  EXPECT_EQ(att_->num_streams(), 2);
  EXPECT_FALSE(att_->IsBound(2));
  // Slots run out as a status.
  std::vector<StreamContext> live;
  for (int64_t id = 100; id < 106; ++id)
    live.push_back(*StreamContext::Allocate(id, managers_, stream()));
  const absl::Status full = StreamContext::Allocate(200, managers_, stream()).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(att_->num_streams(), 8);
  CacheManagers partial;
  EXPECT_EQ(StreamContext::Allocate(1, partial, stream()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(StreamContextTest, APrefillThatCannotBeHadReleasesTheSlot) {
  CacheConfig c = config_;
  c.prefill_kv_window = true;
  c.max_num_blocks = c.min_pool_blocks();
  auto pool = *BlockPool::Create(c, 1);
  auto att = *AttentionCacheManager::Create(pool.get(), 1);
  const CacheManagers managers{&*slots_, att.get(), states_.get()};
  std::vector<int32_t> taken(pool->num_free_blocks() - 1);  // Another user of the pool.
  ASSERT_TRUE(pool->Allocate(taken).ok());
  const absl::Status s = StreamContext::Allocate(1, managers, stream()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(slots_->num_free(), 8);
  EXPECT_EQ(att->num_streams(), 0);
}

TEST_P(StreamContextTest, ABadCommitChangesNothing) {
  StreamContext ctx = *StreamContext::Allocate(1, managers_, stream());
  EXPECT_EQ(ctx.CommitChunkPaged(4).code(), absl::StatusCode::kFailedPrecondition);  // No Prepare.
  ASSERT_TRUE(ctx.PrepareChunk().ok());
  EXPECT_EQ(ctx.CommitChunkPaged(5).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ctx.CachedFrames(), 0);
  ASSERT_TRUE(ctx.CommitChunkPaged(4).ok());
  EXPECT_EQ(*ctx.CachedFrames(), 4);
}

// Dense chunks appended to the context's slot come back, through the dense
// oracle, as the dense cache a forward_chunk would hold.
TEST_P(StreamContextTest, TheContextsSlotHoldsWhatADenseCacheWould) {
  StreamContext ctx = *StreamContext::Allocate(1, managers_, stream());
  Tensor kv = *Tensor::Empty({2, 2, 4, 6}, DType::kFloat32, device());
  std::vector<float> values(kv.numel());
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  Write<float>(kv.view(), values);
  ASSERT_TRUE(testing::AppendDenseChunk(*att_, ctx.slot(), kv.view(), stream()).ok());
  EXPECT_EQ(*ctx.CachedFrames(), 4);
  const Tensor stacked = *testing::GatherDenseHistory(*att_, ctx.slot(), stream());
  EXPECT_EQ(stacked.shape(), (Shape{2, 2, 4, 6}));
  EXPECT_EQ(Read<float>(stacked.view()), values);
}

OASR_INSTANTIATE_CACHE_DEVICE_TEST(StreamContextTest);

}  // namespace
}  // namespace oasr::cache
