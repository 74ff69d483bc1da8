// Server paths beyond plain recognition, each through a real oasr-server
// subprocess serving the small random model (fixture encoder_golden): the
// idle-stream timeout, single_utterance ending at an endpoint, phrase
// boosting, the keepalive flags, raw G.711 (mu-law, A-law) in Recognize,
// attention rescoring of a U2++ model's finals, and --search greedy.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

#include "oasr/asr/v1/asr.grpc.pb.h"
#include "server/audio_codec.h"
#include "server/stream_client.h"
#include "tests/server/recognition_helpers.h"
#include "tests/server/server_process.h"

namespace oasr {
namespace {

using asr::v1::StreamingRecognizeRequest;
using asr::v1::StreamingRecognizeResponse;
using testing::Config;
using testing::EngineFinals;
using testing::In;
using testing::MakeAudio;
using testing::ScrapeMetrics;
using testing::Stream;
using testing::WaitForIdle;

using StreamCall = grpc::ClientReaderWriter<StreamingRecognizeRequest, StreamingRecognizeResponse>;

// Starts a server on the fixture model with `extra` flags.
void StartServer(testing::ServerProcess* server, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--model-dir", testing::SmallModelDir(), "--log-level", "debug"};
  args.insert(args.end(), extra.begin(), extra.end());
  ASSERT_TRUE(server->Start(OASR_SERVER_BINARY, args)) << server->error();
}

// A stub on a plain channel to `server`.
std::unique_ptr<asr::v1::Speech::Stub> Connect(const testing::ServerProcess& server) {
  return asr::v1::Speech::NewStub(
      grpc::CreateChannel(server.grpc_target(), grpc::InsecureChannelCredentials()));
}

// Reads until the server ends the call; returns its status and the last
// finish_reason seen.
grpc::Status Drain(StreamCall* call, std::string* finish_reason = nullptr) {
  StreamingRecognizeResponse response;
  while (call->Read(&response)) {
    for (const auto& r : response.results()) {
      if (!r.finish_reason().empty() && finish_reason != nullptr)
        *finish_reason = r.finish_reason();
    }
  }
  return call->Finish();
}

std::string Bytes(const std::vector<int16_t>& samples, size_t begin, size_t end) {
  return std::string(reinterpret_cast<const char*>(samples.data() + begin),
                     (end - begin) * sizeof(int16_t));
}

TEST(IdleTimeoutTest, SilentStreamsEndWithOutOfRangeAndAreFreedWhileSteadyOnesGoOn) {
  testing::ServerProcess server;
  StartServer(&server, {"--stream-idle-timeout", "1"});
  auto stub = Connect(server);

  // A client sending 400 ms every 400 ms for 3 s (three timeouts long) is
  // never idle; its stream ends normally.
  const std::vector<int16_t> audio = MakeAudio(31, 3.0, 16000);
  server::StreamClientOptions steady;
  steady.config = Config(16000);
  steady.realtime = true;
  steady.chunk_ms = 400;
  steady.timeout_s = 60;
  server::StreamOutcome ok = server::RunStream(*stub, audio, steady);
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message() << server.ReadLog();
  EXPECT_EQ(ok.finish_reason, "stop");
  EXPECT_EQ(ok.finals, EngineFinals(audio, 16000));

  // Silent after some audio (decoding has started, so the stream holds
  // cache blocks), silent after the config, and silent from the start.
  for (int sent : {2, 1, 0}) {
    grpc::ClientContext context;
    context.set_deadline(In(30));
    std::unique_ptr<StreamCall> call = stub->StreamingRecognize(&context);
    StreamingRecognizeRequest request;
    *request.mutable_streaming_config() = Config(16000, /*interim=*/true);
    if (sent >= 1) {
      ASSERT_TRUE(call->Write(request));
    }
    if (sent >= 2) {
      request.set_audio_content(Bytes(audio, 0, 16000));
      ASSERT_TRUE(call->Write(request));
      StreamingRecognizeResponse first;
      ASSERT_TRUE(call->Read(&first)) << "a partial result while the stream is open";
      std::string error;
      EXPECT_EQ(ScrapeMetrics(server.metrics_port(), &error)["oasr_grpc_streams_open"], 1);
    }
    // The client neither sends nor half-closes.
    const grpc::Status status = Drain(call.get());
    EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE)
        << sent << ": " << status.error_message();
    EXPECT_EQ(status.error_message().rfind("stream idle timeout: nothing received from the "
                                           "client for 1 s (--stream-idle-timeout)",
                                           0),
              0u)
        << status.error_message();
  }
  std::map<std::string, double> metrics;
  EXPECT_TRUE(WaitForIdle(server.metrics_port(), &metrics))
      << "streams_open " << metrics["oasr_grpc_streams_open"] << ", active "
      << metrics["oasr_streams_active"] << ", blocks " << metrics["oasr_kv_pool_blocks_used"];
  EXPECT_EQ(metrics["oasr_grpc_stream_idle_timeouts_total"], 3);
  EXPECT_EQ(metrics["oasr_errors_total{code=\"OUT_OF_RANGE\"}"], 3);
  // The two streams that had been opened in the engine were cancelled there.
  EXPECT_EQ(metrics["oasr_streams_finished_total{finish_reason=\"cancelled\"}"], 2);
  EXPECT_EQ(metrics["oasr_streams_finished_total{finish_reason=\"stop\"}"], 1);
}

TEST(SingleUtteranceTest, TheFirstEndpointEndsTheStreamWithFinishReasonEndpoint) {
  testing::ServerProcess server;
  StartServer(&server, {});
  auto stub = Connect(server);
  const std::vector<int16_t> audio = MakeAudio(41, 3.0, 16000);
  // A rule that ends a segment after 1 s of audio whatever the random model
  // hears makes the endpoint deterministic.
  asr::v1::StreamingRecognitionConfig config = Config(16000, /*interim=*/true);
  config.mutable_config()->mutable_endpointing_config()->set_max_segment_ms(1000);

  // Continuous decoding: the same rule cuts the stream into segments.
  server::StreamOutcome continuous = Stream(*stub, audio, config);
  ASSERT_TRUE(continuous.status.ok()) << continuous.status.error_message();
  EXPECT_EQ(continuous.finish_reason, "stop");
  EXPECT_GE(continuous.finals.size(), 2u);

  config.set_single_utterance(true);
  server::StreamOutcome single = Stream(*stub, audio, config);
  ASSERT_TRUE(single.status.ok()) << single.status.error_message();
  EXPECT_EQ(single.finish_reason, "endpoint");
  ASSERT_EQ(single.finals.size(), 1u);
  EXPECT_EQ(single.finals[0], continuous.finals[0]) << "the first segment is the same";
  const StreamingRecognizeResponse& last = single.responses.back();
  EXPECT_TRUE(last.results().rbegin()->is_final());
  EXPECT_LT(last.results().rbegin()->audio_processed(), 2.0f)
      << "the stream ended at the endpoint, not at the end of the audio";
  std::map<std::string, double> metrics;
  EXPECT_TRUE(WaitForIdle(server.metrics_port(), &metrics));
  EXPECT_EQ(metrics["oasr_streams_finished_total{finish_reason=\"endpoint\"}"], 1);
}

// A U2++ model (attention decoder): the server rescores every final result
// unless the request or the server turns it off; interim results never are.
TEST(AttentionRescoringTest, FinalsAreRescoredUnlessTurnedOff) {
  // Beside the small model among the golden fixtures.
  const std::string model =
      (std::filesystem::path(testing::SmallModelDir()).parent_path().parent_path() /
       "u2pp_rescoring" / "model")
          .string();
  const std::vector<int16_t> audio = MakeAudio(43, 2.6, 16000);
  asr::v1::StreamingRecognitionConfig config = Config(16000, /*interim=*/true);
  config.mutable_config()->mutable_endpointing_config()->set_max_segment_ms(1000);
  config.mutable_config()->set_max_alternatives(2);
  std::vector<std::string> finals[3];
  for (int run = 0; run < 3; ++run) {
    testing::ServerProcess server;
    std::vector<std::string> args = {"--model-dir", model, "--log-level", "info"};
    if (run == 2) args.push_back("--no-rescoring");
    ASSERT_TRUE(server.Start(OASR_SERVER_BINARY, args)) << server.error();
    auto stub = Connect(server);
    asr::v1::StreamingRecognitionConfig c = config;
    c.mutable_config()->set_disable_attention_rescoring(run == 1);
    server::StreamOutcome outcome = Stream(*stub, audio, c);
    ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    EXPECT_EQ(outcome.finish_reason, "stop");
    ASSERT_GE(outcome.finals.size(), 2u);
    finals[run] = outcome.finals;
    std::map<std::string, double> metrics;
    EXPECT_TRUE(WaitForIdle(server.metrics_port(), &metrics));
    EXPECT_EQ(metrics["oasr_segments_rescored_total"],
              run == 0 ? static_cast<double>(outcome.finals.size()) : 0.0)
        << "run " << run;
    EXPECT_EQ(metrics["oasr_segments_not_rescored_total"], 0) << "run " << run;
    // Idle: every segment's blocks are back in the pool (none without it).
    EXPECT_EQ(metrics["oasr_rescoring_pool_blocks_used"], 0) << "run " << run;
    if (run == 2) {
      EXPECT_EQ(metrics["oasr_rescoring_pool_blocks_total"], 0);
    } else {
      EXPECT_GT(metrics["oasr_rescoring_pool_blocks_total"], 0) << "run " << run;
    }
    for (const auto& response : outcome.responses) {
      for (const auto& r : response.results()) {
        EXPECT_LE(r.alternatives_size(), 2) << "max_alternatives is kept of the whole beam";
      }
    }
  }
  // Off by request and off for the server decode alike.
  EXPECT_EQ(finals[1], finals[2]);
}

std::string Joined(const std::vector<std::string>& finals) {
  std::string text;
  for (const std::string& f : finals) text += f + " ";
  return text;
}

TEST(PhraseBoostTest, ALargeBoostPutsThePhraseIntoTheTranscript) {
  testing::ServerProcess server;
  StartServer(&server, {});
  auto stub = Connect(server);
  const std::vector<int16_t> audio = MakeAudio(7, 4.0, 16000);
  // Two units of the fixture's vocabulary (t40 t41, neither a word start),
  // which the model never says for this audio unboosted but ranks among its
  // top tokens often enough for a boost to bring them in.
  const std::string phrase = "t40t41";

  server::StreamOutcome plain = Stream(*stub, audio, Config(16000));
  ASSERT_TRUE(plain.status.ok()) << plain.status.error_message();
  const std::string plain_text = Joined(plain.finals);
  ASSERT_EQ(plain_text.find("t40"), std::string::npos)
      << "pick a phrase the model does not say unboosted: " << plain_text;

  asr::v1::StreamingRecognitionConfig config = Config(16000);
  asr::v1::SpeechContext* context = config.mutable_config()->add_speech_contexts();
  context->add_phrases(phrase);
  context->set_boost(50);
  server::StreamOutcome boosted = Stream(*stub, audio, config);
  ASSERT_TRUE(boosted.status.ok()) << boosted.status.error_message();
  EXPECT_NE(Joined(boosted.finals).find(phrase), std::string::npos)
      << "boosted: " << Joined(boosted.finals) << "\nplain: " << plain_text;
}

TEST(GreedySearchTest, ServesOneAlternativeOfTheGreedySearchAndRefusesPhrases) {
  testing::ServerProcess server;
  StartServer(&server, {"--search", "greedy"});
  auto stub = Connect(server);
  const std::vector<int16_t> audio = MakeAudio(7, 4.0, 16000);
  asr::v1::StreamingRecognitionConfig config = Config(16000);
  config.mutable_config()->set_max_alternatives(4);
  server::StreamOutcome outcome = Stream(*stub, audio, config);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  // The greedy search has one hypothesis: finals carry one alternative, the
  // greedy decode's, whatever max_alternatives asks.
  const std::vector<std::string> expected =
      EngineFinals(audio, 16000, decoder::SearchMethod::kGreedy);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(outcome.finals, expected);
  int finals = 0;
  for (const auto& response : outcome.responses) {
    for (const auto& r : response.results()) {
      if (!r.is_final()) continue;
      ++finals;
      EXPECT_EQ(r.alternatives_size(), 1);
    }
  }
  EXPECT_EQ(finals, static_cast<int>(expected.size()));

  // Phrase boosting needs the beam search: refused at the first message.
  asr::v1::StreamingRecognitionConfig boosted = Config(16000);
  boosted.mutable_config()->add_speech_contexts()->add_phrases("t40t41");
  server::StreamOutcome refused = Stream(*stub, audio, boosted);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.status.error_message().find("greedy"), std::string::npos)
      << refused.status.error_message();

