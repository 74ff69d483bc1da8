// Recognition through a real oasr-server subprocess serving the small random
// model the PyTorch reference writes (fixture encoder_golden): transcripts
// compared with the engine run in-process on the same audio, through the C++
// client library, the oasr-client binary and the independent Python client;
// interim and final results, word offsets, every INVALID_ARGUMENT case, the
// stream limit, disconnects freeing resources, /metrics, and SIGTERM.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "nlohmann/json.hpp"
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
using testing::WriteTemp;

const std::string kModelDir = testing::SmallModelDir();

class RecognitionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::ServerProcess();
    ASSERT_TRUE(
        server_->Start(OASR_SERVER_BINARY, {"--model-dir", kModelDir, "--model-name", "small",
                                            "--log-level", "debug", "--shutdown-grace", "1"}))
        << server_->error();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(server_->grpc_target(), grpc::InsecureChannelCredentials());
    ASSERT_TRUE(channel_->WaitForConnected(In(10))) << server_->ReadLog();
    stub_ = asr::v1::Speech::NewStub(channel_);
  }

  static testing::ServerProcess* server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<asr::v1::Speech::Stub> stub_;
};

testing::ServerProcess* RecognitionTest::server_ = nullptr;

TEST_F(RecognitionTest, TranscriptMatchesTheEngineThroughCppAndPythonClients) {
  const std::vector<int16_t> audio = MakeAudio(7, 4.0, 16000);
  const std::vector<std::string> want = EngineFinals(audio, 16000);
  ASSERT_FALSE(want.empty());

  server::StreamOutcome got = Stream(*stub_, audio, Config(16000));
  ASSERT_TRUE(got.status.ok()) << got.status.error_message() << server_->ReadLog();
  EXPECT_EQ(got.finals, want);
  EXPECT_EQ(got.finish_reason, "stop");
  EXPECT_EQ(got.interim_results, 0) << "interim_results was off";

  const std::string wav = WriteTemp("roundtrip.wav", server::EncodeWav(audio, 16000));
  // The oasr-client binary, one JSON response per line.
  auto [code, out] =
      testing::RunCommand("timeout 120 " + std::string(OASR_CLIENT_BINARY) + " --server " +
                          server_->grpc_target() + " stream --fast --no-interim --json " + wav);
  ASSERT_EQ(code, 0) << out;
  std::vector<std::string> client_finals;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    const nlohmann::json response = nlohmann::json::parse(line);
    for (const auto& r : response["results"]) {
      if (r["is_final"].get<bool>() && !r["alternatives"].empty()) {
        client_finals.push_back(r["alternatives"][0]["transcript"].get<std::string>());
      }
    }
  }
  EXPECT_EQ(client_finals, want) << out;

  // The independent Python client (Debian's python3-grpcio, stubs generated now).
  auto [pcode, pout] = testing::RunCommand(
      "timeout 120 /usr/bin/python3 " + std::string(OASR_SOURCE_DIR) +
      "/tools/python_client/oasr_client.py --json --stubs-dir " + ::testing::TempDir() +
      "/py_stubs --server " + server_->grpc_target() + " stream " + wav + " --no-interim 2>&1");
  ASSERT_EQ(pcode, 0) << pout;
  const std::string summary_line = pout.substr(pout.rfind("{\"summary\""));
  const nlohmann::json summary = nlohmann::json::parse(summary_line)["summary"];
  EXPECT_EQ(summary["status"], "OK");
  EXPECT_EQ(summary["finals"].get<std::vector<std::string>>(), want) << pout;
  EXPECT_EQ(summary["finish_reason"], "stop");
}

