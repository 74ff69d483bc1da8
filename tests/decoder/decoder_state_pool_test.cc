#include "decoder/decoder_state_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "decoder/ctc_decoder.h"
#include "tests/decoder/test_util.h"

namespace oasr::decoder {
namespace {

// A small real streaming decoder: greedy CTC (argmax per frame, repeats
// collapsed, blank 0 dropped) over float32 [T, V] host log-probabilities,
// counting what the pool does to its states.
struct GreedyState : public DecoderState {
  int64_t frames = 0;
  int last_token = 0;
  std::vector<int> tokens;
  bool finalized = false;
  int resets = 0;
};

class GreedyDecoder : public PooledDecoder {
 public:
  explicit GreedyDecoder(int vocab_size) : vocab_size_(vocab_size) {}
  std::unique_ptr<DecoderState> CreateState() override {
    ++created_;
    return std::make_unique<GreedyState>();
  }
  void ResetState(DecoderState& state) override {
    auto& s = static_cast<GreedyState&>(state);
    const int resets = s.resets + 1;
    s.frames = 0;
    s.last_token = 0;
    s.tokens.clear();
    s.finalized = false;
    s.resets = resets;
  }
  absl::Status DecodeChunk(DecoderState& state, const TensorView& log_probs) override {
    auto& s = static_cast<GreedyState&>(state);
    if (log_probs.dtype() != DType::kFloat32 || log_probs.rank() != 2 ||
        log_probs.dim(1) != vocab_size_) {
      return absl::InvalidArgumentError("GreedyDecoder: log_probs must be float32 [T, V]");
    }
    const float* p = log_probs.data<float>();
    for (int64_t t = 0; t < log_probs.dim(0); ++t) {
      const float* row = p + t * vocab_size_;
      const int best = static_cast<int>(std::max_element(row, row + vocab_size_) - row);
      if (best != 0 && best != s.last_token) s.tokens.push_back(best);
      s.last_token = best;
      ++s.frames;
    }
    return absl::OkStatus();
  }
  absl::Status FinalizeStream(DecoderState& state) override {
    static_cast<GreedyState&>(state).finalized = true;
    return absl::OkStatus();
  }
  int created() const { return created_; }

 private:
  int vocab_size_;
  int created_ = 0;
};

// log-probs float32 [T, V] whose argmax per frame is `ids[t]`.
Tensor LogProbs(const std::vector<int>& ids, int vocab) {
  Tensor t = *Tensor::Zeros({static_cast<int64_t>(ids.size()), vocab}, DType::kFloat32);
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int v = 0; v < vocab; ++v) t.data<float>()[i * vocab + v] = v == ids[i] ? -0.1f : -5.0f;
  }
  return t;
}

const GreedyState& AsGreedy(const DecoderState& s) { return static_cast<const GreedyState&>(s); }

TEST(DecoderStatePoolTest, AnAcquiredStateDecodesLikeAFreshOne) {
  GreedyDecoder decoder(6);
  DecoderStatePool pool(&decoder);
  std::unique_ptr<DecoderState> state = pool.Acquire();
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(pool.num_in_use(), 1);
  ASSERT_TRUE(decoder.DecodeChunk(*state, LogProbs({0, 3, 3, 0}, 6).view()).ok());
  ASSERT_TRUE(decoder.DecodeChunk(*state, LogProbs({3, 5, 0, 5}, 6).view()).ok());
  ASSERT_TRUE(decoder.FinalizeStream(*state).ok());
  EXPECT_EQ(AsGreedy(*state).tokens, (std::vector<int>{3, 3, 5, 5}));
  EXPECT_EQ(AsGreedy(*state).frames, 8);
  EXPECT_TRUE(AsGreedy(*state).finalized);
  pool.Release(std::move(state));
  EXPECT_EQ(pool.num_in_use(), 0);
  EXPECT_EQ(pool.num_pooled(), 1);
}

