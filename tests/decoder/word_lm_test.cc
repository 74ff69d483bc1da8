// The word language model with its lexicon (decoder/word_lm.h): scores worked
// out by hand, look-ahead corrections that add up to the sentence's ln P,
// segmentation-independent states, unknown and unfinished words, load errors,
// lm.json's "words", and its fusion in the prefix beam search.
#include "decoder/word_lm.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "decoder/ctc_decoder.h"
#include "decoder/prefix_beam_search.h"
#include "tests/decoder/test_util.h"

namespace oasr::decoder {
namespace {

constexpr float kLn10 = 2.302585093f;

// Words cab, cat, dog; log10 probabilities.
constexpr char kArpa[] = R"(\data\
ngram 1=6
ngram 2=2

\1-grams:
-1.0	<unk>
-99	<s>	-0.3
-0.7	</s>
-0.5	cab	-0.2
-0.9	cat
-1.2	dog

\2-grams:
-0.1	<s> cab
-0.2	cab dog

\end\
)";

// "▁" spelled out, so that the units below read as text.
#define WS "\xe2\x96\x81"
enum Unit : int32_t { kBlank, kUnk, kWordC, kA, kB, kT, kX, kWordDog, kWordCa, kEos, kNumUnits };

std::shared_ptr<const SymbolTable> Units() {
  return testing::MakeUnits(
      {"<blank>", "<unk>", WS "c", "a", "b", "t", "x", WS "dog", WS "ca", "<sos/eos>"});
}

class WordLmTest : public testing::TempDirTest {
 protected:
  std::shared_ptr<const WordLm> Load() {
    auto lm = WordLm::Load(Write("words.arpa", kArpa), *Units());
    EXPECT_TRUE(lm.ok()) << lm.status();
    return lm.ok() ? *lm : nullptr;
  }
};

// The units one after the other from the start, then Finish.
WordScore SentenceScore(const WordLm& lm, const std::vector<int32_t>& units) {
  WordLm::State state = lm.StartState();
  WordScore total;
  for (int32_t u : units) total += lm.Extend(state, u, &state);
  total += lm.Finish(state);
  return total;
}

TEST_F(WordLmTest, LooksAheadWhileSpellingAndScoresWordsWhenTheyEnd) {
  auto lm = Load();
  ASSERT_NE(lm, nullptr);
  EXPECT_EQ(lm->num_words(), 3);
  EXPECT_EQ(lm->num_units(), kNumUnits);
  WordLm::State s = lm->StartState();
  // "c": cab (-0.5) and cat (-0.9) are ahead; the best is cab.
  WordScore d = lm->Extend(s, kWordC, &s);
  EXPECT_NEAR(d.log_prob, -0.5f * kLn10, 1e-5);
  EXPECT_EQ(d.words, 0);
  EXPECT_EQ(d.unknown_words, 0);
  // "ca", "cab": still cab ahead.
  EXPECT_NEAR(lm->Extend(s, kA, &s).log_prob, 0.0f, 1e-6);
  EXPECT_NEAR(lm->Extend(s, kB, &s).log_prob, 0.0f, 1e-6);
  // "▁dog" ends cab: P(cab | <s>) = -0.1 replaces the look-ahead; dog is ahead.
  d = lm->Extend(s, kWordDog, &s);
  EXPECT_NEAR(d.log_prob, (-0.1f + 0.5f - 1.2f) * kLn10, 1e-5);
  EXPECT_EQ(d.words, 1);
  // The end: P(dog | cab) = -0.2 replaces dog's look-ahead, then P(</s> | dog).
  d = lm->Finish(s);
  EXPECT_NEAR(d.log_prob, (-0.2f + 1.2f - 0.7f) * kLn10, 1e-5);
  EXPECT_EQ(d.words, 1);
  // The changes add up to the sentence's ln P.
  const WordScore total = SentenceScore(*lm, {kWordC, kA, kB, kWordDog});
  EXPECT_NEAR(total.log_prob, (-0.1f - 0.2f - 0.7f) * kLn10, 1e-5);
  EXPECT_EQ(total.words, 2);
  EXPECT_EQ(total.unknown_words, 0);
}

TEST_F(WordLmTest, AnySegmentationOfAWordReachesTheSameState) {
  auto lm = Load();
  ASSERT_NE(lm, nullptr);
  WordLm::State x = lm->StartState(), y = lm->StartState();
  WordScore dx, dy;
  for (int32_t u : {kWordC, kA, kT}) dx += lm->Extend(x, u, &x);
  for (int32_t u : {kWordCa, kT}) dy += lm->Extend(y, u, &y);
  EXPECT_EQ(x.history, y.history);
  EXPECT_EQ(x.node, y.node);
  EXPECT_NEAR(dx.log_prob, dy.log_prob, 1e-6);
  // cat: no bigram after <s>, so the backoff of <s> applies.
  EXPECT_NEAR(SentenceScore(*lm, {kWordCa, kT}).log_prob, (-0.3f - 0.9f - 0.7f) * kLn10, 1e-5);
}

TEST_F(WordLmTest, WordsOutsideTheLexiconScoreUnknown) {
  auto lm = Load();
  ASSERT_NE(lm, nullptr);
  // "cx" leaves the lexicon at x: from then on it expects an unknown word.
  WordLm::State s = lm->StartState();
  lm->Extend(s, kWordC, &s);
  const WordScore d = lm->Extend(s, kX, &s);
  EXPECT_EQ(s.node, WordLm::kOutside);
  EXPECT_NEAR(d.log_prob, (-1.0f + 0.5f) * kLn10, 1e-5);
  EXPECT_EQ(d.unknown_words, 1);
  // Letters after that stay outside.
  WordLm::State after;
  lm->Extend(s, kA, &after);
  EXPECT_EQ(after.node, WordLm::kOutside);
  // The sentence "cx dog": <unk> after <s> backs off (-0.3 - 1.0), dog after
  // <unk> is a unigram, then </s>.
  WordScore total = SentenceScore(*lm, {kWordC, kX, kWordDog});
  EXPECT_NEAR(total.log_prob, (-1.3f - 1.2f - 0.7f) * kLn10, 1e-5);
  EXPECT_EQ(total.words, 2);
  EXPECT_EQ(total.unknown_words, 1);
  // "ca" is only the start of words: unknown when the sentence ends there.
  total = SentenceScore(*lm, {kWordCa});
  EXPECT_NEAR(total.log_prob, (-1.3f - 0.7f) * kLn10, 1e-5);
  EXPECT_EQ(total.unknown_words, 1);
  // The unit <unk> is no spelling of any word.
  total = SentenceScore(*lm, {kWordC, kUnk});
  EXPECT_EQ(total.unknown_words, 1);
  // Nothing spelled: only </s>, after the backoff of <s>.
  total = SentenceScore(*lm, {});
  EXPECT_NEAR(total.log_prob, (-0.3f - 0.7f) * kLn10, 1e-5);
  EXPECT_EQ(total.words, 0);
}

// Extend's answers are remembered per thread by (model, state, unit): two
// models whose lexicons give the same states but whose words score
// differently never take each other's answers, also once a model is gone.
TEST_F(WordLmTest, RememberedExtensionsAreTheModelsOwn) {
  auto first = Load();
  ASSERT_NE(first, nullptr);
  std::string other = kArpa;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"-0.5\tcab", "-0.8\tcab"},
                                 {"-0.9\tcat", "-0.4\tcat"},
                                 {"-0.2\tcab dog", "-0.6\tcab dog"}}) {
    const size_t at = other.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    other.replace(at, from.size(), to);
  }
  auto second = WordLm::Load(Write("other.arpa", other), *Units());
  ASSERT_TRUE(second.ok()) << second.status();
  const std::vector<std::vector<int32_t>> sentences = {{kWordCa, kB, kWordDog},
                                                       {kWordC, kA, kT},
                                                       {kWordC, kX, kWordDog},
                                                       {kWordCa, kT, kWordCa, kB, kWordDog}};
  // Every score and state along the sentences, as a fresh thread sees them.
  auto trace = [&](const WordLm& lm) {
    std::vector<float> out;
    for (const auto& units : sentences) {
      WordLm::State state = lm.StartState();
      for (int32_t u : units) {
        const WordScore d = lm.Extend(state, u, &state);
        out.insert(out.end(),
                   {d.log_prob, static_cast<float>(d.words), static_cast<float>(d.unknown_words),
                    static_cast<float>(state.history), static_cast<float>(state.node)});
      }
    }
    return out;
  };
  std::vector<float> fresh_first, fresh_second;
  std::thread([&] { fresh_first = trace(*first); }).join();
  std::thread([&] { fresh_second = trace(**second); }).join();
  ASSERT_NE(fresh_first, fresh_second);
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(trace(*first), fresh_first) << round;
    EXPECT_EQ(trace(**second), fresh_second) << round;
  }
  // A model loaded after one is gone (perhaps at its address) is not it.
  first.reset();
  auto third = WordLm::Load(Write("third.arpa", kArpa), *Units());
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(trace(**third), fresh_first);
  EXPECT_EQ(trace(**second), fresh_second);
}

