// Greedy and prefix beam search on hand-built inputs with known answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "decoder/ctc_search.h"
#include "decoder/greedy_search.h"
#include "decoder/prefix_beam_search.h"
#include "decoder/synthetic_log_probs.h"
#include "tests/decoder/test_util.h"

namespace oasr::decoder {
namespace {

using testing::LogRows;

TEST(LogAddTest, MatchesDirectComputation) {
  EXPECT_NEAR(LogAdd(std::log(0.25f), std::log(0.5f)), std::log(0.75f), 1e-6);
  EXPECT_EQ(LogAdd(kLogZero, -3.0f), -3.0f);
  EXPECT_EQ(LogAdd(-3.0f, kLogZero), -3.0f);
  EXPECT_EQ(LogAdd(kLogZero, kLogZero), kLogZero);
}

TEST(TopKTest, BestFirstWithTiesToTheLowerId) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> values = {0.5f, 2.0f, nan, 2.0f, -1.0f, 3.0f, 2.0f};
  int32_t ids[4];
  float out[4];
  ASSERT_EQ(TopK(values.data(), 7, 4, ids, out), 4);
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 4), (std::vector<int32_t>{5, 1, 3, 6}));
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{3.0f, 2.0f, 2.0f, 2.0f}));
  // Fewer candidates than k: NaN is never chosen.
  ASSERT_EQ(TopK(values.data(), 3, 4, ids, out), 2);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 0);
}

TEST(TopKTest, MatchesAStableSortOnLargeRows) {
  // Quantised values make ties common; NaN and -inf appear too.
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 6000);
    const int k = 1 + static_cast<int>(rng() % 40);
    std::vector<float> values(n);
    for (float& v : values) {
      const uint32_t r = rng() % 1000;
      v = r == 0   ? std::numeric_limits<float>::quiet_NaN()
          : r == 1 ? -std::numeric_limits<float>::infinity()
                   : static_cast<float>(static_cast<int>(rng() % 200)) * 0.05f;
    }
    std::vector<int32_t> order;
    for (int i = 0; i < n; ++i) {
      if (!std::isnan(values[i])) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return values[a] > values[b]; });
    order.resize(std::min<size_t>(order.size(), k));
    std::vector<int32_t> ids(k);
    std::vector<float> out(k);
    const int count = TopK(values.data(), n, k, ids.data(), out.data());
    ASSERT_EQ(count, static_cast<int>(order.size()));
    ids.resize(count);
    EXPECT_EQ(ids, order) << "n = " << n << ", k = " << k;
  }
}

TEST(GreedySearchTest, CollapsesRepeatsAndDropsBlanks) {
  // Argmax per frame: a a - b - b b -  (blank = 0, a = 1, b = 2).
  std::vector<float> lp = LogRows(
      {{1, 8, 1}, {1, 6, 3}, {8, 1, 1}, {2, 1, 7}, {8, 1, 1}, {1, 1, 8}, {3, 1, 6}, {8, 1, 1}});
  GreedySearch search(0);
  search.Search(lp.data(), 8, 3);
  Hypothesis hyp;
  search.GetHypothesis(0, &hyp);
  EXPECT_EQ(hyp.tokens, (std::vector<int32_t>{1, 2, 2}));
  // A token's frame is the last frame of its run; its confidence the run's
  // best posterior.
  EXPECT_EQ(hyp.token_frames, (std::vector<int64_t>{1, 3, 6}));
  EXPECT_NEAR(hyp.token_confidences[0], 0.8f, 1e-6);
  EXPECT_NEAR(hyp.token_confidences[2], 0.8f, 1e-6);
  float best_path = 0.0f;
  for (int t = 0; t < 8; ++t) {
    best_path += *std::max_element(lp.begin() + 3 * t, lp.begin() + 3 * t + 3);
  }
  EXPECT_NEAR(hyp.score, best_path, 1e-5);
  EXPECT_TRUE(search.DecodedSomething());
}