  // The same server with the default search answers with several.
  testing::ServerProcess beam;
  StartServer(&beam, {});
  auto beam_stub = Connect(beam);
  server::StreamOutcome nbest = Stream(*beam_stub, audio, config);
  ASSERT_TRUE(nbest.status.ok()) << nbest.status.error_message();
  int most = 0;
  for (const auto& response : nbest.responses) {
    for (const auto& r : response.results()) most = std::max(most, r.alternatives_size());
  }
  EXPECT_GT(most, 1);
}

// A client channel that pings every `ping_ms`, with or without calls and data.
std::shared_ptr<grpc::Channel> PingingChannel(const std::string& target, int ping_ms) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ping_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS, ping_ms);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

// Opens a stream, keeps it silent for `silent_s` while the channel pings,
// then sends `audio` and half-closes; returns the status and the finals.
grpc::Status SilentThenAudio(asr::v1::Speech::Stub& stub, double silent_s,
                             const std::vector<int16_t>& audio, std::vector<std::string>* finals) {
  grpc::ClientContext context;
  context.set_deadline(In(60));
  std::unique_ptr<StreamCall> call = stub.StreamingRecognize(&context);
  StreamingRecognizeRequest request;
  *request.mutable_streaming_config() = Config(16000);
  call->Write(request);
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(silent_s * 1000)));
  request.set_audio_content(Bytes(audio, 0, audio.size()));
  if (call->Write(request)) call->WritesDone();
  StreamingRecognizeResponse response;
  while (call->Read(&response)) {
    for (const auto& r : response.results()) {
      if (r.is_final() && r.alternatives_size() > 0)
        finals->push_back(r.alternatives(0).transcript());
    }
  }
  return call->Finish();
}

