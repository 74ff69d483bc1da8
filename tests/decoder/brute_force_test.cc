// The prefix beam search against an enumeration of every CTC alignment on
// tiny vocabularies: with a beam wide enough to keep everything it must find
// every label sequence with its exact probability, best alignment and token
// times; with the default beam it must find the most probable sequence and
// its best path.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "decoder/prefix_beam_search.h"
#include "decoder/synthetic_log_probs.h"

namespace oasr::decoder {
namespace {

struct Exact {
  double log_prob = -INFINITY;  // all alignments
  double viterbi = -INFINITY;   // best alignment
  std::vector<int64_t> frames;  // token times of the best alignment
};

double LogAddDouble(double x, double y) {
  if (x < y) std::swap(x, y);
  if (y == -INFINITY) return x;
  return x + std::log1p(std::exp(y - x));
}

// Every label sequence with its probability, by enumerating all V^T
// alignments.
std::map<std::vector<int32_t>, Exact> Enumerate(const std::vector<float>& lp, int frames,
                                                int vocab) {
  std::map<std::vector<int32_t>, Exact> out;
  std::vector<int> alignment(frames, 0);
  while (true) {
    double log_prob = 0.0;
    std::vector<int32_t> labels;
    std::vector<int64_t> times;
    for (int t = 0; t < frames; ++t) {
      const int symbol = alignment[t];
      log_prob += lp[t * vocab + symbol];
      if (symbol == 0) continue;
      if (t > 0 && alignment[t - 1] == symbol) {
        times.back() = t;  // the run goes on: the time is its last frame
      } else {
        labels.push_back(symbol);
        times.push_back(t);
      }
    }
    Exact& e = out[labels];
    e.log_prob = LogAddDouble(e.log_prob, log_prob);
    if (log_prob > e.viterbi) {
      e.viterbi = log_prob;
      e.frames = times;
    }
    int i = frames - 1;
    while (i >= 0 && ++alignment[i] == vocab) alignment[i--] = 0;
    if (i < 0) break;
  }
  return out;
}

struct Case {
  int frames;
  int vocab;
  float peak;
  uint32_t seed;
};

class BruteForceTest : public ::testing::TestWithParam<Case> {
 protected:
  std::vector<float> Input() const {
    SyntheticLogProbsOptions gen;
    gen.num_frames = GetParam().frames;
    gen.vocab_size = GetParam().vocab;
    gen.peak = GetParam().peak;
    gen.blank_frame_ratio = 0.4f;
    gen.seed = GetParam().seed;
    return SyntheticLogProbs(gen);
  }
};

TEST_P(BruteForceTest, WideBeamFindsEverySequenceExactly) {
  const auto [frames, vocab, peak, seed] = GetParam();
  const std::vector<float> lp = Input();
  const auto exact = Enumerate(lp, frames, vocab);
  PrefixBeamSearchOptions options;
  options.beam_size = 1024;
  options.first_beam_size = vocab;
  PrefixBeamSearch search(options);
  search.Search(lp.data(), frames, vocab);
  ASSERT_EQ(search.NumHypotheses(), static_cast<int>(exact.size()));
  for (int r = 0; r < search.NumHypotheses(); ++r) {
    Hypothesis hyp;
    search.GetHypothesis(r, &hyp);
    const auto it = exact.find(hyp.tokens);
    ASSERT_NE(it, exact.end());
    EXPECT_NEAR(hyp.ctc_score, it->second.log_prob, 1e-4);
    EXPECT_NEAR(hyp.viterbi_score, it->second.viterbi, 1e-4);
    EXPECT_EQ(hyp.token_frames, it->second.frames);
  }
}

TEST_P(BruteForceTest, DefaultBeamFindsTheBestSequence) {
  const auto [frames, vocab, peak, seed] = GetParam();
  const std::vector<float> lp = Input();
  const auto exact = Enumerate(lp, frames, vocab);
  auto best = exact.begin();
  for (auto it = exact.begin(); it != exact.end(); ++it) {
    if (it->second.log_prob > best->second.log_prob) best = it;
  }
  PrefixBeamSearch search(PrefixBeamSearchOptions{});
  search.Search(lp.data(), frames, vocab);
  Hypothesis hyp;
  search.GetHypothesis(0, &hyp);
  EXPECT_EQ(hyp.tokens, best->first);
  // Its best alignment is found exactly; its total probability is a lower
  // bound, since alignments through pruned prefixes are lost.
  EXPECT_NEAR(hyp.viterbi_score, best->second.viterbi, 1e-4);
  EXPECT_EQ(hyp.token_frames, best->second.frames);
  EXPECT_LE(hyp.ctc_score, best->second.log_prob + 1e-4);
  EXPECT_GT(hyp.ctc_score, best->second.log_prob - 0.1);
}

INSTANTIATE_TEST_SUITE_P(TinyVocabularies, BruteForceTest,
                         ::testing::Values(Case{7, 3, 0.0f, 1}, Case{7, 3, 2.0f, 2},
                                           Case{6, 4, 0.0f, 3}, Case{6, 4, 1.5f, 4},
                                           Case{5, 5, 0.0f, 5}, Case{8, 3, 1.0f, 6}));

}  // namespace
}  // namespace oasr::decoder
