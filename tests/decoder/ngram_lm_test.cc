// The unit n-gram language model (ARPA loading, backoff scoring, state
// minimisation, lm.json) and its shallow fusion in the prefix beam search.
#include "decoder/ngram_lm.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_replace.h"
#include "decoder/ctc_decoder.h"
#include "decoder/prefix_beam_search.h"
#include "tests/decoder/test_util.h"

namespace oasr::decoder {
namespace {

constexpr float kLn10 = 2.302585093f;

// Units: 0 <blank>, 1 <unk>, 2 a, 3 b, 4 c, 5 <sos/eos>.
constexpr int32_t kA = 2, kB = 3, kC = 4;

// A trigram model whose probabilities are easy to follow by hand (log10).
constexpr char kArpa[] = R"(some preamble the format allows

\data\
ngram 1=6
ngram 2=4
ngram 3=2

\1-grams:
-1.0	<unk>
-99	<s>	-0.5
-0.5	</s>
-0.6	a	-0.3
-0.7	b	-0.2
-0.9	c

\2-grams:
-0.2	<s> a	-0.1
-0.3	a b	-0.25
-0.4	b a
-0.35	a </s>

\3-grams:
-0.05	<s> a b
-0.15	a b a

\end\
)";

std::shared_ptr<const SymbolTable> Units() {
  return testing::MakeUnits({"<blank>", "<unk>", "a", "b", "c", "<sos/eos>"});
}

class NgramLmTest : public testing::TempDirTest {
 protected:
  absl::StatusOr<std::shared_ptr<const NgramLm>> Load(const std::string& text) {
    return NgramLm::LoadArpa(Write("lm.arpa", text), *Units());
  }
};

// ln P of `units` one after the other from the sentence start, then </s>.
float SentenceScore(const NgramLm& lm, const std::vector<int32_t>& units) {
  NgramLm::State state = lm.StartState();
  float total = 0.0f;
  for (int32_t u : units) total += lm.Score(state, u, &state);
  return total + lm.FinalScore(state);
}

TEST_F(NgramLmTest, ScoresWithTheBackoffRule) {
  auto lm = Load(kArpa);
  ASSERT_TRUE(lm.ok()) << lm.status();
  EXPECT_EQ((*lm)->order(), 3);
  EXPECT_EQ((*lm)->num_ngrams(1), 6);
  EXPECT_EQ((*lm)->num_ngrams(2), 4);
  EXPECT_EQ((*lm)->num_ngrams(3), 2);

  NgramLm::State s = (*lm)->StartState();
  EXPECT_NEAR((*lm)->Score(s, kA, &s), -0.2f * kLn10, 1e-5);   // "<s> a" listed
  EXPECT_NEAR((*lm)->Score(s, kB, &s), -0.05f * kLn10, 1e-5);  // "<s> a b" listed
  EXPECT_NEAR((*lm)->Score(s, kA, &s), -0.15f * kLn10, 1e-5);  // "a b a" listed
  // "b a" extends nothing: the state is "a", whose backoff applies to c.
  EXPECT_NEAR((*lm)->Score(s, kC, &s), (-0.3f - 0.9f) * kLn10, 1e-5);
  // c extends nothing either: back at the empty history.
  EXPECT_NEAR((*lm)->FinalScore(s), -0.5f * kLn10, 1e-5);

  // Two backoffs, then the unigram.
  s = (*lm)->StartState();
  (*lm)->Score(s, kA, &s);
  EXPECT_NEAR((*lm)->Score(s, kC, &s), (-0.1f - 0.3f - 0.9f) * kLn10, 1e-5);
  EXPECT_NEAR(SentenceScore(**lm, {kA, kB, kA, kC}), (-0.2f - 0.05f - 0.15f - 1.2f - 0.5f) * kLn10,
              1e-4);
  EXPECT_NEAR(SentenceScore(**lm, {kA}), (-0.2f - 0.1f - 0.35f) * kLn10, 1e-5);
}

TEST_F(NgramLmTest, StatesForgetWhatCannotMatter) {
  auto lm = Load(kArpa);
  ASSERT_TRUE(lm.ok()) << lm.status();
  // After "a b a" only the last "a" matters, as after "c a".
  NgramLm::State x = (*lm)->StartState(), y = (*lm)->StartState();
  for (int32_t u : {kA, kB, kA}) (*lm)->Score(x, u, &x);
  for (int32_t u : {kC, kA}) (*lm)->Score(y, u, &y);
  EXPECT_EQ(x, y);
  // After "<s> a" the sentence start still matters.
  NgramLm::State z = (*lm)->StartState();
  (*lm)->Score(z, kA, &z);
  EXPECT_NE(z, y);
}

// Each thread remembers Score's answers by model, state and unit: the same
// questions again, and the same states of another model, get exactly what a
// thread that remembers nothing computes.
TEST_F(NgramLmTest, RememberedScoresAreTheModelsOwn) {
  auto first = Load(kArpa);
  ASSERT_TRUE(first.ok()) << first.status();
  // The same n-grams with other probabilities: the same states, other scores.
  std::string other = kArpa;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"-0.2\t<s> a", "-0.6\t<s> a"},
                                 {"-0.05\t<s> a b", "-0.5\t<s> a b"},
                                 {"-0.9\tc", "-0.1\tc"},
                                 {"-0.6\ta\t-0.3", "-0.4\ta\t-0.7"}}) {
    const size_t at = other.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    other.replace(at, from.size(), to);
  }
  auto second = NgramLm::LoadArpa(Write("other.arpa", other), *Units());
  ASSERT_TRUE(second.ok()) << second.status();
  const std::vector<std::vector<int32_t>> sentences = {
      {kA, kB, kA, kC}, {kA}, {kC, kA, kB}, {kB, kB, kC, kA, kA}, {kA, kC, kC}};
  // Every score and state along the sentences, as a fresh thread sees them.
  auto trace = [&](const NgramLm& lm) {
    std::vector<float> out;
    for (const auto& units : sentences) {
      NgramLm::State state = lm.StartState();
      for (int32_t u : units) {
        out.push_back(lm.Score(state, u, &state));
        out.push_back(static_cast<float>(state));
      }
    }
    return out;
  };
  std::vector<float> fresh_first, fresh_second;
  std::thread([&] { fresh_first = trace(**first); }).join();
  std::thread([&] { fresh_second = trace(**second); }).join();
  ASSERT_NE(fresh_first, fresh_second);
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(trace(**first), fresh_first) << round;
    EXPECT_EQ(trace(**second), fresh_second) << round;
  }
  // A model loaded after one is gone (perhaps at its address) is not it.
  first->reset();
  auto third = NgramLm::LoadArpa(Write("other.arpa", other), *Units());
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(trace(**third), fresh_second);
  auto fourth = Load(kArpa);
  ASSERT_TRUE(fourth.ok()) << fourth.status();
  EXPECT_EQ(trace(**fourth), fresh_first);
}

