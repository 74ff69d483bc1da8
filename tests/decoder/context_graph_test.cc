// Phrase tokenisation, the boosting automaton, and boosting inside the beam
// search.
#include "decoder/context_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "decoder/phrase_tokenizer.h"
#include "decoder/prefix_beam_search.h"
#include "tests/decoder/test_util.h"

namespace oasr::decoder {
namespace {

using ::testing::HasSubstr;
using testing::LogRows;
using testing::MakeUnits;

const char kMark[] = "\xe2\x96\x81";  // ▁
const char kNi[] = "\xe4\xbd\xa0";    // 你
const char kHao[] = "\xe5\xa5\xbd";   // 好

std::shared_ptr<const SymbolTable> BpeUnits() {
  const std::string m = kMark;
  return MakeUnits({"<blank>", "<unk>", m + "HELLO", m + "WOR", "LD", m + "W", "OR", "L", "D", m,
                    kNi, kHao, m + "A", "B", m + "AB", "C", "BC", "<sos/eos>"});
}

std::vector<int32_t> Ids(const SymbolTable& units, const std::vector<std::string>& tokens) {
  std::vector<int32_t> ids;
  for (const std::string& t : tokens) ids.push_back(units.Find(t));
  return ids;
}

TEST(PhraseTokenizerTest, SplitsBpeWordsIntoFewestUnits) {
  const auto units = BpeUnits();
  const std::string m = kMark;
  absl::StatusOr<std::vector<int32_t>> tokens = TokenizePhrase("HELLO WORLD", *units);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, Ids(*units, {m + "HELLO", m + "WOR", "LD"}));
}

TEST(PhraseTokenizerTest, FallsBackToUpperCase) {
  const auto units = BpeUnits();
  const std::string m = kMark;
  absl::StatusOr<std::vector<int32_t>> tokens = TokenizePhrase("  hello\tworld ", *units);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, Ids(*units, {m + "HELLO", m + "WOR", "LD"}));
}

TEST(PhraseTokenizerTest, EqualSplitsPreferTheLongestFirstUnit) {
  const auto units = BpeUnits();
  const std::string m = kMark;
  // ▁AB + C and ▁A + BC both take two units.
  absl::StatusOr<std::vector<int32_t>> tokens = TokenizePhrase("ABC", *units);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, Ids(*units, {m + "AB", "C"}));
}

TEST(PhraseTokenizerTest, CjkInsideABpeVocabularyDropsTheMarker) {
  const auto units = BpeUnits();
  const std::string m = kMark;
  absl::StatusOr<std::vector<int32_t>> tokens =
      TokenizePhrase(std::string("hello ") + kNi + kHao, *units);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, Ids(*units, {m + "HELLO", kNi, kHao}));
}

TEST(PhraseTokenizerTest, CharacterVocabularyIgnoresSpaces) {
  const auto units =
      MakeUnits({"<blank>", "<unk>", kNi, kHao, std::string(kNi) + kHao, "<sos/eos>"});
  absl::StatusOr<std::vector<int32_t>> tokens =
      TokenizePhrase(std::string(kHao) + " " + kNi + kHao, *units);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, (std::vector<int32_t>{3, 4}));
}

TEST(PhraseTokenizerTest, ReportsWhatCannotBeTokenised) {
  const auto units = BpeUnits();
  EXPECT_THAT(std::string(TokenizePhrase("hello xyz", *units).status().message()),
              HasSubstr("no unit covers \"X\""));
  EXPECT_EQ(TokenizePhrase(" \t", *units).status().message(), "phrase is empty");
  EXPECT_THAT(std::string(TokenizePhrase("\xff", *units).status().message()),
              HasSubstr("not valid UTF-8"));
  // Special units are never used, even when spelled out.
  EXPECT_EQ(TokenizePhrase("<unk>", *units).status().code(), absl::StatusCode::kInvalidArgument);
}

std::shared_ptr<const ContextGraph> Graph(const std::vector<TokenPhrase>& phrases, int vocab = 10) {
  absl::StatusOr<std::shared_ptr<const ContextGraph>> graph = ContextGraph::Build(phrases, vocab);
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *graph;
}

// Feeds `tokens` from the root; returns the bonus (sum of deltas).
float Walk(const ContextGraph& graph, const std::vector<int32_t>& tokens, int32_t* state) {
  float total = 0.0f;
  *state = ContextGraph::kRoot;
  for (int32_t token : tokens) {
    float delta = 0.0f;
    *state = graph.Step(*state, token, &delta);
    total += delta;
  }
  return total;
}