TEST(KeepaliveTest, ServerWithShortKeepaliveKeepsAPingingClientsSilentStream) {
  const std::vector<int16_t> audio = MakeAudio(43, 1.5, 16000);
  const std::vector<std::string> want = EngineFinals(audio, 16000);
  // The server pings idle connections every second and tolerates client
  // pings every second; the client pings every 2 s while its stream is
  // silent for 5 s (idle timeout off), then sends its audio.
  testing::ServerProcess server;
  StartServer(&server, {"--keepalive-time", "1", "--keepalive-timeout", "5", "--min-client-ping",
                        "1", "--stream-idle-timeout", "0"});
  auto stub = asr::v1::Speech::NewStub(PingingChannel(server.grpc_target(), 2000));
  std::vector<std::string> finals;
  const grpc::Status status = SilentThenAudio(*stub, 5.0, audio, &finals);
  EXPECT_TRUE(status.ok()) << status.error_message() << server.ReadLog();
  EXPECT_EQ(finals, want);
}

// Nearest G.711 code for each sample (brute force over the 256 codes of
// `expand`), so speech-like audio can be sent as mu-law or A-law.
std::string EncodeG711(const std::vector<int16_t>& samples, int16_t (*expand)(uint8_t)) {
  std::string out(samples.size(), '\0');
  for (size_t i = 0; i < samples.size(); ++i) {
    int best = 0;
    for (int code = 1; code < 256; ++code) {
      if (std::abs(expand(static_cast<uint8_t>(code)) - samples[i]) <
          std::abs(expand(static_cast<uint8_t>(best)) - samples[i])) {
        best = code;
      }
    }
    out[i] = static_cast<char>(best);
  }
  return out;
}

