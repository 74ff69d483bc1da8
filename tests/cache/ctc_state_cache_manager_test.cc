#include "cache/ctc_state_cache_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/cache/cache_test_util.h"

namespace oasr::cache {
namespace {

using testing::GreedyCtcDecoder;
using testing::GreedyCtcState;

// log-probs float32 [T, V] whose argmax per frame is `ids[t]`.
Tensor LogProbs(const std::vector<int>& ids, int vocab) {
  Tensor t = *Tensor::Zeros({static_cast<int64_t>(ids.size()), vocab}, DType::kFloat32);
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int v = 0; v < vocab; ++v) t.data<float>()[i * vocab + v] = v == ids[i] ? -0.1f : -5.0f;
  }
  return t;
}

const GreedyCtcState& StateOf(const StreamHandle& h) {
  return static_cast<const GreedyCtcState&>(h.state());
}

TEST(CtcStateCacheManagerTest, AHandleDecodesLikeAStandAloneDecoder) {
  GreedyCtcDecoder decoder(6);
  CtcStateCacheManager ctc(&decoder);
  ASSERT_TRUE(ctc.AllocateStream(7).ok());
  StreamHandle h = *ctc.GetDecoder(7);
  ASSERT_TRUE(h.DecodeChunk(LogProbs({0, 3, 3, 0}, 6).view()).ok());
  ASSERT_TRUE(h.DecodeChunk(LogProbs({3, 5, 0, 5}, 6).view()).ok());
  ASSERT_TRUE(h.FinalizeStream().ok());
  EXPECT_EQ(StateOf(h).tokens, (std::vector<int>{3, 3, 5, 5}));
  EXPECT_EQ(StateOf(h).frames, 8);
  EXPECT_TRUE(StateOf(h).finalized);
  // Errors are the decoder's.
  EXPECT_EQ(h.DecodeChunk(LogProbs({1}, 5).view()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CtcStateCacheManagerTest, StatesAreRecycledAndResetNeverDestroyed) {
  GreedyCtcDecoder decoder(4);
  CtcStateCacheManager ctc(&decoder);
  std::vector<const DecoderState*> first;
  for (int64_t id = 0; id < 3; ++id) {
    ASSERT_TRUE(ctc.AllocateStream(id).ok());
    StreamHandle h = *ctc.GetDecoder(id);
    ASSERT_TRUE(h.DecodeChunk(LogProbs({1, 2}, 4).view()).ok());
    first.push_back(&h.state());
  }
  for (int64_t id = 0; id < 3; ++id) ASSERT_TRUE(ctc.FreeStream(id).ok());
  EXPECT_EQ(ctc.num_pooled(), 3);
  EXPECT_EQ(ctc.num_streams(), 0);
  // 100 more streams, at most 3 at a time: no new state is ever created.
  for (int64_t id = 100; id < 200; ++id) {
    ASSERT_TRUE(ctc.AllocateStream(id).ok());
    const StreamHandle h = *ctc.GetDecoder(id);
    EXPECT_NE(std::find(first.begin(), first.end(), &h.state()), first.end());
    EXPECT_EQ(StateOf(h).frames, 0);  // Reset on reuse.
    EXPECT_TRUE(StateOf(h).tokens.empty());
    EXPECT_GE(StateOf(h).resets, 1);
    if ((id - 100) % 3 == 2) {
      for (int64_t j = id - 2; j <= id; ++j) ASSERT_TRUE(ctc.FreeStream(j).ok());
    }
  }
  EXPECT_EQ(decoder.created(), 3);
  EXPECT_EQ(ctc.num_created(), 3);
}

TEST(CtcStateCacheManagerTest, ReserveCreatesStatesUpFront) {
  GreedyCtcDecoder decoder(4);
  CtcStateCacheManager ctc(&decoder, 5);
  EXPECT_EQ(decoder.created(), 5);
  EXPECT_EQ(ctc.num_pooled(), 5);
  for (int64_t id = 0; id < 5; ++id) ASSERT_TRUE(ctc.AllocateStream(id).ok());
  EXPECT_EQ(decoder.created(), 5);
  ASSERT_TRUE(ctc.AllocateStream(5).ok());
  EXPECT_EQ(decoder.created(), 6);
}

TEST(CtcStateCacheManagerTest, DuplicateUnknownAndFreedStreamsAreStatuses) {
  GreedyCtcDecoder decoder(4);
  CtcStateCacheManager ctc(&decoder);
  ASSERT_TRUE(ctc.AllocateStream(1).ok());
  EXPECT_EQ(ctc.AllocateStream(1).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ctc.GetDecoder(2).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ctc.FreeStream(2).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(ctc.FreeStream(1).ok());
  EXPECT_EQ(ctc.FreeStream(1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ctc.GetDecoder(1).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace oasr::cache