TEST_F(WordLmTest, RefusesWhatItCannotUse) {
  const std::string path = Write("words.arpa", kArpa);
  auto characters = WordLm::Load(path, *testing::MakeUnits({"<blank>", "a", "b"}));
  EXPECT_EQ(characters.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(characters.status().message().find("word starts"), std::string::npos);

  EXPECT_EQ(WordLm::Load((dir_ / "missing.arpa").string(), *Units()).status().code(),
            absl::StatusCode::kNotFound);

  std::string no_unk = kArpa;
  no_unk.replace(no_unk.find("ngram 1=6"), 9, "ngram 1=5");
  no_unk.erase(no_unk.find("-1.0\t<unk>\n"), 11);
  auto without_unk = WordLm::Load(Write("no_unk.arpa", no_unk), *Units());
  EXPECT_EQ(without_unk.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(without_unk.status().message().find("<unk>"), std::string::npos);

  std::string twice = kArpa;
  twice.replace(twice.find("-1.2\tdog"), 8, "-1.2\tcat");
  EXPECT_EQ(ReadArpaWords(Write("twice.arpa", twice)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadArpaWords(Write("empty.arpa", "\\data\\\n")).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto words = ReadArpaWords(path);
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(words->size(), 4);  // <unk> cab cat dog
  EXPECT_EQ(words->Find("<s>"), -1);
}

TEST_F(WordLmTest, AWordOfAMebibyteLoads) {
  // The lexicon was built by one call a byte of the longest word: a 200 kB
  // word overflowed the stack (seen through tests/fuzz's arpa target with a
  // hand-made file; its inputs stay under 4 kB).
  const std::string word(1 << 20, 'a');
  std::string text = kArpa;
  text.replace(text.find("ngram 1=6"), 9, "ngram 1=7");
  text.replace(text.find("-1.2\tdog\n"), 9, "-1.2\tdog\n-3.0\t" + word + "\n");
  auto lm = WordLm::Load(Write("long.arpa", text), *Units());
  ASSERT_TRUE(lm.ok()) << lm.status();
  EXPECT_EQ((*lm)->num_words(), 4);  // cab cat dog and the long one
  // The root; c, ca, cab, cat; d, do, dog; one node a byte of the long word.
  EXPECT_EQ((*lm)->lexicon_nodes(), 1u + 4u + 3u + word.size());
}

TEST_F(WordLmTest, ReadsTheWordsOfTheModelDirectorySpec) {
  Write("lm.json", R"({"words": {"file": "words.arpa.gz", "weight": 0.3, "word_bonus": 0.5,
                                 "unknown_word_penalty": 6, "order": 2}})");
  auto spec = ReadLanguageModelSpec(dir_.string());
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->has_value());
  EXPECT_EQ((*spec)->path, "");
  EXPECT_EQ((*spec)->word_path, (dir_ / "words.arpa.gz").string());
  EXPECT_FLOAT_EQ((*spec)->word_weight, 0.3f);
  EXPECT_FLOAT_EQ((*spec)->word_bonus, 0.5f);
  EXPECT_FLOAT_EQ((*spec)->unknown_word_penalty, 6.0f);

  for (const char* bad : {R"({"words": 3})", R"({"words": {"weight": 1}})",
                          R"({"words": {"file": "w.arpa", "word_bonus": "x"}})", R"({})"}) {
    Write("lm.json", bad);
    EXPECT_EQ(ReadLanguageModelSpec(dir_.string()).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }

  // UseModelLanguageModel loads it with its values.
  Write("words.arpa.gz", kArpa);  // zlib reads plain text too
  Write("lm.json", R"({"words": {"file": "words.arpa.gz", "weight": 0.3,
                                 "unknown_word_penalty": 6}})");
  PrefixBeamSearchOptions search;
  auto loaded = UseModelLanguageModel(dir_.string(), *Units(), &search);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(*loaded);
  EXPECT_EQ(search.lm, nullptr);
  ASSERT_NE(search.word_lm, nullptr);
  EXPECT_FLOAT_EQ(search.word_lm_weight, 0.3f);
  EXPECT_FLOAT_EQ(search.unknown_word_penalty, 6.0f);
}