TEST(DecoderStatePoolTest, StatesAreRecycledAndResetNeverDestroyed) {
  GreedyDecoder decoder(4);
  DecoderStatePool pool(&decoder);
  std::vector<std::unique_ptr<DecoderState>> held;
  std::vector<const DecoderState*> first;
  for (int i = 0; i < 3; ++i) {
    held.push_back(pool.Acquire());
    ASSERT_TRUE(decoder.DecodeChunk(*held.back(), LogProbs({1, 2}, 4).view()).ok());
    first.push_back(held.back().get());
  }
  for (auto& state : held) pool.Release(std::move(state));
  held.clear();
  EXPECT_EQ(pool.num_pooled(), 3);
  EXPECT_EQ(pool.num_in_use(), 0);
  // 100 more streams, at most 3 at a time: no new state is ever created.
  for (int i = 0; i < 100; ++i) {
    held.push_back(pool.Acquire());
    const GreedyState& s = AsGreedy(*held.back());
    EXPECT_NE(std::find(first.begin(), first.end(), held.back().get()), first.end());
    EXPECT_EQ(s.frames, 0);  // Reset when it came back.
    EXPECT_TRUE(s.tokens.empty());
    EXPECT_GE(s.resets, 1);
    ASSERT_TRUE(decoder.DecodeChunk(*held.back(), LogProbs({2}, 4).view()).ok());
    if (held.size() == 3) {
      for (auto& state : held) pool.Release(std::move(state));
      held.clear();
    }
  }
  EXPECT_EQ(decoder.created(), 3);
  EXPECT_EQ(pool.num_created(), 3);
  pool.Release(nullptr);  // Ignored.
  EXPECT_EQ(pool.num_pooled(), 3 - static_cast<int>(held.size()));
}

TEST(DecoderStatePoolTest, ReserveCreatesStatesUpFront) {
  GreedyDecoder decoder(4);
  DecoderStatePool pool(&decoder, 5);
  EXPECT_EQ(decoder.created(), 5);
  EXPECT_EQ(pool.num_pooled(), 5);
  std::vector<std::unique_ptr<DecoderState>> held;
  for (int i = 0; i < 5; ++i) held.push_back(pool.Acquire());
  EXPECT_EQ(decoder.created(), 5);
  held.push_back(pool.Acquire());
  EXPECT_EQ(decoder.created(), 6);
  EXPECT_EQ(pool.num_in_use(), 6);
  for (auto& state : held) pool.Release(std::move(state));
  EXPECT_EQ(pool.num_pooled(), 6);
}

// The real decoder through the pool: a released state comes back with the
// default options and nothing of the stream that used it.
TEST(DecoderStatePoolTest, CtcStatesComeBackAsCreateStateMakesThem) {
  const std::string mark = "\xe2\x96\x81";
  auto units = testing::MakeUnits({"<blank>", "<unk>", mark + "A", mark + "B", "<sos/eos>"});
  CtcDecoderConfig config;
  config.stream.endpoint.enabled = false;
  auto decoder = *CtcDecoder::Create(config, units);
  DecoderStatePool pool(decoder.get(), 1);
  std::unique_ptr<DecoderState> state = pool.Acquire();
  StreamOptions options;
  options.single_utterance = true;
  options.nbest = 2;
  ASSERT_TRUE(decoder->ConfigureStream(*state, options).ok());
  std::vector<float> lp =
      testing::LogRows({{0.05f, 0.01f, 0.9f, 0.02f, 0.02f}, {0.9f, 0.02f, 0.04f, 0.02f, 0.02f}});
  const TensorView view = testing::View(lp, 5);
  ASSERT_TRUE(decoder->DecodeChunk(*state, view).ok());
  ASSERT_TRUE(decoder->FinalizeStream(*state).ok());
  EXPECT_TRUE(decoder->GetStatus(*state).finished);
  pool.Release(std::move(state));
  std::unique_ptr<DecoderState> again = pool.Acquire();
  EXPECT_EQ(pool.num_created(), 1);
  const StreamStatus status = decoder->GetStatus(*again);
  EXPECT_EQ(status.frames_decoded, 0);
  EXPECT_FALSE(status.finished);
  EXPECT_EQ(status.final_results, 0u);
  EXPECT_TRUE(decoder->TakeFinalResults(*again).empty());
  // Fresh: it decodes again, as a new stream would.
  ASSERT_TRUE(decoder->DecodeChunk(*again, view).ok());
  EXPECT_EQ(decoder->PartialResult(*again).nbest[0].transcript, "A");
  pool.Release(std::move(again));
}

}  // namespace
}  // namespace oasr::decoder
