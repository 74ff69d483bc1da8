// The decoder end to end: validation, chunking, batching, endpointing with
// continuous and single-utterance decoding, options and state reuse.
#include "decoder/ctc_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "decoder/synthetic_log_probs.h"
#include "tests/decoder/test_util.h"

namespace oasr::decoder {
namespace {

using ::testing::HasSubstr;
using testing::MakeUnits;
using testing::View;

const std::string kMark = "\xe2\x96\x81";  // ▁
constexpr int kV = 8;

std::shared_ptr<const SymbolTable> Units() {
  return MakeUnits(
      {"<blank>", "<unk>", kMark + "A", kMark + "B", "C", "D", kMark + "E", "<sos/eos>"});
}

// One row per entry of `script`: that unit gets probability 0.9, the rest
// share 0.1.
std::vector<float> Script(const std::vector<int>& script) {
  std::vector<std::vector<float>> rows;
  for (int unit : script) {
    std::vector<float> row(kV, 0.1f / (kV - 1));
    row[unit] = 0.9f;
    rows.push_back(row);
  }
  return testing::LogRows(rows);
}

std::vector<int> Repeat(int unit, int n) { return std::vector<int>(n, unit); }

std::vector<int> Concat(std::initializer_list<std::vector<int>> parts) {
  std::vector<int> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::unique_ptr<CtcDecoder> MakeDecoder(CtcDecoderConfig config = {}) {
  absl::StatusOr<std::unique_ptr<CtcDecoder>> decoder = CtcDecoder::Create(config, Units());
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  return std::move(*decoder);
}

CtcDecoderConfig NoEndpoint() {
  CtcDecoderConfig config;
  config.stream.endpoint.enabled = false;
  return config;
}

// Decodes `lp` in chunks of `chunk` frames.
void Feed(CtcDecoder& decoder, DecoderState& state, std::vector<float>& lp, int chunk) {
  const int frames = static_cast<int>(lp.size()) / kV;
  for (int t = 0; t < frames; t += chunk) {
    const int n = std::min(chunk, frames - t);
    TensorView view(lp.data() + t * kV, DType::kFloat32, Shape{n, kV}, Device::Cpu());
    ASSERT_TRUE(decoder.DecodeChunk(state, view).ok());
  }
}

void ExpectSameNbest(const DecodeResult& a, const DecodeResult& b) {
  ASSERT_EQ(a.nbest.size(), b.nbest.size());
  for (size_t i = 0; i < a.nbest.size(); ++i) {
    EXPECT_EQ(a.nbest[i].tokens, b.nbest[i].tokens) << i;
    EXPECT_EQ(a.nbest[i].token_frames, b.nbest[i].token_frames) << i;
    EXPECT_EQ(a.nbest[i].score, b.nbest[i].score) << i;
    EXPECT_EQ(a.nbest[i].viterbi_score, b.nbest[i].viterbi_score) << i;
    EXPECT_EQ(a.nbest[i].transcript, b.nbest[i].transcript) << i;
  }
  EXPECT_EQ(a.start_ms, b.start_ms);
  EXPECT_EQ(a.end_ms, b.end_ms);
}

TEST(CtcDecoderTest, CreateValidates) {
  CtcDecoderConfig config;
  config.frame_shift_ms = 0.0f;
  EXPECT_EQ(CtcDecoder::Create(config, Units()).status().message(),
            "frame_shift_ms = 0 is outside (0, 1000]");
  config = {};
  config.min_word_confidence = 1.5f;
  EXPECT_EQ(CtcDecoder::Create(config, Units()).status().message(),
            "min_word_confidence = 1.5 is outside [0, 1]");
  config = {};
  config.search.beam_size = 0;
  EXPECT_EQ(CtcDecoder::Create(config, Units()).status().message(),
            "search.beam_size = 0 is outside [1, 1024]");
  config = {};
  config.stream.nbest = 0;
  EXPECT_EQ(CtcDecoder::Create(config, Units()).status().message(),
            "stream.nbest = 0 is outside [1, 1024]");
  config = {};
  config.search.blank_id = kV;
  EXPECT_THAT(std::string(CtcDecoder::Create(config, Units()).status().message()),
              HasSubstr("search.blank_id = 8 is not a unit id"));
  EXPECT_EQ(CtcDecoder::Create({}, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  config = {};
  config.stream.context = *ContextGraph::Build({{{1}, 1.0f}}, 5);
  EXPECT_THAT(std::string(CtcDecoder::Create(config, Units()).status().message()),
              HasSubstr("stream.context graph was built for 5 units, the decoder has 8"));
}

TEST(CtcDecoderTest, DecodeChunkRejectsBadInputAndLeavesTheStreamAlone) {
  auto decoder = MakeDecoder();
  auto state = decoder->CreateState();
  std::vector<float> lp = Script({2, 0});
  std::vector<int32_t> ints(16);
  EXPECT_THAT(std::string(decoder
                              ->DecodeChunk(*state, TensorView(ints.data(), DType::kInt32,
                                                               Shape{2, kV}, Device::Cpu()))
                              .message()),
              HasSubstr("dtype is int32"));
  EXPECT_THAT(std::string(decoder
                              ->DecodeChunk(*state, TensorView(lp.data(), DType::kFloat32,
                                                               Shape{1, 2, kV}, Device::Cpu()))
                              .message()),
              HasSubstr("expected [T, 8]"));
  EXPECT_THAT(std::string(decoder
                              ->DecodeChunk(*state, TensorView(lp.data(), DType::kFloat32,
                                                               Shape{4, 4}, Device::Cpu()))
                              .message()),
              HasSubstr("shape is [4, 4]"));
  EXPECT_THAT(std::string(decoder
                              ->DecodeChunk(*state, TensorView(lp.data(), DType::kFloat32,
                                                               Shape{2, kV}, Device::Cuda(0)))
                              .message()),
              HasSubstr("cuda:0"));
  EXPECT_EQ(decoder->GetStatus(*state).frames_decoded, 0);
  // An empty chunk is fine.
  EXPECT_TRUE(
      decoder
          ->DecodeChunk(*state, TensorView(nullptr, DType::kFloat32, Shape{0, kV}, Device::Cpu()))
          .ok());
  EXPECT_TRUE(decoder->DecodeChunk(*state, View(lp, kV)).ok());
  EXPECT_EQ(decoder->GetStatus(*state).frames_decoded, 2);
  ASSERT_TRUE(decoder->FinalizeStream(*state).ok());
  EXPECT_EQ(decoder->DecodeChunk(*state, View(lp, kV)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(decoder->FinalizeStream(*state).ok());  // idempotent
  EXPECT_EQ(decoder->TakeFinalResults(*state).size(), 1u);
}

TEST(CtcDecoderTest, ResultsBeforeAnyFrame) {
  auto decoder = MakeDecoder();
  auto state = decoder->CreateState();
  const DecodeResult partial = decoder->PartialResult(*state);
  EXPECT_FALSE(partial.is_final);
  ASSERT_EQ(partial.nbest.size(), 1u);
  EXPECT_TRUE(partial.nbest[0].tokens.empty());
  ASSERT_TRUE(decoder->FinalizeStream(*state).ok());
  const std::vector<DecodeResult> finals = decoder->TakeFinalResults(*state);
  ASSERT_EQ(finals.size(), 1u);
  EXPECT_TRUE(finals[0].is_final);
  EXPECT_EQ(finals[0].nbest[0].transcript, "");
  EXPECT_TRUE(decoder->TakeFinalResults(*state).empty());
}

TEST(CtcDecoderTest, ChunkedDecodingEqualsWholeUtterance) {
  SyntheticLogProbsOptions gen;
  gen.num_frames = 300;
  gen.vocab_size = kV;
  gen.peak = 3.0f;
  for (const SearchMethod method : {SearchMethod::kPrefixBeam, SearchMethod::kGreedy}) {
    CtcDecoderConfig config = NoEndpoint();
    config.method = method;
    auto decoder = MakeDecoder(config);
    std::vector<float> lp = SyntheticLogProbs(gen);
    auto whole = decoder->CreateState();
    Feed(*decoder, *whole, lp, 300);
    const DecodeResult expected = decoder->PartialResult(*whole);
    EXPECT_FALSE(expected.nbest[0].tokens.empty());
    for (int chunk : {1, 7, 16}) {
      auto chunked = decoder->CreateState();
      Feed(*decoder, *chunked, lp, chunk);
      ExpectSameNbest(decoder->PartialResult(*chunked), expected);
      ASSERT_TRUE(decoder->FinalizeStream(*chunked).ok());
      ExpectSameNbest(decoder->TakeFinalResults(*chunked).at(0), expected);
    }
  }
}

TEST(CtcDecoderTest, BatchedDecodingEqualsOneStreamAtATime) {
  auto decoder = MakeDecoder(NoEndpoint());
  constexpr int kStreams = 4, kChunk = 16;
  const int lengths[kStreams] = {100, 37, 64, 0};
  std::vector<std::vector<float>> inputs;
  std::vector<std::unique_ptr<DecoderState>> batched, single;
  for (int b = 0; b < kStreams; ++b) {
    SyntheticLogProbsOptions gen;
    gen.num_frames = lengths[b];
    gen.vocab_size = kV;
    gen.peak = 3.0f;
    gen.seed = 10 + b;
    inputs.push_back(SyntheticLogProbs(gen));
    batched.push_back(decoder->CreateState());
    single.push_back(decoder->CreateState());
    Feed(*decoder, *single[b], inputs[b], kChunk);
  }
  std::vector<DecoderState*> states;
  for (auto& s : batched) states.push_back(s.get());
  std::vector<float> padded(kStreams * kChunk * kV);
  for (int t = 0; t < 100; t += kChunk) {
    std::vector<int32_t> counts(kStreams);
    std::fill(padded.begin(), padded.end(), 0.0f);  // padding is never read
    for (int b = 0; b < kStreams; ++b) {
      counts[b] = std::max(0, std::min(kChunk, lengths[b] - t));
      std::copy_n(inputs[b].begin() + t * kV, counts[b] * kV, padded.begin() + b * kChunk * kV);
    }
    TensorView view(padded.data(), DType::kFloat32, Shape{kStreams, kChunk, kV}, Device::Cpu());
    ASSERT_TRUE(decoder->DecodeChunks(states, view, counts).ok());
  }
  for (int b = 0; b < kStreams; ++b) {
    ExpectSameNbest(decoder->PartialResult(*batched[b]), decoder->PartialResult(*single[b]));
  }
}

TEST(CtcDecoderTest, DecodeChunksChecksEverythingFirst) {
  auto decoder = MakeDecoder(NoEndpoint());
  auto a = decoder->CreateState();
  auto b = decoder->CreateState();
  auto done = decoder->CreateState();
  ASSERT_TRUE(decoder->FinalizeStream(*done).ok());
  std::vector<float> lp(2 * 3 * kV, std::log(1.0f / kV));
  const TensorView view(lp.data(), DType::kFloat32, Shape{2, 3, kV}, Device::Cpu());
  std::vector<DecoderState*> dup = {a.get(), a.get()};
  std::vector<DecoderState*> ok = {a.get(), b.get()};
  std::vector<DecoderState*> finished = {a.get(), done.get()};
  const std::vector<int32_t> counts = {3, 2};
  EXPECT_EQ(decoder->DecodeChunks(dup, view, counts).message(), "states[1] appears twice");
  EXPECT_EQ(decoder->DecodeChunks(ok, view, std::vector<int32_t>{3, 4}).message(),
            "num_frames[1] = 4 is outside [0, 3]");
  EXPECT_THAT(std::string(decoder->DecodeChunks(ok, view, std::vector<int32_t>{3}).message()),
              HasSubstr("2 streams but 2 states and 1 frame counts"));
  EXPECT_EQ(decoder->DecodeChunks(finished, view, counts).message(), "states[1] has finished");
  EXPECT_EQ(decoder->GetStatus(*a).frames_decoded, 0);  // nothing was decoded
  ASSERT_TRUE(decoder->DecodeChunks(ok, view, counts).ok());
  EXPECT_EQ(decoder->GetStatus(*a).frames_decoded, 3);
  EXPECT_EQ(decoder->GetStatus(*b).frames_decoded, 2);
}

// "A B" (frames 0-14), silence (15-64), "E C" (65-74), silence (75-89): with
// the default rules an endpoint closes the first segment after the chunk in
// which trailing silence reaches 1 s (25 frames).
std::vector<float> TwoUtterances() {
  return Script(Concat({Repeat(0, 5), Repeat(2, 3), Repeat(0, 5), Repeat(3, 2), Repeat(0, 5),
                        Repeat(0, 40), Repeat(0, 5), Repeat(6, 3), Repeat(0, 5), Repeat(4, 2),
                        Repeat(0, 5), Repeat(0, 10)}));
}

// A partial result built at one revision is the one built at any later call
// with the same revision; greedy search keeps its revision over silence.
TEST(CtcDecoderTest, AnUnchangedPartialRevisionMeansAnUnchangedPartial) {
  for (const SearchMethod method : {SearchMethod::kGreedy, SearchMethod::kPrefixBeam}) {
    CtcDecoderConfig config;
    config.method = method;
    auto decoder = MakeDecoder(config);
    auto state = decoder->CreateState();
    std::vector<float> lp = TwoUtterances();
    uint64_t revision = decoder->PartialRevision(*state);
    DecodeResult last = decoder->PartialResult(*state);
    int kept = 0, moved = 0;
    for (int t = 0; t < 90; t += 5) {
      std::vector<float> chunk(lp.begin() + t * kV, lp.begin() + (t + 5) * kV);
      ASSERT_TRUE(decoder->DecodeChunk(*state, View(chunk, kV)).ok());
      const DecodeResult now = decoder->PartialResult(*state);
      if (decoder->PartialRevision(*state) == revision) {
        ++kept;
        ASSERT_EQ(now.nbest.size(), last.nbest.size()) << t;
        for (size_t i = 0; i < now.nbest.size(); ++i) {
          EXPECT_EQ(now.nbest[i].tokens, last.nbest[i].tokens) << t;
          EXPECT_EQ(now.nbest[i].token_confidences, last.nbest[i].token_confidences) << t;
          EXPECT_EQ(now.nbest[i].transcript, last.nbest[i].transcript) << t;
        }
      } else {
        ++moved;
      }
      revision = decoder->PartialRevision(*state);
      last = now;
    }
    EXPECT_GT(moved, 0);
    if (method == SearchMethod::kGreedy) {
      EXPECT_GT(kept, 5) << "silence and the rest of a token's run keep the revision";
    } else {
      EXPECT_EQ(kept, 0) << "every chunk counts as a change to the beam";
    }
  }
}

TEST(CtcDecoderTest, ContinuousDecodingStartsANewSegmentAtAnEndpoint) {
  auto decoder = MakeDecoder();
  auto state = decoder->CreateState();
  std::vector<float> lp = TwoUtterances();
  bool saw_endpoint = false;
  for (int t = 0; t < 90; t += 10) {
    std::vector<float> chunk(lp.begin() + t * kV, lp.begin() + (t + 10) * kV);
    ASSERT_TRUE(decoder->DecodeChunk(*state, View(chunk, kV)).ok());
    const StreamStatus status = decoder->GetStatus(*state);
    // Silence starts at frame 15; 25 silent frames are complete after the
    // chunk ending at frame 39. The new segment has decoded nothing when its
    // own silence runs, and too little silence after "E C".
    EXPECT_EQ(status.endpoint_detected, t == 30) << t;
    saw_endpoint |= status.endpoint_detected;
    EXPECT_FALSE(status.finished);
  }
  EXPECT_TRUE(saw_endpoint);
  EXPECT_EQ(decoder->GetStatus(*state).segment, 1);
  ASSERT_TRUE(decoder->FinalizeStream(*state).ok());
  const std::vector<DecodeResult> finals = decoder->TakeFinalResults(*state);
  ASSERT_EQ(finals.size(), 2u);
  EXPECT_EQ(finals[0].nbest[0].transcript, "A B");
  EXPECT_EQ(finals[0].segment, 0);
  EXPECT_EQ(finals[0].endpoint_rule, 1);
  EXPECT_EQ(finals[0].start_ms, 0);
  EXPECT_EQ(finals[0].end_ms, 1600);
  EXPECT_EQ(finals[1].nbest[0].transcript, "EC");
  EXPECT_EQ(finals[1].segment, 1);
  EXPECT_EQ(finals[1].endpoint_rule, -1);
  EXPECT_EQ(finals[1].start_ms, 1600);
  EXPECT_EQ(finals[1].end_ms, 3600);
  // Times count from the start of the stream: E is emitted at frames 65-67.
  EXPECT_EQ(finals[1].nbest[0].token_frames, (std::vector<int64_t>{67, 74}));
  ASSERT_EQ(finals[1].nbest[0].words.size(), 1u);
  EXPECT_EQ(finals[1].nbest[0].words[0].start_ms, 67 * 40 - 100);
  EXPECT_EQ(finals[1].nbest[0].words[0].end_ms, 74 * 40);
  EXPECT_NEAR(finals[1].nbest[0].confidence, 0.9f, 1e-5);
}

TEST(CtcDecoderTest, SingleUtteranceStopsAtTheFirstEndpoint) {
  auto decoder = MakeDecoder();
  auto state = decoder->CreateState();
  StreamOptions options;
  options.single_utterance = true;
  ASSERT_TRUE(decoder->ConfigureStream(*state, options).ok());
  std::vector<float> lp = TwoUtterances();
  int refused_at = -1;
  for (int t = 0; t < 90; t += 10) {
    std::vector<float> chunk(lp.begin() + t * kV, lp.begin() + (t + 10) * kV);
    const absl::Status status = decoder->DecodeChunk(*state, View(chunk, kV));
    if (!status.ok()) {
      EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
      refused_at = t;
      break;
    }
  }
  EXPECT_EQ(refused_at, 40);  // the chunk after the endpoint
  EXPECT_TRUE(decoder->GetStatus(*state).finished);
  ASSERT_TRUE(decoder->FinalizeStream(*state).ok());
  const std::vector<DecodeResult> finals = decoder->TakeFinalResults(*state);
  ASSERT_EQ(finals.size(), 1u);
  EXPECT_EQ(finals[0].nbest[0].transcript, "A B");
  EXPECT_EQ(finals[0].endpoint_rule, 1);
}

TEST(CtcDecoderTest, ConfigureStreamChecksOptions) {
  auto decoder = MakeDecoder();
  auto state = decoder->CreateState();
  StreamOptions options;
  options.nbest = 2000;
  EXPECT_EQ(decoder->ConfigureStream(*state, options).message(),
            "nbest = 2000 is outside [1, 1024]");
  options = {};
  options.endpoint.blank_threshold = -1.0f;
  EXPECT_EQ(decoder->ConfigureStream(*state, options).code(), absl::StatusCode::kInvalidArgument);
  options = {};
  options.context = *ContextGraph::Build({{{2}, 1.0f}}, 9);
  EXPECT_THAT(std::string(decoder->ConfigureStream(*state, options).message()),
              HasSubstr("built for 9 units"));
  std::vector<float> lp = Script({2, 0});
  ASSERT_TRUE(decoder->DecodeChunk(*state, View(lp, kV)).ok());
  EXPECT_EQ(decoder->ConfigureStream(*state, StreamOptions{}).code(),
            absl::StatusCode::kFailedPrecondition);

  CtcDecoderConfig greedy;
  greedy.method = SearchMethod::kGreedy;
  auto greedy_decoder = MakeDecoder(greedy);
  auto greedy_state = greedy_decoder->CreateState();
  options = {};
  options.context = *ContextGraph::Build({{{2}, 1.0f}}, kV);
  EXPECT_THAT(std::string(greedy_decoder->ConfigureStream(*greedy_state, options).message()),
              HasSubstr("needs the prefix beam search"));
}

TEST(CtcDecoderTest, NbestOptionLimitsTheList) {
  auto decoder = MakeDecoder(NoEndpoint());
  auto state = decoder->CreateState();
  StreamOptions options;
  options.nbest = 3;
  options.endpoint.enabled = false;
  ASSERT_TRUE(decoder->ConfigureStream(*state, options).ok());
  std::vector<float> lp = TwoUtterances();
  Feed(*decoder, *state, lp, 16);
  EXPECT_EQ(decoder->PartialResult(*state).nbest.size(), 3u);
}

TEST(CtcDecoderTest, PhrasesFromTextChangeTheTranscript) {
  // Frames where D (0.45) narrowly loses to C (0.55).
  std::vector<std::vector<float>> rows(6, std::vector<float>(kV, 0.0001f));
  rows[0][0] = 1.0f;
  rows[1][6] = 1.0f;  // ▁E
  rows[2][0] = 1.0f;
  rows[3][4] = 0.55f;  // C
  rows[3][5] = 0.45f;  // D
  rows[4][0] = 1.0f;
  rows[5][0] = 1.0f;
  std::vector<float> lp = testing::LogRows(rows);
  auto decoder = MakeDecoder(NoEndpoint());
  for (const bool boosted : {false, true}) {
    auto state = decoder->CreateState();
    if (boosted) {
      StreamOptions options;
      options.endpoint.enabled = false;
      options.context = *ContextGraph::BuildFromText({{"ed", 1.0f}}, decoder->units());
      ASSERT_TRUE(decoder->ConfigureStream(*state, options).ok());
    }
    Feed(*decoder, *state, lp, 2);
    ASSERT_TRUE(decoder->FinalizeStream(*state).ok());
    const DecodeResult result = decoder->TakeFinalResults(*state).at(0);
    EXPECT_EQ(result.nbest[0].transcript, boosted ? "ED" : "EC");
    EXPECT_EQ(result.nbest[0].context_score, boosted ? 2.0f : 0.0f);
  }
}

TEST(CtcDecoderTest, ResetStateGivesIdenticalResultsAndDefaults) {
  auto decoder = MakeDecoder();
  std::vector<float> lp = TwoUtterances();
  auto fresh = decoder->CreateState();
  Feed(*decoder, *fresh, lp, 10);
  ASSERT_TRUE(decoder->FinalizeStream(*fresh).ok());
  const std::vector<DecodeResult> expected = decoder->TakeFinalResults(*fresh);

  // A state used with other options, left mid-stream, then reset.
  auto reused = decoder->CreateState();
  StreamOptions options;
  options.single_utterance = true;
  options.nbest = 1;
  options.context = *ContextGraph::Build({{{4, 5}, 3.0f}}, kV);
  ASSERT_TRUE(decoder->ConfigureStream(*reused, options).ok());
  std::vector<float> head(lp.begin(), lp.begin() + 30 * kV);
  Feed(*decoder, *reused, head, 7);
  decoder->ResetState(*reused);
  const StreamStatus status = decoder->GetStatus(*reused);
  EXPECT_EQ(status.frames_decoded, 0);
  EXPECT_EQ(status.segment, 0);
  EXPECT_FALSE(status.finished);
  EXPECT_EQ(status.final_results, 0u);

  Feed(*decoder, *reused, lp, 10);
  ASSERT_TRUE(decoder->FinalizeStream(*reused).ok());
  const std::vector<DecodeResult> again = decoder->TakeFinalResults(*reused);
  ASSERT_EQ(again.size(), expected.size());
  for (size_t i = 0; i < again.size(); ++i) {
    ExpectSameNbest(again[i], expected[i]);
    EXPECT_EQ(again[i].nbest[0].context_score, 0.0f);
  }
}

TEST(CtcDecoderDeathTest, StateFromAnotherDecoderIsABug) {
  auto one = MakeDecoder();
  auto other = MakeDecoder();
  auto state = one->CreateState();
  std::vector<float> lp = Script({2});
  EXPECT_DEATH((void)other->DecodeChunk(*state, View(lp, kV)), "not created by this decoder");
}

}  // namespace
}  // namespace oasr::decoder