// Frames spelling "c a ?": the acoustics prefer x (a misspelling) to b.
std::vector<float> MisspeltFrames() {
  std::vector<std::vector<float>> rows;
  auto row = [](int32_t unit, float p, int32_t other, float q) {
    std::vector<float> r(kNumUnits, 0.001f);
    r[unit] = p;
    r[other] = q;
    return r;
  };
  rows.push_back(row(kWordC, 0.9f, kBlank, 0.1f));
  rows.push_back(row(kA, 0.9f, kBlank, 0.1f));
  rows.push_back(row(kX, 0.55f, kB, 0.4f));
  return testing::LogRows(rows);
}

TEST_F(WordLmTest, FusionPrefersWordsOfTheLexiconAndReportsItsScore) {
  auto lm = Load();
  ASSERT_NE(lm, nullptr);
  std::vector<float> frames = MisspeltFrames();
  Hypothesis best;

  PrefixBeamSearchOptions options;
  options.beam_size = options.first_beam_size = 4;
  PrefixBeamSearch plain(options);
  plain.Search(frames.data(), 3, kNumUnits);
  plain.Finalize();
  plain.GetHypothesis(0, &best);
  EXPECT_EQ(best.tokens, (std::vector<int32_t>{kWordC, kA, kX}));

  options.word_lm = lm;
  options.word_lm_weight = 0.5f;
  options.word_bonus = 0.25f;
  options.unknown_word_penalty = 2.0f;
  PrefixBeamSearch fused(options);
  fused.Search(frames.data(), 3, kNumUnits);
  fused.Finalize();
  fused.GetHypothesis(0, &best);
  ASSERT_EQ(best.tokens, (std::vector<int32_t>{kWordC, kA, kB}));
  const WordScore cab = SentenceScore(*lm, {kWordC, kA, kB});
  EXPECT_NEAR(best.lm_score, 0.5f * cab.log_prob + 0.25f * cab.words, 1e-5);
  EXPECT_NEAR(best.score, best.ctc_score + best.lm_score, 1e-5);

  // The misspelling, ranked below, pays the penalty.
  ASSERT_GE(fused.NumHypotheses(), 2);
  Hypothesis second;
  fused.GetHypothesis(1, &second);
  ASSERT_EQ(second.tokens, (std::vector<int32_t>{kWordC, kA, kX}));
  const WordScore cax = SentenceScore(*lm, {kWordC, kA, kX});
  EXPECT_NEAR(second.lm_score, 0.5f * cax.log_prob + 0.25f * cax.words - 2.0f, 1e-5);
}

TEST_F(WordLmTest, OptionsAndDecoderCheckTheModel) {
  PrefixBeamSearchOptions options;
  options.word_lm_weight = 11.0f;
  EXPECT_NE(options.Validate().message().find("word_lm_weight"), std::string::npos);
  options.word_lm_weight = 0.5f;
  options.word_bonus = -21.0f;
  EXPECT_NE(options.Validate().message().find("word_bonus"), std::string::npos);
  options.word_bonus = 0.0f;
  options.unknown_word_penalty = -1.0f;
  EXPECT_NE(options.Validate().message().find("unknown_word_penalty"), std::string::npos);

  CtcDecoderConfig config;
  config.search.word_lm = Load();
  auto mismatched = CtcDecoder::Create(config, testing::NumberedUnits(8));
  EXPECT_EQ(mismatched.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mismatched.status().message().find("search.word_lm"), std::string::npos);
  auto decoder = CtcDecoder::Create(config, Units());
  ASSERT_TRUE(decoder.ok()) << decoder.status();
}

}  // namespace
}  // namespace oasr::decoder
