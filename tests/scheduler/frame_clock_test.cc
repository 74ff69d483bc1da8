// One frame clock, the model's (feature shift x subsampling), for everything
// the engine reports in time: a 6x (conv2d6, 60 ms frames) and an 8x
// (conv2d8, 80 ms frames) model end to end through the engine, against the
// real length of the audio sent. Every check here fails with the 40 ms clock
// of a 4x model: audio_processed would cover 2/3 (1/2) of the audio, word
// times would be token frames x 40 ms, and a trailing-silence rule would
// need 1.5x (2x) more frames than the audio holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/engine.h"
#include "scheduler/model_factory.h"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"

namespace oasr::scheduler {
namespace {

struct ClockCase {
  std::string name;  // The fixture case (tools/reference/make_fixtures.py).
  int subsampling;
  double frame_ms;
};

std::string ModelDir(const ClockCase& c) {
  return std::string(OASR_ENCODER_FIXTURES) + "/" + c.name + "/model";
}

std::vector<int16_t> Speechlike(double seconds, int rate, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0, 300);
  std::vector<int16_t> out(static_cast<size_t>(seconds * rate));
  for (size_t i = 0; i < out.size(); ++i) {
    const double t = static_cast<double>(i) / rate;
    const double env = 0.5 + 0.5 * std::sin(2 * M_PI * 1.3 * t);
    const double x =
        5000 * env * (std::sin(2 * M_PI * 310 * t) + 0.5 * std::sin(2 * M_PI * 1700 * t)) +
        noise(rng);
    out[i] = static_cast<int16_t>(std::clamp(x, -32768.0, 32767.0));
  }
  return out;
}

// Feature frames of `samples` at 16 kHz (25 ms window, 10 ms shift).
int64_t FeatureFrames(size_t samples) {
  return samples < 400 ? 0 : (static_cast<int64_t>(samples) - 400) / 160 + 1;
}

// The zeros the front end appends at the end of a stream: an fbank window
// and the subsampling's right context.
size_t TailPadding(const ModelGeometry& g) {
  return 400 + 160 * static_cast<size_t>(g.right_context);
}

struct Outcome {
  std::vector<decoder::DecodeResult> finals;
  std::vector<double> processed;  // audio_processed_s of every event, in order.
  std::optional<FinishReason> finish;
};

Outcome RunStream(Engine& engine, const std::vector<int16_t>& audio, const StreamRequest& request) {
  auto stream = engine.OpenStream(request);
  EXPECT_TRUE(stream.ok()) << stream.status();
  Outcome out;
  if (!stream.ok()) return out;
  EXPECT_TRUE((*stream)->PushAudio(audio).ok());
  // A single utterance may have ended at its endpoint already (when this
  // thread was slow to get here): then the end of audio is refused as such.
  const absl::Status ended = (*stream)->EndAudio();
  EXPECT_TRUE(ended.ok() || (request.decode.single_utterance && absl::IsFailedPrecondition(ended)))
      << ended;
  StreamEvent event;
  while (!out.finish.has_value()) {
    if (!(*stream)->outbox().WaitPop(&event, 60)) {
      ADD_FAILURE() << "the stream never finished";
      break;
    }
    for (decoder::DecodeResult& r : event.results) {
      if (r.is_final) out.finals.push_back(std::move(r));
    }
    out.processed.push_back(event.audio_processed_s);
    out.finish = event.finish;
  }
  return out;
}

class FrameClockTest : public ::testing::TestWithParam<ClockCase> {
 protected:
  std::unique_ptr<Engine> MakeEngine(int word_gap_ms = 0) {
    ModelOptions options;
    options.model_dir = ModelDir(GetParam());
    // No gap: a word's times are exactly its first and last tokens' frames.
    options.decoder.word_gap_ms = word_gap_ms;
    auto engine = LoadEngine(options, EngineConfig{});
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? std::move(*engine) : nullptr;
  }
};

INSTANTIATE_TEST_SUITE_P(Subsampling, FrameClockTest,
                         ::testing::Values(ClockCase{"sub6", 6, 60.0}, ClockCase{"sub8", 8, 80.0}),
                         [](const ::testing::TestParamInfo<ClockCase>& info) {
                           return info.param.name;
                         });

TEST_P(FrameClockTest, TheEngineAndDecoderRunOnTheModelsClock) {
  std::unique_ptr<Engine> engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->geometry().subsampling, GetParam().subsampling);
  EXPECT_DOUBLE_EQ(engine->geometry().FrameShiftMs(), GetParam().frame_ms);
  EXPECT_FLOAT_EQ(engine->decoder().config().frame_shift_ms, GetParam().frame_ms);
}