TEST(GreedySearchTest, RevisionMovesWithTheTokensAndTheirConfidencesOnly) {
  // blank = 0, a = 1, b = 2; each row is one frame.
  GreedySearch search(0);
  uint64_t last = search.Revision();
  auto step = [&](std::vector<std::vector<float>> rows) {
    const std::vector<float> lp = LogRows(rows);
    search.Search(lp.data(), static_cast<int>(rows.size()), 3);
    const bool moved = search.Revision() != last;
    last = search.Revision();
    return moved;
  };
  EXPECT_FALSE(step({{8, 1, 1}, {8, 1, 1}})) << "blanks";
  EXPECT_TRUE(step({{1, 6, 3}})) << "a new token";
  EXPECT_FALSE(step({{1, 5, 4}})) << "its run goes on, less sure";
  EXPECT_TRUE(step({{1, 8, 1}})) << "its run goes on, surer: its confidence rises";
  EXPECT_FALSE(step({{8, 1, 1}, {8, 1, 1}})) << "blanks";
  EXPECT_TRUE(step({{1, 6, 3}})) << "the same unit again after a blank is a new token";
  EXPECT_FALSE(step({}));
  search.Reset();
  EXPECT_NE(search.Revision(), last) << "a reset";
}

TEST(PrefixBeamSearchTest, SumsAlignmentsWhereGreedyDoesNot) {
  // Two frames of P(blank) = 0.6, P(a) = 0.4. Greedy says "" (0.36); the
  // prefix "a" collects aa, a-, -a = 0.16 + 0.24 + 0.24 = 0.64.
  std::vector<float> lp = LogRows({{0.6f, 0.4f}, {0.6f, 0.4f}});
  GreedySearch greedy(0);
  greedy.Search(lp.data(), 2, 2);
  EXPECT_FALSE(greedy.DecodedSomething());

  PrefixBeamSearch beam(PrefixBeamSearchOptions{});
  beam.Search(lp.data(), 2, 2);
  ASSERT_EQ(beam.NumHypotheses(), 2);
  Hypothesis best, second;
  beam.GetHypothesis(0, &best);
  beam.GetHypothesis(1, &second);
  EXPECT_EQ(best.tokens, std::vector<int32_t>{1});
  EXPECT_NEAR(best.ctc_score, std::log(0.64f), 1e-6);
  EXPECT_NEAR(best.viterbi_score, std::log(0.24f), 1e-6);
  EXPECT_TRUE(second.tokens.empty());
  EXPECT_NEAR(second.score, std::log(0.36f), 1e-6);
}