TEST_F(RecognitionTest, ResampledAndG711AudioMatchTheEngine) {
  const std::vector<int16_t> audio8k = MakeAudio(11, 3.0, 8000);
  server::StreamOutcome got = Stream(*stub_, audio8k, Config(8000));
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_EQ(got.finals, EngineFinals(audio8k, 8000));

  // mu-law: the server must hear exactly the expanded samples.
  std::mt19937 rng(3);
  std::string mulaw(24000, '\0');
  std::vector<int16_t> expanded;
  for (char& c : mulaw) {
    c = static_cast<char>(rng() & 0xff);
    expanded.push_back(server::MulawToLinear(static_cast<uint8_t>(c)));
  }
  auto call_config = Config(8000);
  call_config.mutable_config()->set_encoding(asr::v1::MULAW);
  grpc::ClientContext context;
  context.set_deadline(In(60));
  auto call = stub_->StreamingRecognize(&context);
  StreamingRecognizeRequest request;
  *request.mutable_streaming_config() = call_config;
  ASSERT_TRUE(call->Write(request));
  for (size_t at = 0; at < mulaw.size(); at += 800) {
    request.set_audio_content(mulaw.substr(at, 800));
    ASSERT_TRUE(call->Write(request));
  }
  call->WritesDone();
  std::vector<std::string> finals;
  StreamingRecognizeResponse response;
  while (call->Read(&response)) {
    for (const auto& r : response.results()) {
      if (r.is_final() && r.alternatives_size() > 0)
        finals.push_back(r.alternatives(0).transcript());
    }
  }
  ASSERT_TRUE(call->Finish().ok());
  EXPECT_EQ(finals, EngineFinals(expanded, 8000));
}

TEST_F(RecognitionTest, InterimThenFinalWithWordOffsets) {
  const std::vector<int16_t> audio = MakeAudio(5, 4.0, 16000);
  server::StreamOutcome got =
      Stream(*stub_, audio, Config(16000, /*interim=*/true, /*words=*/true));
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  ASSERT_FALSE(got.responses.empty());
  int interim_before_first_final = 0;
  bool seen_final = false;
  float processed = 0;
  int64_t last_word_end = 0;
  for (size_t i = 0; i < got.responses.size(); ++i) {
    const StreamingRecognizeResponse& response = got.responses[i];
    for (int k = 0; k < response.results_size(); ++k) {
      const auto& r = response.results(k);
      const bool last = i + 1 == got.responses.size() && k + 1 == response.results_size();
      EXPECT_EQ(r.finish_reason().empty(), !last) << "finish_reason only on the last result";
      EXPECT_GE(r.audio_processed(), processed) << "audio_processed never goes back";
      processed = r.audio_processed();
      if (!r.is_final()) {
        if (!seen_final) ++interim_before_first_final;
        EXPECT_EQ(r.stability(), 0.0f);
        continue;
      }
      seen_final = true;
      EXPECT_EQ(r.stability(), 1.0f);
      if (r.alternatives_size() == 0) continue;
      for (const auto& w : r.alternatives(0).words()) {
        EXPECT_LE(w.start_offset_ms(), w.end_offset_ms()) << w.word();
        EXPECT_GE(w.start_offset_ms(), last_word_end) << "word offsets are monotonic";
        EXPECT_LE(w.end_offset_ms(), 4000 + 200);
        EXPECT_EQ(w.start_time().seconds() * 1000 + w.start_time().nanos() / 1000000,
                  w.start_offset_ms());
        EXPECT_GE(w.confidence(), 0.0f);
        EXPECT_LE(w.confidence(), 1.0f);
        last_word_end = w.end_offset_ms();
      }
    }
  }
  EXPECT_TRUE(seen_final);
  EXPECT_GT(interim_before_first_final, 0) << "interim results come before the final";
  EXPECT_EQ(got.finish_reason, "stop");
  EXPECT_NEAR(processed, 4.0, 0.25);
  EXPECT_GT(last_word_end, 0) << "the random model emits words for this audio";
}

struct BadCall {
  std::string name;
  std::vector<StreamingRecognizeRequest> messages;
  std::string field;  // Expected at the start of the message.
};