// audio_processed covers the audio sent, chunk by chunk on the model's clock,
// and the final segment ends where the audio does.
TEST_P(FrameClockTest, AudioProcessedIsTheLengthOfTheAudio) {
  std::unique_ptr<Engine> engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  const ModelGeometry& g = engine->geometry();
  const double seconds = 3.0;
  const std::vector<int16_t> audio = Speechlike(seconds, 16000, 3);
  StreamRequest request;
  request.decode.endpoint.enabled = false;
  const Outcome out = RunStream(*engine, audio, request);
  ASSERT_EQ(out.finish, FinishReason::kStop);
  // Every encoder frame the audio makes is decoded, the tail padding (an
  // fbank window and the subsampling's look-ahead of zeros) included, so all
  // of the audio is: what is reported is the audio sent, or less by under a
  // frame, never more.
  const int64_t frames = g.OutputFrames(FeatureFrames(audio.size() + TailPadding(g)));
  const double processed = out.processed.back();
  EXPECT_NEAR(processed, std::min(seconds, frames * GetParam().frame_ms / 1000.0), 1e-9);
  EXPECT_LE(processed, seconds);
  EXPECT_GT(processed, seconds - GetParam().frame_ms / 1000.0);
  // Events before the end report whole chunks on the same clock.
  const double chunk_s = g.chunk_size * GetParam().frame_ms / 1000.0;
  for (size_t i = 0; i < out.processed.size(); ++i) {
    const double chunks = out.processed[i] / chunk_s;
    if (out.processed[i] == processed) continue;  // The last, short chunk.
    EXPECT_NEAR(chunks, std::round(chunks), 1e-6) << "event " << i << ": " << out.processed[i];
  }
  ASSERT_FALSE(out.finals.empty());
  EXPECT_EQ(out.finals.back().end_ms, std::llround(processed * 1000.0));
}

// Word times are their tokens' CTC frames on the model's clock, inside the
// audio.
TEST_P(FrameClockTest, WordTimesAreTokenFramesTimesTheFrameShift) {
  std::unique_ptr<Engine> engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  const double seconds = 4.0;
  const std::vector<int16_t> audio = Speechlike(seconds, 16000, 5);
  StreamRequest request;
  request.decode.endpoint.enabled = false;
  const Outcome out = RunStream(*engine, audio, request);
  ASSERT_EQ(out.finish, FinishReason::kStop);
  const int64_t frames = engine->geometry().OutputFrames(
      FeatureFrames(audio.size() + TailPadding(engine->geometry())));
  int words = 0, beyond_the_first_frame = 0;
  for (const decoder::DecodeResult& r : out.finals) {
    for (const decoder::Hypothesis& h : r.nbest) {
      std::set<int64_t> token_ms;
      for (const int64_t f : h.token_frames) {
        EXPECT_GE(f, 0);
        EXPECT_LT(f, frames);
        token_ms.insert(std::llround(f * GetParam().frame_ms));
      }
      for (const decoder::WordResult& w : h.words) {
        ++words;
        if (w.end_ms > 0) ++beyond_the_first_frame;
        EXPECT_TRUE(token_ms.count(w.start_ms)) << w.text << " starts at " << w.start_ms << " ms";
        EXPECT_TRUE(token_ms.count(w.end_ms)) << w.text << " ends at " << w.end_ms << " ms";
        EXPECT_LE(w.start_ms, w.end_ms);
        EXPECT_LE(w.end_ms, seconds * 1000.0);
      }
    }
  }
  EXPECT_GT(words, 0) << "the random model emits words for this audio";
  EXPECT_GT(beyond_the_first_frame, 0);
}