TEST_F(NgramLmTest, UnlistedUnitsGetTheUnknownProbability) {
  auto units = testing::MakeUnits({"<blank>", "<unk>", "a", "b", "c", "d", "<sos/eos>"});
  auto lm = NgramLm::LoadArpa(Write("lm.arpa", kArpa), *units);
  ASSERT_TRUE(lm.ok()) << lm.status();
  NgramLm::State s = (*lm)->StartState();
  // d (id 5) is not in the file: backoff of <s>, then P(<unk>).
  EXPECT_NEAR((*lm)->Score(s, 5, &s), (-0.5f - 1.0f) * kLn10, 1e-5);
}

TEST_F(NgramLmTest, WordsThatAreNotUnitsAreSkippedWithTheirNgrams) {
  std::string text =
      absl::StrReplaceAll(kArpa, {{"ngram 1=6", "ngram 1=7"},
                                  {"ngram 2=4", "ngram 2=5"},
                                  {"-0.9\tc\n", "-0.9\tc\n-2.0\tzz\n"},
                                  {"-0.35\ta </s>\n", "-0.35\ta </s>\n-0.1\ta zz\n"}});
  auto lm = Load(text);
  ASSERT_TRUE(lm.ok()) << lm.status();
  EXPECT_EQ((*lm)->skipped_words(), 1);
  EXPECT_EQ((*lm)->num_ngrams(2), 4);
  EXPECT_NEAR(SentenceScore(**lm, {kA}), (-0.2f - 0.1f - 0.35f) * kLn10, 1e-5);
}