TEST(G711RecognizeTest, RawMulawAndAlawAreExpandedAsTheEngineExpects) {
  testing::ServerProcess server;
  StartServer(&server, {});
  auto stub = Connect(server);
  const std::vector<int16_t> audio = MakeAudio(47, 3.0, 8000);
  struct Law {
    asr::v1::AudioEncoding encoding;
    int16_t (*expand)(uint8_t);
  };
  for (const Law& law :
       {Law{asr::v1::MULAW, server::MulawToLinear}, Law{asr::v1::ALAW, server::AlawToLinear}}) {
    const std::string bytes = EncodeG711(audio, law.expand);
    std::vector<int16_t> expanded;
    for (char c : bytes) expanded.push_back(law.expand(static_cast<uint8_t>(c)));
    const std::vector<std::string> want = EngineFinals(expanded, 8000);
    ASSERT_FALSE(want.empty());

    asr::v1::RecognizeRequest request;
    request.mutable_config()->set_encoding(law.encoding);
    request.mutable_config()->set_sample_rate_hertz(8000);
    request.set_audio(bytes);
    grpc::ClientContext context;
    context.set_deadline(In(60));
    asr::v1::RecognizeResponse response;
    const grpc::Status status = stub->Recognize(&context, request, &response);
    ASSERT_TRUE(status.ok()) << law.encoding << ": " << status.error_code() << " "
                             << status.error_message();
    std::vector<std::string> got;
    for (const auto& r : response.results()) {
      got.push_back(r.alternatives_size() > 0 ? r.alternatives(0).transcript() : "");
    }
    EXPECT_EQ(got, want) << law.encoding;
    EXPECT_EQ(response.finish_reason(), "stop");
    EXPECT_NEAR(response.audio_processed(), 3.0, 0.25);

    // The same bytes read as 16-bit samples are other audio altogether.
    request.mutable_config()->set_encoding(asr::v1::LINEAR16);
    grpc::ClientContext linear_context;
    linear_context.set_deadline(In(60));
    asr::v1::RecognizeResponse linear;
    ASSERT_TRUE(stub->Recognize(&linear_context, request, &linear).ok());
    EXPECT_NEAR(linear.audio_processed(), 1.5, 0.25) << "two bytes per sample";
  }
}

}  // namespace
}  // namespace oasr