// A trailing-silence rule counts milliseconds of the model's frames: 1.5 s of
// silence is 25 frames at 60 ms (19 at 80 ms), which 2 s of audio holds --
// at 40 ms it would take 38 frames, which it does not.
TEST_P(FrameClockTest, TrailingSilenceIsMeasuredOnTheModelsClock) {
  std::unique_ptr<Engine> engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  const ModelGeometry& g = engine->geometry();
  const std::vector<int16_t> audio = Speechlike(2.0, 16000, 7);
  const int64_t frames = g.OutputFrames(FeatureFrames(audio.size()));
  constexpr int kSilenceMs = 1500;
  ASSERT_GE(frames * GetParam().frame_ms, kSilenceMs) << "the audio holds the silence";
  ASSERT_LT(frames * 40.0, kSilenceMs) << "the audio does not at 40 ms";
  StreamRequest request;
  request.decode.single_utterance = true;
  request.decode.endpoint.blank_threshold = 0.0f;  // Every frame counts as silence.
  request.decode.endpoint.rules = {{/*must_decode_something=*/false, kSilenceMs, 0}};
  const Outcome out = RunStream(*engine, audio, request);
  ASSERT_EQ(out.finish, FinishReason::kEndpoint);
  // The rule fired at the end of the first chunk that reached 1.5 s.
  const double chunk_s = g.chunk_size * GetParam().frame_ms / 1000.0;
  const double processed = out.processed.back();
  EXPECT_GE(processed, kSilenceMs / 1000.0);
  EXPECT_LT(processed, kSilenceMs / 1000.0 + chunk_s);
  ASSERT_EQ(out.finals.size(), 1u);
  EXPECT_EQ(out.finals[0].endpoint_rule, 0);
  EXPECT_EQ(out.finals[0].end_ms, std::llround(processed * 1000.0));
}

// The start-up log states the attention history the maths keeps
// (chunk_size x num_left_chunks frames on the model's clock), not the block
// capacity that holds it: 8 x 4 frames are 1.92 s at 60 ms and 2.56 s at
// 80 ms (the capacity, 6 blocks of 8, would read 2.88 s and 3.84 s).
TEST_P(FrameClockTest, TheStartUpLogStatesTheRetainedHistory) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(32);
  spdlog::logger& logger = *spdlog::default_logger();
  logger.sinks().push_back(sink);
  ModelOptions options;
  options.model_dir = ModelDir(GetParam());
  EngineConfig config;
  config.num_left_chunks = 4;
  auto engine = LoadEngine(options, config);
  const absl::Status loaded = engine.status();
  int chunk_size = 0;
  if (engine.ok()) {
    chunk_size = (*engine)->geometry().chunk_size;
    engine->reset();  // No engine thread logs while the sink is taken out.
  }
  logger.sinks().pop_back();
  ASSERT_TRUE(loaded.ok()) << loaded;
  ASSERT_EQ(chunk_size, 8);
  const std::string want =
      "attention history " + absl::StrCat(chunk_size * 4 * GetParam().frame_ms / 1000.0) + " s";
  bool found = false;
  for (const std::string& line : sink->last_formatted())
    found |= line.find(want) != std::string::npos;
  EXPECT_TRUE(found) << "no \"" << want << "\" in the start-up log";
}

}  // namespace
}  // namespace oasr::scheduler