TEST_F(NgramLmTest, ReadsLinesLongerThanItsBuffer) {
  // The reader takes 4 KiB at a time; a 20,000-byte preamble line spans five.
  auto lm = Load(std::string(20000, 'x') + "\n" + kArpa);
  ASSERT_TRUE(lm.ok()) << lm.status();
  EXPECT_NEAR(SentenceScore(**lm, {kA}), (-0.2f - 0.1f - 0.35f) * kLn10, 1e-5);
}

TEST_F(NgramLmTest, NulBytesBelongToTheirLine) {
  // Found by tests/fuzz (arpa): a line starting with NUL ran the reader off
  // the front of an empty string, and the line vanished into the next one.
  using std::string_literals::operator""s;
  auto lm = Load("pre\0amble\n\0\n"s + kArpa);
  ASSERT_TRUE(lm.ok()) << lm.status();
  EXPECT_NEAR(SentenceScore(**lm, {kA}), (-0.2f - 0.1f - 0.35f) * kLn10, 1e-5);
  // Line 15, after c's unigram, is one NUL: a malformed entry, named by its line.
  auto bad = Load(absl::StrReplaceAll(kArpa, {{"-0.9\tc\n", "-0.9\tc\n\0\n"s}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("lm.arpa:15: expected a log-probability"),
            std::string::npos)
      << bad.status();
}

TEST_F(NgramLmTest, AHugeHeaderCountIsAMismatchNotAnAllocation) {
  // Found by tests/fuzz (arpa): "ngram 2=2111111111111111111" reserved that
  // many entries up front and threw std::length_error.
  auto lm = Load(absl::StrReplaceAll(kArpa, {{"ngram 2=4", "ngram 2=2111111111111111111"}}));
  ASSERT_FALSE(lm.ok());
  EXPECT_NE(lm.status().message().find("the header says 2111111111111111111"), std::string::npos)
      << lm.status();
}

TEST_F(NgramLmTest, ReadsGzip) {
  const std::string path = (dir_ / "lm.arpa.gz").string();
  gzFile out = gzopen(path.c_str(), "wb");
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(gzputs(out, kArpa), static_cast<int>(std::string(kArpa).size()));
  gzclose(out);
  auto lm = NgramLm::LoadArpa(path, *Units());
  ASSERT_TRUE(lm.ok()) << lm.status();
  EXPECT_NEAR(SentenceScore(**lm, {kA, kB, kA, kC}), (-0.2f - 0.05f - 0.15f - 1.2f - 0.5f) * kLn10,
              1e-4);
}

TEST_F(NgramLmTest, RefusesMalformedFiles) {
  EXPECT_EQ(NgramLm::LoadArpa((dir_ / "missing.arpa").string(), *Units()).status().code(),
            absl::StatusCode::kNotFound);
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"no data here\n", "no \\data\\"},
      {absl::StrReplaceAll(kArpa, {{"ngram 2=4", "ngram 2=5"}}), "the header says 5"},
      // "a b a" without "a b": its history is not listed.
      {absl::StrReplaceAll(kArpa, {{"ngram 2=4", "ngram 2=3"}, {"-0.3\ta b\t-0.25\n", ""}}),
       "first 2 words are not listed"},
      // "a b a" without "b a": its suffix is not listed.
      {absl::StrReplaceAll(kArpa, {{"ngram 2=4", "ngram 2=3"}, {"-0.4\tb a\n", ""}}),
       "last 2 words are not listed"},
      {absl::StrReplaceAll(kArpa,
                           {{"-0.4\tb a\n", "-0.4\tb a\n-0.4\tb a\n"}, {"ngram 2=4", "ngram 2=5"}}),
       "listed twice"},
      {absl::StrReplaceAll(kArpa, {{"-0.9\tc\n", "0.5\tc\n"}}), "not a number <= 0"},
      {absl::StrReplaceAll(kArpa, {{"-0.9\tc\n", "-0.9\tc d e\n"}}), "optional backoff"},
      {absl::StrReplaceAll(kArpa, {{"\\end\\", ""}}), "\\end\\"},
      {absl::StrReplaceAll(kArpa, {{"ngram 1=6", "ngram 1=5"},
                                   {"ngram 2=4", "ngram 2=3"},
                                   {"-0.5\t</s>\n", ""},
                                   {"-0.35\ta </s>\n", ""}}),
       "<s> and </s>"},
  };
  for (const Case& c : cases) {
    auto lm = Load(c.text);
    ASSERT_FALSE(lm.ok()) << c.message;
    EXPECT_EQ(lm.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(lm.status().message().find(c.message), std::string::npos) << lm.status();
  }
}

TEST_F(NgramLmTest, ReadsTheModelDirectorySpec) {
  auto none = ReadLanguageModelSpec(dir_.string());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());

  Write("lm.json", R"({"file": "lm.arpa.gz", "weight": 0.7, "token_bonus": 1.5, "order": 6})");
  auto spec = ReadLanguageModelSpec(dir_.string());
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->has_value());
  EXPECT_EQ((*spec)->path, (dir_ / "lm.arpa.gz").string());
  EXPECT_FLOAT_EQ((*spec)->weight, 0.7f);
  EXPECT_FLOAT_EQ((*spec)->token_bonus, 1.5f);

  for (const char* bad : {"[1]", "{\"weight\": 0.5}", "{\"file\": 3}",
                          "{\"file\": \"x\", \"weight\": \"high\"}", "{not json"}) {
    Write("lm.json", bad);
    auto result = ReadLanguageModelSpec(dir_.string());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

// Acoustics slightly prefer c, the LM strongly prefers a.
std::vector<float> AmbiguousFrames() {
  return testing::LogRows({{0.1f, 0.0001f, 0.4f, 0.0001f, 0.5f, 0.0001f},
                           {0.9f, 0.0001f, 0.05f, 0.0001f, 0.05f, 0.0001f}});
}

TEST_F(NgramLmTest, FusionChangesTheBestPrefixAndReportsItsScore) {
  auto lm = Load(kArpa);
  ASSERT_TRUE(lm.ok()) << lm.status();
  std::vector<float> frames = AmbiguousFrames();
  Hypothesis best;

  PrefixBeamSearchOptions options;
  options.beam_size = options.first_beam_size = 4;
  PrefixBeamSearch plain(options);
  plain.Search(frames.data(), 2, 6);
  plain.Finalize();
  plain.GetHypothesis(0, &best);
  EXPECT_EQ(best.tokens, std::vector<int32_t>{kC});
  EXPECT_EQ(best.lm_score, 0.0f);

  options.lm = *lm;
  options.lm_weight = 0.5f;
  options.lm_token_bonus = 0.25f;
  PrefixBeamSearch fused(options);
  fused.Search(frames.data(), 2, 6);
  // Before the end: the tokens' scores and bonuses, no </s> yet.
  fused.GetHypothesis(0, &best);
  ASSERT_EQ(best.tokens, std::vector<int32_t>{kA});
  EXPECT_NEAR(best.lm_score, 0.5f * -0.2f * kLn10 + 0.25f, 1e-5);
  fused.Finalize();
  fused.GetHypothesis(0, &best);
  ASSERT_EQ(best.tokens, std::vector<int32_t>{kA});
  EXPECT_NEAR(best.lm_score, 0.5f * SentenceScore(**lm, {kA}) + 0.25f, 1e-5);
  EXPECT_NEAR(best.score, best.ctc_score + best.lm_score, 1e-5);

  // Weight 0 and no bonus is the plain search.
  options.lm_weight = 0.0f;
  options.lm_token_bonus = 0.0f;
  PrefixBeamSearch weightless(options);
  weightless.Search(frames.data(), 2, 6);
  weightless.Finalize();
  weightless.GetHypothesis(0, &best);
  EXPECT_EQ(best.tokens, std::vector<int32_t>{kC});
}

TEST_F(NgramLmTest, OptionsAndDecoderCheckTheModel) {
  PrefixBeamSearchOptions options;
  options.lm_weight = -1.0f;
  EXPECT_NE(options.Validate().message().find("lm_weight"), std::string::npos);
  options.lm_weight = 0.5f;
  options.lm_token_bonus = 30.0f;
  EXPECT_NE(options.Validate().message().find("lm_token_bonus"), std::string::npos);

  auto lm = Load(kArpa);
  ASSERT_TRUE(lm.ok()) << lm.status();
  CtcDecoderConfig config;
  config.search.lm = *lm;
  auto mismatched = CtcDecoder::Create(config, testing::NumberedUnits(8));
  EXPECT_EQ(mismatched.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mismatched.status().message().find("search.lm"), std::string::npos);
  auto decoder = CtcDecoder::Create(config, Units());
  ASSERT_TRUE(decoder.ok()) << decoder.status();
}

}  // namespace
}  // namespace oasr::decoder