TEST(ContextGraphTest, PartialMatchEarnsPerTokenAndBreakingCancelsIt) {
  const auto graph = Graph({{{1, 2, 3}, 2.0f}, {{3, 4}, 1.0f}});
  int32_t state = 0;
  EXPECT_FLOAT_EQ(Walk(*graph, {1}, &state), 2.0f);
  EXPECT_FLOAT_EQ(Walk(*graph, {1, 2}, &state), 4.0f);
  EXPECT_FLOAT_EQ(graph->Pending(state), 4.0f);
  EXPECT_FLOAT_EQ(Walk(*graph, {1, 2, 5}, &state), 0.0f);
  EXPECT_EQ(state, ContextGraph::kRoot);
}

TEST(ContextGraphTest, CompletedPhrasesKeepTheirBonus) {
  const auto graph = Graph({{{1, 2, 3}, 2.0f}, {{3, 4}, 1.0f}});
  int32_t state = 0;
  // 1 2 3 completes the first phrase (6) and starts the second (pending 1).
  EXPECT_FLOAT_EQ(Walk(*graph, {1, 2, 3}, &state), 7.0f);
  EXPECT_FLOAT_EQ(graph->Pending(state), 1.0f);
  EXPECT_FLOAT_EQ(Walk(*graph, {1, 2, 3, 4}, &state), 8.0f);
  EXPECT_FLOAT_EQ(graph->Pending(state), 0.0f);
  EXPECT_FLOAT_EQ(Walk(*graph, {1, 2, 3, 9}, &state), 6.0f);
  // Matches restart after unrelated tokens and count every occurrence.
  EXPECT_FLOAT_EQ(Walk(*graph, {7, 3, 4, 8, 3, 4}, &state), 4.0f);
}

TEST(ContextGraphTest, PhrasesInsideLongerPartialMatchesCount) {
  // 1 2 3 is a partial match of 1 2 3 4 that contains the phrase 2 3.
  const auto graph = Graph({{{1, 2, 3, 4}, 1.0f}, {{2, 3}, 1.0f}});
  int32_t state = 0;
  EXPECT_FLOAT_EQ(Walk(*graph, {1, 2, 3}, &state), 2.0f + 3.0f);
  EXPECT_FLOAT_EQ(Walk(*graph, {1, 2, 3, 9}, &state), 2.0f);
}

TEST(ContextGraphTest, SharedPrefixesTakeTheLargestBoost) {
  const auto graph = Graph({{{1, 2}, 1.0f}, {{1, 3}, 3.0f}, {{1, 2}, 0.5f}});
  int32_t state = 0;
  EXPECT_FLOAT_EQ(Walk(*graph, {1}, &state), 3.0f);
  // Completing 1 2 earns that phrase's own bonus (largest duplicate: 1 x 2).
  EXPECT_FLOAT_EQ(Walk(*graph, {1, 2}, &state), 2.0f);
  EXPECT_FLOAT_EQ(Walk(*graph, {1, 3}, &state), 6.0f);
}

TEST(ContextGraphTest, BuildFromTextTokenises) {
  const auto units = BpeUnits();
  absl::StatusOr<std::shared_ptr<const ContextGraph>> graph =
      ContextGraph::BuildFromText({{"hello world", 1.5f}}, *units);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::string m = kMark;
  int32_t state = 0;
  EXPECT_FLOAT_EQ(Walk(**graph, Ids(*units, {m + "HELLO", m + "WOR", "LD"}), &state), 4.5f);
  EXPECT_THAT(
      std::string(
          ContextGraph::BuildFromText({{"ok", 1.0f}, {"zzz", 1.0f}}, *units).status().message()),
      HasSubstr("phrases[0]"));
}

TEST(ContextGraphTest, RejectsBadPhrases) {
  EXPECT_THAT(std::string(ContextGraph::Build({{{}, 1.0f}}, 10).status().message()),
              HasSubstr("phrases[0] has no tokens"));
  EXPECT_THAT(std::string(ContextGraph::Build({{{1}, 1.0f}, {{10}, 1.0f}}, 10).status().message()),
              HasSubstr("phrases[1] token 10 is outside [0, 10)"));
  EXPECT_THAT(std::string(ContextGraph::Build({{{1}, 0.0f}}, 10).status().message()),
              HasSubstr("phrases[0].boost = 0 must be in (0, 50]"));
  EXPECT_EQ(ContextGraph::Build({{{1}, NAN}}, 10).status().code(),
            absl::StatusCode::kInvalidArgument);
  ContextGraphConfig config;
  config.max_phrases = 1;
  EXPECT_THAT(
      std::string(ContextGraph::Build({{{1}, 1.0f}, {{2}, 1.0f}}, 10, config).status().message()),
      HasSubstr("2 phrases exceed context.max_phrases = 1"));
  config = {};
  config.max_phrase_tokens = 2;
  EXPECT_THAT(std::string(ContextGraph::Build({{{1, 2, 3}, 1.0f}}, 10, config).status().message()),
              HasSubstr("more than context.max_phrase_tokens = 2"));
  config = {};
  config.max_boost = -1.0f;
  EXPECT_THAT(std::string(ContextGraph::Build({}, 10, config).status().message()),
              HasSubstr("context.max_boost = -1"));
}

