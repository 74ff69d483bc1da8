#include "decoder/transcript_builder.h"

#include <gtest/gtest.h>

#include "tests/decoder/test_util.h"

namespace oasr::decoder {
namespace {

using testing::MakeUnits;

const std::string kMark = "\xe2\x96\x81";  // ▁
const std::string kNi = "\xe4\xbd\xa0";    // 你
const std::string kHao = "\xe5\xa5\xbd";   // 好

Hypothesis Hyp(std::vector<int32_t> tokens, std::vector<int64_t> frames,
               std::vector<float> confidences) {
  Hypothesis h;
  h.tokens = std::move(tokens);
  h.token_frames = std::move(frames);
  h.token_confidences = std::move(confidences);
  return h;
}

void ExpectWord(const WordResult& w, const std::string& text, int64_t start, int64_t end,
                float confidence) {
  EXPECT_EQ(w.text, text);
  EXPECT_EQ(w.start_ms, start) << text;
  EXPECT_EQ(w.end_ms, end) << text;
  EXPECT_FLOAT_EQ(w.confidence, confidence) << text;
}

TEST(TranscriptBuilderTest, BpeWordsWithWeNetTimestamps) {
  const auto units = MakeUnits(
      {"<blank>", "<unk>", kMark + "HE", "LLO", kMark + "WOR", "LD", kMark + "A", "<sos/eos>"});
  TranscriptBuilder builder(units, 40.0f, 100);
  Hypothesis h = Hyp({2, 3, 4, 5, 6}, {10, 12, 20, 21, 40}, {0.9f, 0.8f, 0.95f, 0.6f, 1.0f});
  builder.Fill(0, &h);
  EXPECT_EQ(h.transcript, "HELLO WORLD A");
  ASSERT_EQ(h.words.size(), 3u);
  // HE at 10: 400 - 100 = 300; its end and LLO's start meet at frame 11
  // (closer than 100 ms); LLO ends at its own frame (the next token is far).
  ExpectWord(h.words[0], "HELLO", 300, 480, 0.8f);
  // WOR at 20 / LD at 21 meet at (20 + 21) / 2 = 20 (integer frames).
  ExpectWord(h.words[1], "WORLD", 700, 840, 0.6f);
  ExpectWord(h.words[2], "A", 1500, 1600, 1.0f);
  EXPECT_FLOAT_EQ(h.confidence, (0.8f + 0.6f + 1.0f) / 3);
}

TEST(TranscriptBuilderTest, FirstWordStartsNoEarlierThanTheSegment) {
  const auto units = MakeUnits({"<blank>", kMark + "A", "<sos/eos>"});
  TranscriptBuilder builder(units, 40.0f, 100);
  Hypothesis h = Hyp({1}, {101}, {0.5f});
  builder.Fill(100, &h);
  ExpectWord(h.words[0], "A", 4000, 4040, 0.5f);
  // The frame shift is a setting.
  TranscriptBuilder ten_ms(units, 10.0f, 100);
  h = Hyp({1}, {101}, {0.5f});
  ten_ms.Fill(0, &h);
  ExpectWord(h.words[0], "A", 910, 1010, 0.5f);
}

TEST(TranscriptBuilderTest, CharacterVocabularyMakesEveryCharacterAWord) {
  const auto units = MakeUnits({"<blank>", "<unk>", kNi, kHao, "<sos/eos>"});
  TranscriptBuilder builder(units, 40.0f, 100);
  // <unk> has no text but still shapes its neighbours' times.
  Hypothesis h = Hyp({2, 1, 3}, {5, 6, 30}, {0.7f, 0.1f, 0.9f});
  builder.Fill(0, &h);
  EXPECT_EQ(h.transcript, kNi + kHao);
  ASSERT_EQ(h.words.size(), 2u);
  ExpectWord(h.words[0], kNi, 100, 200, 0.7f);
  ExpectWord(h.words[1], kHao, 1100, 1200, 0.9f);
  EXPECT_FLOAT_EQ(h.confidence, 0.8f);
}

TEST(TranscriptBuilderTest, CjkInsideABpeVocabularyAreWordsOfTheirOwn) {
  const auto units =
      MakeUnits({"<blank>", kMark + "A", kNi, kHao, kMark + "HE", "LLO", kMark, "<sos/eos>"});
  TranscriptBuilder builder(units, 40.0f, 0);
  Hypothesis h = Hyp({1, 2, 3, 4, 5, 6}, {0, 10, 20, 30, 40, 50}, {1, 1, 1, 1, 1, 1});
  builder.Fill(0, &h);
  EXPECT_EQ(h.transcript, "A" + kNi + kHao + " HELLO");
  ASSERT_EQ(h.words.size(), 4u);  // the trailing lone "▁" makes no word
  EXPECT_EQ(h.words[0].text, "A");
  EXPECT_EQ(h.words[1].text, kNi);
  EXPECT_EQ(h.words[2].text, kHao);
  EXPECT_EQ(h.words[3].text, "HELLO");
}

TEST(TranscriptBuilderTest, WordsBelowTheConfidenceFloorAreLeftOut) {
  const auto units = MakeUnits(
      {"<blank>", "<unk>", kMark + "HE", "LLO", kMark + "WOR", "LD", kMark + "A", "<sos/eos>"});
  // HELLO 0.8 (its weakest unit), WORLD 0.6, A 1.0.
  const Hypothesis all =
      Hyp({2, 3, 4, 5, 6}, {10, 12, 20, 21, 40}, {0.9f, 0.8f, 0.95f, 0.6f, 1.0f});
  TranscriptBuilder floor(units, 40.0f, 100, 0.7f);
  Hypothesis h = all;
  floor.Fill(0, &h);
  EXPECT_EQ(h.transcript, "HELLO A");
  ASSERT_EQ(h.words.size(), 2u);
  ExpectWord(h.words[0], "HELLO", 300, 480, 0.8f);  // Times as without the floor.
  ExpectWord(h.words[1], "A", 1500, 1600, 1.0f);
  EXPECT_FLOAT_EQ(h.confidence, 0.9f);  // Over the words kept.
  EXPECT_EQ(h.tokens, all.tokens);      // The search's tokens stay.
  // A word at the floor stays; above every word's, nothing is left.
  h = all;
  TranscriptBuilder(units, 40.0f, 100, 0.6f).Fill(0, &h);
  EXPECT_EQ(h.transcript, "HELLO WORLD A");
  h = all;
  TranscriptBuilder(units, 40.0f, 100, 1.0f).Fill(0, &h);
  EXPECT_EQ(h.transcript, "A");
  h = Hyp({2, 3}, {10, 12}, {0.2f, 0.3f});
  floor.Fill(0, &h);
  EXPECT_EQ(h.transcript, "");
  EXPECT_TRUE(h.words.empty());
  EXPECT_EQ(h.confidence, 0.0f);
  // A character vocabulary's kept words run together.
  const auto chars = MakeUnits({"<blank>", "<unk>", kNi, kHao, "<sos/eos>"});
  h = Hyp({2, 3, 2}, {5, 30, 50}, {0.9f, 0.1f, 0.8f});
  TranscriptBuilder(chars, 40.0f, 100, 0.5f).Fill(0, &h);
  EXPECT_EQ(h.transcript, kNi + kNi);
}

TEST(TranscriptBuilderTest, EmptyHypothesis) {
  TranscriptBuilder builder(MakeUnits({"<blank>", "a"}), 40.0f, 100);
  Hypothesis h;
  h.transcript = "stale";
  h.words.push_back({});
  builder.Fill(0, &h);
  EXPECT_EQ(h.transcript, "");
  EXPECT_TRUE(h.words.empty());
  EXPECT_EQ(h.confidence, 0.0f);
}

}  // namespace
}  // namespace oasr::decoder
