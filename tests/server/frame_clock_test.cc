// The model's frame clock through the server: oasr-server serving a 6x
// (conv2d6, 60 ms frames) and an 8x (conv2d8, 80 ms frames) model reports
// chunk lengths, audio_processed, word offsets and endpoint silences in the
// model's time, matching the real length of the audio sent. Each check fails
// with a 4x model's 40 ms clock (tests/scheduler/frame_clock_test.cc holds
// the engine-level checks).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "oasr/asr/v1/asr.grpc.pb.h"
#include "server/audio_codec.h"
#include "server/stream_client.h"
#include "tests/server/recognition_helpers.h"
#include "tests/server/server_process.h"

namespace oasr {
namespace {

using testing::Config;
using testing::In;
using testing::MakeAudio;
using testing::Stream;

constexpr int64_t kWordGapMs = 100;  // decoder::CtcDecoderConfig::word_gap_ms, the server's.

struct ClockCase {
  std::string name;  // The fixture case.
  double frame_ms;
};

class ServerFrameClockTest : public ::testing::TestWithParam<ClockCase> {
 protected:
  void SetUp() override {
    const std::string model_dir =
        std::string(OASR_ENCODER_FIXTURES) + "/" + GetParam().name + "/model";
    server_ = std::make_unique<testing::ServerProcess>();
    ASSERT_TRUE(server_->Start(OASR_SERVER_BINARY,
                               {"--model-dir", model_dir, "--model-name", GetParam().name}))
        << server_->error();
    channel_ = grpc::CreateChannel(server_->grpc_target(), grpc::InsecureChannelCredentials());
    ASSERT_TRUE(channel_->WaitForConnected(In(10))) << server_->ReadLog();
    stub_ = asr::v1::Speech::NewStub(channel_);
  }

  // Whether `ms` is a whole number of model frames.
  bool OnTheClock(int64_t ms) const {
    const double frames = ms / GetParam().frame_ms;
    return std::fabs(frames - std::round(frames)) < 1e-6;
  }

  std::unique_ptr<testing::ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<asr::v1::Speech::Stub> stub_;
};

INSTANTIATE_TEST_SUITE_P(Subsampling, ServerFrameClockTest,
                         ::testing::Values(ClockCase{"sub6", 60.0}, ClockCase{"sub8", 80.0}),
                         [](const ::testing::TestParamInfo<ClockCase>& info) {
                           return info.param.name;
                         });

TEST_P(ServerFrameClockTest, ChunksAudioProcessedAndWordOffsetsAreInTheModelsTime) {
  grpc::ClientContext list_context;
  asr::v1::ListModelsResponse models;
  ASSERT_TRUE(stub_->ListModels(&list_context, {}, &models).ok());
  ASSERT_EQ(models.models_size(), 1);
  const int chunk_frames = models.models(0).chunk_frames();
  EXPECT_EQ(chunk_frames, 8);  // The fixture's serving.chunk_size.
  EXPECT_EQ(models.models(0).chunk_ms(), std::lround(chunk_frames * GetParam().frame_ms));

  const double seconds = 3.0;
  const std::vector<int16_t> audio = MakeAudio(11, seconds, 16000);
  server::StreamOutcome got =
      Stream(*stub_, audio, Config(16000, /*interim=*/true, /*words=*/true));
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_EQ(got.finish_reason, "stop");
  const double chunk_s = chunk_frames * GetParam().frame_ms / 1000.0;
  float processed = 0;
  std::vector<float> all_processed;
  int words = 0;
  for (const auto& response : got.responses) {
    for (const auto& r : response.results()) {
      processed = r.audio_processed();
      // Results come after whole chunks, but for the last, short one.
      all_processed.push_back(r.audio_processed());
      if (!r.is_final() || r.alternatives_size() == 0) continue;
      for (const auto& w : r.alternatives(0).words()) {
        ++words;
        // A word starts at a token frame (the midpoint of two), or the
        // decoder's word gap (100 ms) before one, or at the segment's start.
        const int64_t start = w.start_offset_ms();
        EXPECT_TRUE(OnTheClock(start) || OnTheClock(start + kWordGapMs) || start == 0)
            << w.word() << " " << start;
        // Or at the end of the audio: a token in the tail padding's last
        // frame is capped there.
        EXPECT_TRUE(OnTheClock(w.end_offset_ms()) || w.end_offset_ms() == seconds * 1000)
            << w.word() << " " << w.end_offset_ms();
        EXPECT_LE(w.end_offset_ms(), seconds * 1000);
      }
    }
  }
  for (const float p : all_processed) {
    if (p == processed) continue;
    const double chunks = p / chunk_s;
    EXPECT_NEAR(chunks, std::round(chunks), 1e-4) << p;
  }
  // All of the audio sent, or less by under a frame (the tail padding lets
  // the last samples reach a frame), never more.
  EXPECT_LE(processed, seconds + 1e-4);
  EXPECT_GT(processed, seconds - GetParam().frame_ms / 1000.0 - 1e-4);
  EXPECT_GT(words, 0) << "the random model emits words for this audio";

  // Recognize reports the same clock.
  asr::v1::RecognizeRequest request;
  request.set_audio(server::EncodeWav(audio, 16000));
  grpc::ClientContext context;
  context.set_deadline(In(60));
  asr::v1::RecognizeResponse response;
  ASSERT_TRUE(stub_->Recognize(&context, request, &response).ok());
  EXPECT_NEAR(response.audio_processed(), processed, 1e-4);
}

// An endpointing rule's silence is the model's milliseconds: 1.5 s of
// trailing silence is 25 (19) frames, which 2 s of audio holds; at 40 ms it
// would need 38, which it does not.
TEST_P(ServerFrameClockTest, EndpointSilenceIsMeasuredInTheModelsTime) {
  asr::v1::StreamingRecognitionConfig config = Config(16000);
  config.set_single_utterance(true);
  asr::v1::EndpointingConfig* endpointing = config.mutable_config()->mutable_endpointing_config();
  endpointing->set_stop_history_ms(1500);
  endpointing->set_stop_history_no_speech_ms(1500);
  endpointing->set_max_segment_ms(60000);
  endpointing->set_stop_threshold(1e-30f);  // Every frame is silence.
  const std::vector<int16_t> audio = MakeAudio(13, 2.0, 16000);
  server::StreamOutcome got = Stream(*stub_, audio, config);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_EQ(got.finish_reason, "endpoint");
  ASSERT_FALSE(got.responses.empty());
  const auto& results = got.responses.back().results();
  ASSERT_GT(results.size(), 0);
  const float processed = results[results.size() - 1].audio_processed();
  EXPECT_GE(processed, 1.5f);
  EXPECT_LT(processed, 1.5f + 8 * GetParam().frame_ms / 1000.0f);
}

}  // namespace
}  // namespace oasr