TEST_F(RecognitionTest, BadRequestsAreInvalidArgumentNamingTheField) {
  auto config_msg = [](auto edit) {
    StreamingRecognizeRequest r;
    *r.mutable_streaming_config() = Config(16000);
    edit(r.mutable_streaming_config());
    return r;
  };
  StreamingRecognizeRequest audio;
  audio.set_audio_content(std::string(320, '\0'));
  StreamingRecognizeRequest odd;
  odd.set_audio_content(std::string(321, '\0'));
  const auto ok = config_msg([](auto*) {});
  std::vector<BadCall> calls = {
      {"unknown model",
       {config_msg([](auto* c) { c->mutable_config()->set_model("nope"); })},
       "model: 'nope'"},
      {"rate too low",
       {config_msg([](auto* c) { c->mutable_config()->set_sample_rate_hertz(4000); })},
       "sample_rate_hertz: 4000"},
      {"rate too high",
       {config_msg([](auto* c) { c->mutable_config()->set_sample_rate_hertz(96000); })},
       "sample_rate_hertz: 96000"},
      {"stereo",
       {config_msg([](auto* c) { c->mutable_config()->set_audio_channel_count(2); })},
       "audio_channel_count: 2"},
      {"language",
       {config_msg([](auto* c) { c->mutable_config()->set_language_code("xx-YY"); })},
       "language_code: 'xx-YY'"},
      {"alternatives",
       {config_msg([](auto* c) { c->mutable_config()->set_max_alternatives(5000); })},
       "max_alternatives: 5000"},
      {"wav in a stream",
       {config_msg([](auto* c) { c->mutable_config()->set_encoding(asr::v1::WAV); })},
       "encoding: WAV"},
      {"negative boost",
       {config_msg([](auto* c) {
         auto* ctx = c->mutable_config()->add_speech_contexts();
         ctx->add_phrases("t3");
         ctx->set_boost(-1);
       })},
       "speech_contexts[0].boost"},
      {"endpoint threshold",
       {config_msg([](auto* c) {
         c->mutable_config()->mutable_endpointing_config()->set_stop_threshold(1.5f);
       })},
       "endpointing_config.stop_threshold"},
      {"odd byte count", {ok, audio, odd}, "audio_content: 321 bytes"},
      {"no RecognitionConfig",
       {config_msg([](auto* c) { c->clear_config(); })},
       "streaming_config.config: missing"},
      {"audio before config", {audio}, "streaming_config: the first message"},
      {"second config", {ok, audio, ok}, "streaming_config: sent again"},
      {"no config at all", {}, "streaming_config: the stream ended"},
  };
  for (const BadCall& bad : calls) {
    grpc::ClientContext context;
    context.set_deadline(In(30));
    auto call = stub_->StreamingRecognize(&context);
    for (const auto& m : bad.messages) {
      if (!call->Write(m)) break;
    }
    call->WritesDone();
    StreamingRecognizeResponse response;
    while (call->Read(&response)) {
    }
    const grpc::Status status = call->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << bad.name << ": " << status.error_message();
    EXPECT_EQ(status.error_message().rfind(bad.field, 0), 0u)
        << bad.name << ": '" << status.error_message() << "'";
  }
  std::map<std::string, double> metrics;
  EXPECT_TRUE(WaitForIdle(server_->metrics_port(), &metrics)) << "a refused stream leaked";
  EXPECT_GE(metrics["oasr_errors_total{code=\"INVALID_ARGUMENT\"}"], calls.size());
}

