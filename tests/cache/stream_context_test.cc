#include "cache/stream_context.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "tests/cache/cache_test_util.h"

namespace oasr::cache {
namespace {

using testing::GreedyCtcDecoder;
using testing::GreedyCtcState;
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
    cnn_ = *CnnCacheManager::Create(config_, 1);
    states_ = *SlotStateCache::Create({{"prompt", Shape{1}, 0, true, DType::kInt32}},
                                      config_.max_batch_size + 1, device());
    slots_.emplace(config_.max_batch_size, 1);
    managers_ = {&*slots_, att_.get(), cnn_.get(), states_.get(), &ctc_};
  }

  CacheConfig config_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<AttentionCacheManager> att_;
  std::unique_ptr<CnnCacheManager> cnn_;
  std::unique_ptr<SlotStateCache> states_;
  std::optional<StreamSlotPool> slots_;
  GreedyCtcDecoder decoder_{4};
  CtcStateCacheManager ctc_{&decoder_};
  CacheManagers managers_;
};

TEST_P(StreamContextTest, TheHotLoopReadsCleanlyThroughOneHandle) {
  StreamContext ctx = *StreamContext::Allocate(42, managers_, stream());
  EXPECT_EQ(ctx.slot(), 0);
  Tensor new_cnn = *Tensor::Empty(cnn_->CohortShape(1), DType::kFloat32, device());
  Tensor cnn_out = *Tensor::Empty(cnn_->CohortShape(1), DType::kFloat32, device());
  Tensor log_probs = *Tensor::Zeros({4, 4}, DType::kFloat32);
  for (int chunk = 0; chunk < 4; ++chunk) {
    ASSERT_FALSE(*ctx.AtCapacity());
    ASSERT_TRUE(ctx.PrepareChunk().ok());
    ctx.UpdateDeviceMirror();
    const PagedStateViews views = *ctx.GetPagedStateViews();
    EXPECT_EQ(Read<int32_t>(views.cache_seqlens)[0], std::min(chunk * 4, 8));
    EXPECT_EQ(ctx.GetAttCaches(0).cohort_slots.numel(), 1);
    ASSERT_TRUE(ctx.GetCnnCache(cnn_out.view()).ok());
    EXPECT_EQ(Read<float>(cnn_out.view()),
              std::vector<float>(30, chunk == 0 ? 0.0f : chunk - 1.0f));
    Write<float>(new_cnn.view(), std::vector<float>(30, static_cast<float>(chunk)));
    ASSERT_TRUE(ctx.CommitChunkPaged(4, new_cnn.view()).ok());
    for (int t = 0; t < 4; ++t) {
      for (int v = 0; v < 4; ++v)
        log_probs.data<float>()[t * 4 + v] = v == (chunk + 1) % 4 ? 0 : -9;
    }
    ASSERT_TRUE(ctx.GetDecoder()->DecodeChunk(log_probs.view()).ok());
  }
  EXPECT_EQ(*ctx.CachedFrames(), 8);
  StreamHandle decoder = *ctx.GetDecoder();
  ASSERT_TRUE(decoder.FinalizeStream().ok());
  EXPECT_EQ(static_cast<const GreedyCtcState&>(decoder.state()).tokens,
            (std::vector<int>{1, 2, 3}));
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
  EXPECT_EQ(cnn_->num_streams(), 0);
  EXPECT_EQ(ctc_.num_streams(), 0);
  EXPECT_EQ(ctc_.num_pooled(), 1);
  const absl::Status again = ctx.Free();
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(again.message()), HasSubstr("already freed"));
  EXPECT_EQ(ctx.PrepareChunk().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(slots_->num_free(), 8);
  // The slot and the decoder state serve the next stream.
  StreamContext next = *StreamContext::Allocate(2, managers_, stream());
  EXPECT_EQ(next.slot(), 0);
  EXPECT_EQ(decoder_.created(), 1);
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
  EXPECT_EQ(ctc_.num_streams(), 0);
}

TEST_P(StreamContextTest, AFailedAllocationReleasesWhatItClaimed) {
  ASSERT_TRUE(ctc_.AllocateStream(5).ok());  // The decoder already knows id 5.
  const absl::StatusOr<StreamContext> ctx = StreamContext::Allocate(5, managers_, stream());
  EXPECT_EQ(ctx.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(slots_->num_free(), 8);
  EXPECT_EQ(att_->num_streams(), 0);
  EXPECT_EQ(cnn_->num_streams(), 0);
  // Slots run out as a status.
  std::vector<StreamContext> live;
  for (int64_t id = 100; id < 108; ++id)
    live.push_back(*StreamContext::Allocate(id, managers_, stream()));
  const absl::Status full = StreamContext::Allocate(200, managers_, stream()).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(att_->num_streams(), 8);
  CacheManagers partial;
  EXPECT_EQ(StreamContext::Allocate(1, partial, stream()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(StreamContextTest, ABadConvUpdateChangesNothing) {
  StreamContext ctx = *StreamContext::Allocate(1, managers_, stream());
  ASSERT_TRUE(ctx.PrepareChunk().ok());
  Tensor wrong = *Tensor::Zeros({2, 1, 3, 4}, DType::kFloat32, device());
  const absl::Status s = ctx.CommitChunkPaged(4, wrong.view());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("[2, 1, 3, 5]"));
  EXPECT_EQ(*ctx.CachedFrames(), 0);
  ASSERT_TRUE(ctx.CommitChunkPaged(4).ok());
  EXPECT_EQ(*ctx.CachedFrames(), 4);
}

TEST_P(StreamContextTest, DenseModeThroughTheContext) {
  StreamContext ctx = *StreamContext::Allocate(1, managers_, stream());
  Tensor kv = *Tensor::Empty({2, 2, 4, 6}, DType::kFloat32, device());
  std::vector<float> values(kv.numel());
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  Write<float>(kv.view(), values);
  ASSERT_TRUE(ctx.CommitChunk(kv.view()).ok());
  const Tensor stacked = *ctx.GetAttCache();
  EXPECT_EQ(stacked.shape(), (Shape{2, 2, 4, 6}));
  EXPECT_EQ(Read<float>(stacked.view()), values);
}

OASR_INSTANTIATE_CACHE_DEVICE_TEST(StreamContextTest);

}  // namespace
}  // namespace oasr::cache