// Frames: 1 (0.9), blank, then 3 (0.5) against 2 (0.4), blank. Without
// boosting "1 3" wins. Token 4 never occurs (probability 0).
std::vector<float> CompetingInput() {
  // Distinct values everywhere, so that no two prefixes tie exactly.
  return LogRows({{0.06f, 0.9f, 0.023f, 0.017f, 0.0f},
                  {0.9f, 0.06f, 0.021f, 0.019f, 0.0f},
                  {0.1f, 0.0001f, 0.4f, 0.5f, 0.0f},
                  {0.9f, 0.031f, 0.029f, 0.04f, 0.0f}});
}

struct Searched {
  std::vector<Hypothesis> nbest;
  std::vector<Hypothesis> before_finalize;
};

Searched Search(const std::shared_ptr<const ContextGraph>& graph) {
  std::vector<float> lp = CompetingInput();
  // A beam wide enough to keep every prefix, so that boosting cannot change
  // which prefixes survive, only how they rank.
  PrefixBeamSearchOptions options;
  options.beam_size = 100;
  PrefixBeamSearch search(options);
  search.SetContextGraph(graph.get());
  search.Search(lp.data(), 4, 5);
  Searched out;
  for (int r = 0; r < search.NumHypotheses(); ++r) {
    search.GetHypothesis(r, &out.before_finalize.emplace_back());
  }
  search.Finalize();
  for (int r = 0; r < search.NumHypotheses(); ++r)
    search.GetHypothesis(r, &out.nbest.emplace_back());
  return out;
}

TEST(BoostedSearchTest, CompletedPhraseWinsExactlyWhenItsBonusIsEnough) {
  const Searched plain = Search(nullptr);
  ASSERT_EQ(plain.nbest[0].tokens, (std::vector<int32_t>{1, 3}));
  float gap = 0.0f;  // ctc score of "1 3" minus that of "1 2"
  for (const Hypothesis& h : plain.nbest) {
    if (h.tokens == std::vector<int32_t>{1, 2}) gap = plain.nbest[0].ctc_score - h.ctc_score;
  }
  ASSERT_GT(gap, 0.1f);
  // The phrase "1 2" earns 2 * boost once completed.
  const Searched weak = Search(Graph({{{1, 2}, gap / 2 - 0.01f}}, 5));
  EXPECT_EQ(weak.nbest[0].tokens, (std::vector<int32_t>{1, 3}));
  const Searched strong = Search(Graph({{{1, 2}, gap / 2 + 0.01f}}, 5));
  ASSERT_EQ(strong.nbest[0].tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_NEAR(strong.nbest[0].context_score, gap + 0.02f, 1e-5);
  EXPECT_NEAR(strong.nbest[0].score, strong.nbest[0].ctc_score + gap + 0.02f, 1e-5);
}

TEST(BoostedSearchTest, HalfMatchedPhraseLeavesNoBonusBehind) {
  const Searched plain = Search(nullptr);
  // "1 2 4" is matched up to "1 2" but never completed.
  const Searched half = Search(Graph({{{1, 2, 4}, 1.0f}}, 5));
  // While decoding the partial match is ahead ...
  EXPECT_EQ(half.before_finalize[0].tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_FLOAT_EQ(half.before_finalize[0].context_score, 2.0f);
  // ... and once the input ends every trace of it is gone.
  ASSERT_EQ(half.nbest.size(), plain.nbest.size());
  for (size_t r = 0; r < plain.nbest.size(); ++r) {
    EXPECT_EQ(half.nbest[r].tokens, plain.nbest[r].tokens);
    EXPECT_EQ(half.nbest[r].context_score, 0.0f);
    EXPECT_FLOAT_EQ(half.nbest[r].score, plain.nbest[r].score);
  }
}

TEST(BoostedSearchTest, UnrelatedPhraseChangesNothing) {
  const Searched plain = Search(nullptr);
  const Searched other = Search(Graph({{{4, 4}, 5.0f}}, 5));
  ASSERT_EQ(other.nbest.size(), plain.nbest.size());
  for (size_t r = 0; r < plain.nbest.size(); ++r) {
    EXPECT_EQ(other.nbest[r].tokens, plain.nbest[r].tokens);
    EXPECT_EQ(other.nbest[r].score, plain.nbest[r].score);
  }
}

}  // namespace
}  // namespace oasr::decoder