TEST(PrefixBeamSearchTest, RepeatedTokenNeedsABlankInBetween) {
  // "a a" is only reachable through a blank: a - a.
  std::vector<float> lp =
      LogRows({{0.05f, 0.9f, 0.05f}, {0.9f, 0.05f, 0.05f}, {0.05f, 0.9f, 0.05f}});
  PrefixBeamSearch beam(PrefixBeamSearchOptions{});
  beam.Search(lp.data(), 3, 3);
  Hypothesis best;
  beam.GetHypothesis(0, &best);
  EXPECT_EQ(best.tokens, (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(best.token_frames, (std::vector<int64_t>{0, 2}));
  EXPECT_NEAR(best.viterbi_score, 3 * std::log(0.9f), 1e-5);
}

TEST(PrefixBeamSearchTest, TokenTimeIsTheLastFrameOfItsRun) {
  // - a a a - b : a runs over frames 1..3, b sits at 5.
  std::vector<float> lp = LogRows({{0.9f, 0.05f, 0.05f},
                                   {0.1f, 0.8f, 0.1f},
                                   {0.05f, 0.9f, 0.05f},
                                   {0.2f, 0.7f, 0.1f},
                                   {0.9f, 0.05f, 0.05f},
                                   {0.1f, 0.1f, 0.8f}});
  PrefixBeamSearch beam(PrefixBeamSearchOptions{});
  beam.Search(lp.data(), 6, 3);
  Hypothesis best;
  beam.GetHypothesis(0, &best);
  ASSERT_EQ(best.tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(best.token_frames, (std::vector<int64_t>{3, 5}));
  EXPECT_NEAR(best.token_confidences[0], 0.9f, 1e-6);  // the run's best posterior
  EXPECT_NEAR(best.token_confidences[1], 0.8f, 1e-6);
}

TEST(PrefixBeamSearchTest, FirstBeamLimitsTheExpandedTokens) {
  // With first_beam_size 1 only the argmax token is expanded each frame, so
  // the search degenerates to greedy with prefix merging.
  std::vector<float> lp = LogRows({{0.6f, 0.4f}, {0.6f, 0.4f}});
  PrefixBeamSearchOptions options;
  options.first_beam_size = 1;
  PrefixBeamSearch beam(options);
  beam.Search(lp.data(), 2, 2);
  ASSERT_EQ(beam.NumHypotheses(), 1);
  Hypothesis best;
  beam.GetHypothesis(0, &best);
  EXPECT_TRUE(best.tokens.empty());
  EXPECT_NEAR(best.score, std::log(0.36f), 1e-6);
}

TEST(PrefixBeamSearchTest, SecondBeamKeepsBeamSizePrefixes) {
  SyntheticLogProbsOptions gen;
  gen.num_frames = 40;
  gen.vocab_size = 12;
  gen.peak = 1.0f;
  std::vector<float> lp = SyntheticLogProbs(gen);
  for (int beam_size : {1, 3, 10}) {
    PrefixBeamSearchOptions options;
    options.beam_size = beam_size;
    PrefixBeamSearch beam(options);
    beam.Search(lp.data(), gen.num_frames, gen.vocab_size);
    ASSERT_EQ(beam.NumHypotheses(), beam_size);
    Hypothesis previous, current;
    for (int r = 0; r < beam_size; ++r) {
      beam.GetHypothesis(r, &current);
      if (r > 0) {
        EXPECT_GE(previous.score, current.score);
      }
      previous = current;
    }
  }
}

TEST(PrefixBeamSearchTest, ValidatesOptions) {
  PrefixBeamSearchOptions options;
  options.beam_size = 0;
  EXPECT_EQ(options.Validate().message(), "beam_size = 0 is outside [1, 1024]");
  options = {};
  options.first_beam_size = 5000;
  EXPECT_EQ(options.Validate().message(), "first_beam_size = 5000 is outside [1, 1024]");
  options = {};
  options.blank_skip_threshold = 1.5f;
  EXPECT_EQ(options.Validate().code(), absl::StatusCode::kInvalidArgument);
  options = {};
  options.blank_id = -1;
  EXPECT_EQ(options.Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(PrefixBeamSearchOptions{}.Validate().ok());
}

TEST(PrefixBeamSearchTest, BlankSkippingKeepsTheAnswerOnPeakyInput) {
  SyntheticLogProbsOptions gen;
  gen.num_frames = 300;
  gen.vocab_size = 50;
  gen.peak = 12.0f;
  std::vector<float> lp = SyntheticLogProbs(gen);
  PrefixBeamSearch exact(PrefixBeamSearchOptions{});
  PrefixBeamSearchOptions skipping_options;
  skipping_options.blank_skip_threshold = 0.999f;
  PrefixBeamSearch skipping(skipping_options);
  exact.Search(lp.data(), gen.num_frames, gen.vocab_size);
  skipping.Search(lp.data(), gen.num_frames, gen.vocab_size);
  Hypothesis a, b;
  exact.GetHypothesis(0, &a);
  skipping.GetHypothesis(0, &b);
  EXPECT_FALSE(a.tokens.empty());
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.token_frames, b.token_frames);
  EXPECT_NEAR(a.ctc_score, b.ctc_score, 1e-2);
}

TEST(PrefixBeamSearchTest, TokenBeamEqualsRemovingTheTokensBelowIt) {
  // Expanding only a frame's tokens within token_beam of its best is the
  // search over rows whose other tokens have probability 0: the same n-best
  // with the same scores. Random rows, so the beam cuts differently per frame.
  std::mt19937 rng(11);
  std::normal_distribution<float> noise(0.0f, 3.0f);
  const int frames = 120, vocab = 24;
  std::vector<float> lp(frames * vocab);
  for (int t = 0; t < frames; ++t) {
    float* row = lp.data() + t * vocab;
    double sum = 0;
    for (int i = 0; i < vocab; ++i) sum += std::exp(row[i] = noise(rng));
    for (int i = 0; i < vocab; ++i) row[i] -= static_cast<float>(std::log(sum));
  }
  for (const float beam : {1.0f, 2.5f, 6.0f}) {
    std::vector<float> cut = lp;
    for (int t = 0; t < frames; ++t) {
      float* row = cut.data() + t * vocab;
      const float best = *std::max_element(row, row + vocab);
      for (int i = 0; i < vocab; ++i) {
        if (row[i] < best - beam) row[i] = kLogZero;
      }
    }
    PrefixBeamSearchOptions options;
    options.first_beam_size = 8;
    options.beam_size = 6;
    PrefixBeamSearch exact(options);
    options.token_beam = beam;
    PrefixBeamSearch pruned(options);
    exact.Search(cut.data(), frames, vocab);
    pruned.Search(lp.data(), frames, vocab);
    ASSERT_EQ(exact.NumHypotheses(), pruned.NumHypotheses()) << "beam " << beam;
    for (int r = 0; r < exact.NumHypotheses(); ++r) {
      Hypothesis a, b;
      exact.GetHypothesis(r, &a);
      pruned.GetHypothesis(r, &b);
      EXPECT_EQ(a.tokens, b.tokens) << "beam " << beam << ", rank " << r;
      EXPECT_EQ(a.token_frames, b.token_frames) << "beam " << beam << ", rank " << r;
      EXPECT_FLOAT_EQ(a.score, b.score) << "beam " << beam << ", rank " << r;
    }
  }
  PrefixBeamSearchOptions bad;
  bad.token_beam = -1.0f;
  EXPECT_EQ(bad.Validate().message(), "token_beam = -1 is outside [0, 100] (0 turns it off)");
}

TEST(PrefixBeamSearchTest, ArenasStayBoundedOnLongSilence) {
  // Four minutes of silence: the best prefix stays empty while the other
  // kept prefixes (single noise tokens) extend their alignments every frame,
  // about nine new alignment nodes per frame. Compaction must keep both
  // arenas at their 1024-node floor instead of growing with the input.
  SyntheticLogProbsOptions gen;
  gen.num_frames = 6000;
  gen.vocab_size = 40;
  gen.blank_frame_ratio = 1.0f;
  gen.peak = 12.0f;
  std::vector<float> lp = SyntheticLogProbs(gen);
  PrefixBeamSearch beam(PrefixBeamSearchOptions{});
  size_t max_trie = 0, max_paths = 0, previous_paths = 0;
  int path_compactions = 0;
  for (int t = 0; t < gen.num_frames; ++t) {
    beam.Search(lp.data() + t * gen.vocab_size, 1, gen.vocab_size);
    path_compactions += beam.path_nodes() < previous_paths;
    previous_paths = beam.path_nodes();
    max_trie = std::max(max_trie, beam.trie_nodes());
    max_paths = std::max(max_paths, beam.path_nodes());
  }
  EXPECT_GE(path_compactions, 10);
  // One frame adds at most beam_size nodes to each arena.
  EXPECT_LE(max_trie, 1024u + 10u);
  EXPECT_LE(max_paths, 1024u + 10u);
  Hypothesis best;
  beam.GetHypothesis(0, &best);
  EXPECT_TRUE(best.tokens.empty());
}

TEST(PrefixBeamSearchTest, ResetGivesIdenticalResults) {
  SyntheticLogProbsOptions gen;
  gen.num_frames = 200;
  gen.vocab_size = 30;
  std::vector<float> lp = SyntheticLogProbs(gen);
  PrefixBeamSearch beam(PrefixBeamSearchOptions{});
  beam.Search(lp.data(), gen.num_frames, gen.vocab_size);
  std::vector<Hypothesis> first(beam.NumHypotheses());
  for (int r = 0; r < beam.NumHypotheses(); ++r) beam.GetHypothesis(r, &first[r]);
  beam.Reset();
  EXPECT_EQ(beam.num_frames(), 0);
  EXPECT_FALSE(beam.DecodedSomething());
  beam.Search(lp.data(), gen.num_frames, gen.vocab_size);
  ASSERT_EQ(beam.NumHypotheses(), static_cast<int>(first.size()));
  for (int r = 0; r < beam.NumHypotheses(); ++r) {
    Hypothesis again;
    beam.GetHypothesis(r, &again);
    EXPECT_EQ(again.tokens, first[r].tokens);
    EXPECT_EQ(again.token_frames, first[r].token_frames);
    EXPECT_EQ(again.score, first[r].score);
  }
}

}  // namespace
}  // namespace oasr::decoder