TEST_F(RecognitionTest, RecognizeAndListModels) {
  {
    grpc::ClientContext context;
    asr::v1::ListModelsResponse models;
    ASSERT_TRUE(stub_->ListModels(&context, {}, &models).ok());
    ASSERT_EQ(models.models_size(), 1);
    const auto& m = models.models(0);
    EXPECT_EQ(m.name(), "small");
    EXPECT_EQ(m.sample_rate_hertz(), 16000);
    EXPECT_EQ(m.chunk_frames(), 4);  // The fixture's serving.chunk_size.
    EXPECT_EQ(m.chunk_ms(), 160);
    EXPECT_EQ(m.vocabulary_size(), 53);
    EXPECT_GT(m.max_stream_seconds(), 0);
  }
  const std::vector<int16_t> audio = MakeAudio(9, 3.0, 16000);
  const std::vector<std::string> want = EngineFinals(audio, 16000);
  asr::v1::RecognizeRequest request;
  request.set_audio(server::EncodeWav(audio, 16000));  // LINEAR16 with a RIFF header.
  grpc::ClientContext context;
  context.set_deadline(In(60));
  asr::v1::RecognizeResponse response;
  grpc::Status status = stub_->Recognize(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<std::string> got;
  for (const auto& r : response.results()) got.push_back(r.alternatives(0).transcript());
  EXPECT_EQ(got, want);
  EXPECT_EQ(response.finish_reason(), "stop");
  EXPECT_NEAR(response.audio_processed(), 3.0, 0.25);

  grpc::ClientContext bad_context;
  request.set_audio("RIFF1234WAVEjunk");
  status = stub_->Recognize(&bad_context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message().rfind("audio: WAV", 0), 0u) << status.error_message();
}

TEST_F(RecognitionTest, ClientThatLeavesMidStreamFreesItsResources) {
  const std::vector<int16_t> audio = MakeAudio(13, 2.0, 16000);
  // The counters are the server's since it started: other tests of this
  // process may have run on it first, so only what changes here counts.
  const std::string cancelled = "oasr_streams_finished_total{finish_reason=\"cancelled\"}";
  const std::string stopped = "oasr_streams_finished_total{finish_reason=\"stop\"}";
  std::map<std::string, double> before;
  ASSERT_TRUE(WaitForIdle(server_->metrics_port(), &before));
  for (int round = 0; round < 3; ++round) {
    grpc::ClientContext context;
    auto call = stub_->StreamingRecognize(&context);
    StreamingRecognizeRequest request;
    *request.mutable_streaming_config() = Config(16000, true);
    ASSERT_TRUE(call->Write(request));
    request.set_audio_content(reinterpret_cast<const char*>(audio.data()), audio.size() * 2);
    ASSERT_TRUE(call->Write(request));
    StreamingRecognizeResponse response;
    ASSERT_TRUE(call->Read(&response)) << "a partial result arrives while the stream is open";
    std::map<std::string, double> busy;
    std::string error;
    busy = ScrapeMetrics(server_->metrics_port(), &error);
    // At least this one: the previous round's cancelled call may not have
    // been torn down yet (that it is, in the end, is checked below).
    EXPECT_GE(busy["oasr_grpc_streams_open"], 1);
    context.TryCancel();  // The client goes away without ending its audio.
    call->Finish();
  }
  std::map<std::string, double> metrics;
  EXPECT_TRUE(WaitForIdle(server_->metrics_port(), &metrics))
      << "streams_open " << metrics["oasr_grpc_streams_open"] << ", active "
      << metrics["oasr_streams_active"] << ", blocks " << metrics["oasr_kv_pool_blocks_used"];
  // Every one of them was cancelled, none decoded to its end.
  for (int i = 0; i < 250 && metrics[cancelled] < before[cancelled] + 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::string error;
    metrics = ScrapeMetrics(server_->metrics_port(), &error);
  }
  EXPECT_GE(metrics[cancelled] - before[cancelled], 3);
  EXPECT_EQ(metrics[stopped], before[stopped]);
}

TEST_F(RecognitionTest, MetricsAreValidPrometheusTextWithTheEngineFigures) {
  const std::vector<int16_t> audio = MakeAudio(17, 1.0, 16000);
  ASSERT_TRUE(Stream(*stub_, audio, Config(16000)).status.ok());
  std::string error;
  std::map<std::string, double> m = ScrapeMetrics(server_->metrics_port(), &error);
  ASSERT_TRUE(error.empty()) << error;
  for (const char* name :
       {"oasr_serving", "oasr_streams_active", "oasr_streams_waiting", "oasr_kv_pool_blocks_total",
        "oasr_kv_pool_blocks_used", "oasr_audio_seconds_processed_total",
        "oasr_chunk_latency_seconds_count", "oasr_queue_time_seconds_count",
        "oasr_batch_size_count", "oasr_model_load_seconds", "oasr_grpc_streams_open",
        "oasr_streams_finished_total{finish_reason=\"stop\"}",
        "oasr_errors_total{code=\"RESOURCE_EXHAUSTED\"}"}) {
    EXPECT_TRUE(m.count(name)) << name;
  }
  EXPECT_EQ(m["oasr_serving"], 1);
  EXPECT_GT(m["oasr_kv_pool_blocks_total"], 0);
  EXPECT_GE(m["oasr_audio_seconds_processed_total"], 0.9);
  EXPECT_GT(m["oasr_chunk_latency_seconds_count"], 0);
  EXPECT_EQ(m["oasr_chunk_latency_seconds_bucket{le=\"+Inf\"}"],
            m["oasr_chunk_latency_seconds_count"]);
  // The streaming calls' stages: each counted, with time that adds up (a
  // second of audio in pieces: reads; the final: a write and a dispatch).
  // The last write's and dispatch's figures are added as they complete,
  // which may be just after the client has its status: scrape until every
  // stage has counted (bounded).
  const char* const kStages[] = {"read_wait", "reaction", "write_wait", "dispatch_wait",
                                 "dispatch_run"};
  auto all_counted = [&] {
    for (const char* stage : kStages) {
      if (m["oasr_grpc_stage_total{stage=\"" + std::string(stage) + "\"}"] < 1) return false;
    }
    return true;
  };
  for (int i = 0; i < 500 && !all_counted(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    m = ScrapeMetrics(server_->metrics_port(), &error);
  }
  for (const char* stage : kStages) {
    const std::string label = std::string("{stage=\"") + stage + "\"}";
    EXPECT_GE(m["oasr_grpc_stage_total" + label], 1) << stage;
    EXPECT_GE(m["oasr_grpc_stage_seconds_total" + label], 0) << stage;
    EXPECT_LT(m["oasr_grpc_stage_seconds_total" + label], 3600) << stage;
  }
  EXPECT_GT(m["oasr_grpc_stage_seconds_total{stage=\"read_wait\"}"], 0);
  EXPECT_GE(m["oasr_grpc_stage_total{stage=\"reaction\"}"],
            m["oasr_grpc_stage_total{stage=\"read_wait\"}"] - 16)
      << "nearly every delivered message has its reaction";
  // Every response written (the final at least) was delivered after its
  // engine event, within the scrape's bounds; coalesced ones are not counted.
  const double delivered = m["oasr_grpc_response_delivery_seconds_count"];
  EXPECT_GE(delivered, 1);
  EXPECT_LE(delivered, m["oasr_grpc_stage_total{stage=\"write_wait\"}"]);
  EXPECT_EQ(m["oasr_grpc_response_delivery_seconds_bucket{le=\"+Inf\"}"], delivered);
  EXPECT_GT(m["oasr_grpc_response_delivery_seconds_sum"], 0);
  EXPECT_LT(m["oasr_grpc_response_delivery_seconds_sum"], 3600 * delivered);
}

TEST(RecognitionLimitsTest, BeyondTheStreamLimitIsResourceExhaustedWhileAdmittedStreamsGoOn) {
  testing::ServerProcess server;
  ASSERT_TRUE(server.Start(OASR_SERVER_BINARY,
                           {"--model-dir", kModelDir, "--max-active-streams", "1",
                            "--max-waiting-streams", "0", "--max-message-bytes", "65536"}))
      << server.error();
  auto channel = grpc::CreateChannel(server.grpc_target(), grpc::InsecureChannelCredentials());
  auto stub = asr::v1::Speech::NewStub(channel);
  const std::vector<int16_t> audio = MakeAudio(21, 2.0, 16000);

  grpc::ClientContext first_context;
  first_context.set_deadline(In(60));
  auto first = stub->StreamingRecognize(&first_context);
  StreamingRecognizeRequest request;
  *request.mutable_streaming_config() = Config(16000, true);
  ASSERT_TRUE(first->Write(request));
  request.set_audio_content(reinterpret_cast<const char*>(audio.data()), 16000);
  ASSERT_TRUE(first->Write(request));
  StreamingRecognizeResponse response;
  ASSERT_TRUE(first->Read(&response)) << "the first stream is admitted and decoding";

  server::StreamOutcome refused = Stream(*stub, audio, Config(16000));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.status.error_message();
  EXPECT_NE(refused.status.error_message().find("stream limit"), std::string::npos);

  // The admitted stream carries on to a clean end.
  request.set_audio_content(reinterpret_cast<const char*>(audio.data()) + 16000,
                            audio.size() * 2 - 16000);
  ASSERT_TRUE(first->Write(request));
  first->WritesDone();
  std::string finish;
  while (first->Read(&response)) {
    for (const auto& r : response.results()) {
      if (!r.finish_reason().empty()) finish = r.finish_reason();
    }
  }
  EXPECT_TRUE(first->Finish().ok());
  EXPECT_EQ(finish, "stop");
  // And once it is gone, a new stream is served.
  EXPECT_TRUE(Stream(*stub, audio, Config(16000)).status.ok());

  // A message over --max-message-bytes is refused, and frees its slot.
  {
    grpc::ClientContext context;
    context.set_deadline(In(30));
    auto call = stub->StreamingRecognize(&context);
    StreamingRecognizeRequest big;
    *big.mutable_streaming_config() = Config(16000);
    ASSERT_TRUE(call->Write(big));
    big.set_audio_content(std::string(100000, '\0'));
    call->Write(big);
    call->WritesDone();
    StreamingRecognizeResponse ignored;
    while (call->Read(&ignored)) {
    }
    EXPECT_EQ(call->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  std::map<std::string, double> metrics;
  EXPECT_TRUE(WaitForIdle(server.metrics_port(), &metrics));
  EXPECT_TRUE(Stream(*stub, audio, Config(16000)).status.ok());
}

// The server's threads whose name starts with `prefix`.
int ThreadsNamed(pid_t pid, const std::string& prefix) {
  int n = 0;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

// Every streaming call of one server on one completion queue
// (--grpc-threads 1) and its events on one dispatcher thread
// (--event-threads 1): concurrent streams, each read, decoded and answered on
// those threads, all get the engine's transcript and end cleanly.
TEST(RecognitionQueuesTest, OneQueueCarriesManyConcurrentStreams) {
  testing::ServerProcess server;
  ASSERT_TRUE(server.Start(OASR_SERVER_BINARY, {"--model-dir", kModelDir, "--grpc-threads", "1",
                                                "--event-threads", "1"}))
      << server.error();
  EXPECT_EQ(ThreadsNamed(server.pid(), "oasr-grpc-"), 1);
  EXPECT_EQ(ThreadsNamed(server.pid(), "oasr-events"), 1);
  auto channel = grpc::CreateChannel(server.grpc_target(), grpc::InsecureChannelCredentials());
  auto stub = asr::v1::Speech::NewStub(channel);
  constexpr int kClips = 4;
  constexpr int kStreams = 24;
  std::vector<std::vector<int16_t>> audio;
  std::vector<std::vector<std::string>> want;
  for (int i = 0; i < kClips; ++i) {
    audio.push_back(MakeAudio(60 + i, 1.5 + 0.5 * i, 16000));
    want.push_back(EngineFinals(audio.back(), 16000));
    ASSERT_FALSE(want.back().empty());
  }
  std::vector<server::StreamOutcome> got(kStreams);
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back(
        [&, i] { got[i] = Stream(*stub, audio[i % kClips], Config(16000, /*interim=*/true)); });
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(got[i].status.ok()) << i << ": " << got[i].status.error_message();
    EXPECT_EQ(got[i].finals, want[i % kClips]) << i;
    EXPECT_EQ(got[i].finish_reason, "stop") << i;
  }
  std::map<std::string, double> metrics;
  EXPECT_TRUE(WaitForIdle(server.metrics_port(), &metrics));
  EXPECT_EQ(metrics["oasr_grpc_streams_open"], 0);
}

TEST(RecognitionShutdownTest, SigtermEndsOpenStreamsCancelledWithUnavailableAndExitsZero) {
  testing::ServerProcess server;
  ASSERT_TRUE(
      server.Start(OASR_SERVER_BINARY, {"--model-dir", kModelDir, "--shutdown-grace", "1.5"}))
      << server.error();
  auto channel = grpc::CreateChannel(server.grpc_target(), grpc::InsecureChannelCredentials());
  auto stub = asr::v1::Speech::NewStub(channel);
  auto health = grpc::health::v1::Health::NewStub(channel);
  const std::vector<int16_t> audio = MakeAudio(23, 1.0, 16000);

  struct Open {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<StreamingRecognizeRequest, StreamingRecognizeResponse>>
        call;
  };
  std::vector<std::unique_ptr<Open>> open;
  for (int i = 0; i < 2; ++i) {
    auto o = std::make_unique<Open>();
    o->context.set_deadline(In(60));
    o->call = stub->StreamingRecognize(&o->context);
    StreamingRecognizeRequest request;
    *request.mutable_streaming_config() = Config(16000, true);
    ASSERT_TRUE(o->call->Write(request));
    request.set_audio_content(reinterpret_cast<const char*>(audio.data()), audio.size() * 2);
    ASSERT_TRUE(o->call->Write(request));
    StreamingRecognizeResponse response;
    ASSERT_TRUE(o->call->Read(&response));
    open.push_back(std::move(o));
  }
  const auto signalled = std::chrono::steady_clock::now();
  server.Signal(SIGTERM);
  // During the grace period: NOT_SERVING, and new streams are refused.
  grpc::health::v1::HealthCheckResponse::ServingStatus seen =
      grpc::health::v1::HealthCheckResponse::SERVING;
  for (int i = 0; i < 100 && seen == grpc::health::v1::HealthCheckResponse::SERVING; ++i) {
    grpc::ClientContext context;
    context.set_deadline(In(2));
    grpc::health::v1::HealthCheckResponse response;
    if (health->Check(&context, {}, &response).ok()) seen = response.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(seen, grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  server::StreamOutcome late = Stream(*stub, audio, Config(16000));
  EXPECT_EQ(late.status.error_code(), grpc::StatusCode::UNAVAILABLE) << late.status.error_message();

  // After the grace period both streams end "cancelled" with UNAVAILABLE.
  for (auto& o : open) {
    std::string finish;
    StreamingRecognizeResponse response;
    while (o->call->Read(&response)) {
      for (const auto& r : response.results()) {
        if (!r.finish_reason().empty()) finish = r.finish_reason();
      }
    }
    const grpc::Status status = o->call->Finish();
    EXPECT_EQ(finish, "cancelled");
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  }
  const int status = server.WaitForExit(30);
  ASSERT_NE(status, -1) << server.ReadLog();
  ASSERT_TRUE(WIFEXITED(status)) << server.ReadLog();
  EXPECT_EQ(WEXITSTATUS(status), 0) << server.ReadLog();
  // The grace, then at most a second for the cancelled calls' endings; the
  // channel this test keeps open must not add a fixed slack (issue 20: it
  // held the exit 5 s more, past docker stop's timeout).
  const double exit_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  EXPECT_GE(exit_s, 1.5);
  EXPECT_LT(exit_s, 1.5 + 1.5) << server.ReadLog();
}

}  // namespace
}  // namespace oasr
