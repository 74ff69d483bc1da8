// The load generator (oasr-client load): its pacing and accounting against
// the real server with the small random model (fixture encoder_golden), and
// against in-process servers that are slow or lose audio on purpose, which
// it must report as such.
#include "server/load_generator.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/client_channel.h"
#include "server/grpc_status.h"
#include "server/server.h"
#include "tests/server/recognition_helpers.h"

namespace oasr {
namespace {

using testing::MakeAudio;

constexpr int kRate = 16000;

server::LoadClip Clip(uint32_t seed, double seconds) {
  return {"clip" + std::to_string(seed), kRate, MakeAudio(seed, seconds, kRate)};
}

std::shared_ptr<grpc::Channel> OwnChannel(int port) {
  server::ChannelOptions options;
  options.target = "127.0.0.1:" + std::to_string(port);
  options.own_connection = true;
  return *server::MakeChannel(options);
}

std::string Warnings(const server::LoadReport& report) {
  std::string all;
  for (const std::string& w : report.warnings) all += w + "\n";
  return all;
}

TEST(LatencyHistogramTest, PercentilesAreWithinOnePercent) {
  server::LatencyHistogram h;
  EXPECT_EQ(h.Percentile(0.5), 0.0);
  for (int i = 1; i <= 1000; ++i) h.Add(i);
  EXPECT_EQ(h.count(), 1000);
  EXPECT_DOUBLE_EQ(h.max(), 1000);
  EXPECT_NEAR(h.mean(), 500.5, 1e-9);
  for (double p : {0.5, 0.9, 0.99}) {
    const double want = p * 1000;
    EXPECT_GE(h.Percentile(p), want);
    EXPECT_LE(h.Percentile(p), want * 1.011);
  }
  EXPECT_DOUBLE_EQ(h.Percentile(1.0), 1000);
  server::LatencyHistogram other;
  other.Add(5000);
  h.Merge(other);
  EXPECT_EQ(h.count(), 1001);
  EXPECT_DOUBLE_EQ(h.Percentile(1.0), 5000);
}

TEST(LoadOptionsTest, DefaultChannelsAreOnePer40StreamsAndAtLeastOnePerThread) {
  EXPECT_EQ(oasr::server::DefaultLoadChannels(8, 16), 8);
  EXPECT_EQ(oasr::server::DefaultLoadChannels(8, 400), 10);
  EXPECT_EQ(oasr::server::DefaultLoadChannels(10, 20000), 500);
  EXPECT_EQ(oasr::server::DefaultLoadChannels(1, 1), 1);
  EXPECT_EQ(oasr::server::DefaultLoadChannels(0, 0), 1);
  EXPECT_EQ(oasr::server::DefaultLoadChannels(8, 1000000), 4096);
}

TEST(LoadOptionsTest, BadOptionsNameTheField) {
  server::LoadOptions options;
  EXPECT_NE(options.Validate().message().find("channels"), std::string::npos);
  options.channels.push_back(OwnChannel(1));
  EXPECT_NE(options.Validate().message().find("clips"), std::string::npos);
  options.clips.push_back(Clip(1, 0.5));
  EXPECT_TRUE(options.Validate().ok());
  struct Case {
    void (*spoil)(server::LoadOptions*);
    const char* field;
  };
  const Case cases[] = {
      {[](server::LoadOptions* o) { o->concurrency = 0; }, "concurrency"},
      {[](server::LoadOptions* o) { o->threads = 0; }, "threads"},
      {[](server::LoadOptions* o) { o->chunk_ms = 5; }, "chunk_ms"},
      {[](server::LoadOptions* o) {
         o->rates = {16000, 96000};
       },
       "96000"},
      {[](server::LoadOptions* o) { o->max_seconds = 2; }, "min_seconds"},
      {[](server::LoadOptions* o) { o->cancel_fraction = o->stall_fraction = 0.6; }, "sum"},
      {[](server::LoadOptions* o) { o->clips[0].samples.clear(); }, "clip1"},
  };
  for (const Case& c : cases) {
    server::LoadOptions spoilt = options;
    c.spoil(&spoilt);
    const absl::Status status = spoilt.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(status.message().find(c.field), std::string::npos) << status;
  }
}

// A stand-in server: answers each audio message after `delay` with an
// interim result and the end of the audio with a final result "stop", each
// covering all the audio so far less `lose_s`.
class FixtureSpeech final : public asr::v1::Speech::Service {
 public:
  FixtureSpeech(std::chrono::milliseconds delay, double lose_s) : delay_(delay), lose_s_(lose_s) {}

  grpc::Status StreamingRecognize(
      grpc::ServerContext* /*context*/,
      grpc::ServerReaderWriter<asr::v1::StreamingRecognizeResponse,
                               asr::v1::StreamingRecognizeRequest>* stream) override {
    asr::v1::StreamingRecognizeRequest request;
    if (!stream->Read(&request) || !request.has_streaming_config()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "config first");
    }
    const int rate = request.streaming_config().config().sample_rate_hertz();
    int64_t samples = 0;
    asr::v1::StreamingRecognizeResponse response;
    while (stream->Read(&request)) {
      samples += static_cast<int64_t>(request.audio_content().size() / 2);
      std::this_thread::sleep_for(delay_);
      response.Clear();
      response.add_results()->set_audio_processed(Covered(samples, rate));
      stream->Write(response);
    }
    response.Clear();
    asr::v1::StreamingRecognitionResult* result = response.add_results();
    result->set_is_final(true);
    result->set_finish_reason("stop");
    result->add_alternatives()->set_transcript("fixture");
    result->set_audio_processed(Covered(samples, rate));
    stream->Write(response);
    return grpc::Status::OK;
  }

 private:
  float Covered(int64_t samples, int rate) const {
    return static_cast<float>(std::max(0.0, static_cast<double>(samples) / rate - lose_s_));
  }

  std::chrono::milliseconds delay_;
  double lose_s_;
};

class FixtureServer {
 public:
  FixtureServer(std::chrono::milliseconds delay, double lose_s) : service_(delay, lose_s) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~FixtureServer() { server_->Shutdown(std::chrono::system_clock::now()); }
  int port() const { return port_; }

 private:
  FixtureSpeech service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

server::LoadOptions FixtureLoad(int port, int concurrency, double seconds) {
  server::LoadOptions options;
  options.channels = {OwnChannel(port), OwnChannel(port)};
  options.clips = {Clip(1, seconds), Clip(2, seconds)};
  options.config = testing::Config(kRate, /*interim=*/true);
  options.concurrency = concurrency;
  options.duration_s = 0;  // One stream per slot.
  options.threads = 2;
  options.chunk_ms = 100;
  options.timeout_s = 60;
  options.keep_records = true;
  return options;
}

TEST(LoadGeneratorTest, PacesInRealTimeAndAccountsForEveryMessage) {
  FixtureServer fixture(std::chrono::milliseconds(0), 0.0);
  const double seconds = 1.55;  // 16 messages, the last one short.
  server::LoadOptions options = FixtureLoad(fixture.port(), 6, seconds);
  options.ramp_s = 0.3;
  absl::StatusOr<server::LoadReport> report = server::RunLoad(options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->streams, 6);
  EXPECT_EQ(report->failed_streams, 0) << Warnings(*report);
  EXPECT_EQ(report->codes.at("OK"), 6);
  EXPECT_EQ(report->messages, 6 * 16);
  EXPECT_NEAR(report->audio_sent_s, 6 * seconds, 1e-6);
  EXPECT_NEAR(report->audio_processed_s, 6 * seconds, 1e-3);
  // One covering response per message before the half-close (the last
  // one's may come after it).
  EXPECT_GE(report->chunk_latency.count(), 6 * 15);
  EXPECT_LE(report->chunk_latency.count(), 6 * 16);
  EXPECT_EQ(report->final_latency.count(), 6);
  EXPECT_EQ(report->send_lag.count(), 6 * 16);
  for (const server::StreamRecord& r : report->records) {
    // Paced: the last message leaves `seconds` after the start, no sooner.
    EXPECT_GE(r.end_s - r.start_s, seconds) << r.index;
    EXPECT_TRUE(r.final_result);
    EXPECT_EQ(r.finish_reason, "stop");
    EXPECT_EQ(r.transcript, "fixture");
    EXPECT_EQ(r.responses, 17);
  }
  // The ramp spreads the starts.
  EXPECT_GE(report->records.back().start_s, 0.2);
  EXPECT_GE(report->wall_s, seconds + 0.2);

  // As fast as possible: the same account, sooner.
  options.realtime = false;
  options.ramp_s = 0;
  report = server::RunLoad(options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->failed_streams, 0) << Warnings(*report);
  EXPECT_EQ(report->messages, 6 * 16);
  EXPECT_EQ(report->send_lag.count(), 0);
}

TEST(LoadGeneratorTest, ReportsASlowServerAsBehindRealTime) {
  // Every message answered 250 ms late, and the next one read only then.
  FixtureServer fixture(std::chrono::milliseconds(250), 0.0);
  server::LoadOptions options = FixtureLoad(fixture.port(), 3, 1.0);
  options.latency_bound_ms = 200;
  absl::StatusOr<server::LoadReport> report = server::RunLoad(options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->failed_streams, 0) << Warnings(*report);
  EXPECT_GE(report->chunk_latency.Percentile(0.5), 250);
  EXPECT_GE(report->final_latency.Percentile(0.5), 250);
  const std::string warnings = Warnings(*report);
  EXPECT_NE(warnings.find("the server is behind real time"), std::string::npos) << warnings;
  EXPECT_EQ(warnings.find("the load generator fell behind"), std::string::npos) << warnings;
}

TEST(LoadGeneratorTest, ReportsStreamsWhoseAudioWasNotAccountedFor) {
  FixtureServer fixture(std::chrono::milliseconds(0), 0.3);  // 300 ms lost per stream.
  server::LoadOptions options = FixtureLoad(fixture.port(), 4, 1.0);
  options.frame_s = 0.04;
  absl::StatusOr<server::LoadReport> report = server::RunLoad(options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->audio_lost_streams, 4);
  EXPECT_EQ(report->failed_streams, 4);
  EXPECT_NE(Warnings(*report).find("4 with audio not accounted for"), std::string::npos)
      << Warnings(*report);
  // Without the records, the same counts (kept as the streams end).
  options.keep_records = false;
  report = server::RunLoad(options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->records.empty());
  EXPECT_EQ(report->streams, 4);
  EXPECT_EQ(report->audio_lost_streams, 4);
  EXPECT_EQ(report->failed_streams, 4);
  EXPECT_NEAR(report->audio_sent_s, 4.0, 1e-6);
  // Within one frame is accounted for.
  options.frame_s = 0.31;
  report = server::RunLoad(options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->failed_streams, 0) << Warnings(*report);
}

// The real server with the small random model, in this process.
class LoadGeneratorServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions options = testing::SmallModelServerOptions();
    options.stream_idle_timeout_seconds = 1.5;  // Ends vanished clients quickly.
    server_ = std::make_unique<server::Server>(options);
    const absl::Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  server::LoadOptions Load(int concurrency) const {
    server::LoadOptions options;
    for (int c = 0; c < 2; ++c) options.channels.push_back(OwnChannel(server_->grpc_port()));
    options.clips = {Clip(3, 2.0), Clip(4, 1.3)};
    options.config = testing::Config(kRate, /*interim=*/true);
    options.concurrency = concurrency;
    options.duration_s = 0;
    options.threads = 2;
    options.timeout_s = 120;
    server::ModelClock clock;
    EXPECT_TRUE(server::GetModelClock(options.channels[0], "", "", &clock));
    options.frame_s = clock.frame_s;
    options.lookahead_s = clock.lookahead_s;
    options.keep_records = true;
    return options;
  }

  std::unique_ptr<server::Server> server_;
};

TEST_F(LoadGeneratorServerTest, EveryStreamsAudioIsProcessedAndItsFinalArrives) {
  server::LoadOptions options = Load(4);
  ASSERT_GT(options.frame_s, 0) << "ListModels gives the model's frame";
  ASSERT_GT(options.lookahead_s, 0) << "and its look-ahead";
  options.rates = {8000, 16000, 44100};
  absl::StatusOr<server::LoadReport> report = server::RunLoad(options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->streams, 4);
  EXPECT_EQ(report->failed_streams, 0) << Warnings(*report);
  EXPECT_EQ(report->codes.at("OK"), 4);
  EXPECT_GT(report->chunk_latency.count(), 0) << "interim results cover new audio";
  EXPECT_EQ(report->final_latency.count(), 4);
  for (const server::StreamRecord& r : report->records) {
    EXPECT_EQ(r.finish_reason, "stop");
    EXPECT_LE(r.audio_sent_s - r.audio_processed_s, options.frame_s + 1e-3) << r.index;
    EXPECT_GE(r.end_s - r.start_s, r.audio_sent_s) << "paced in real time";
  }
}

TEST_F(LoadGeneratorServerTest, CancelledStalledAndVanishedClientsEndAsTheyShould) {
  server::LoadOptions options = Load(12);
  options.cancel_fraction = 0.25;
  options.stall_fraction = 0.25;
  options.vanish_fraction = 0.25;
  options.stall_seconds = 1.0;
  options.seed = 7;
  absl::StatusOr<server::LoadReport> report = server::RunLoad(options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->streams, 12);
  EXPECT_EQ(report->failed_streams, 0) << Warnings(*report);
  for (const char* behaviour : {"normal", "cancel", "stall", "vanish"}) {
    EXPECT_GT(report->behaviours.count(behaviour), 0u) << behaviour;
  }
  // The counts, kept as the streams ended, are the records' counts.
  std::map<std::string, int64_t> codes, behaviours;
  double sent = 0, processed = 0;
  for (const server::StreamRecord& r : report->records) {
    ++codes[server::GrpcCodeName(static_cast<int>(r.code))];
    ++behaviours[server::StreamBehaviourName(r.behaviour)];
    sent += r.audio_sent_s;
    processed += r.audio_processed_s;
  }
  ASSERT_EQ(report->records.size(), 12u);
  EXPECT_EQ(report->codes, codes);
  EXPECT_EQ(report->behaviours, behaviours);
  EXPECT_NEAR(report->audio_sent_s, sent, 1e-9);
  EXPECT_NEAR(report->audio_processed_s, processed, 1e-9);
  for (const server::StreamRecord& r : report->records) {
    switch (r.behaviour) {
      case server::StreamBehaviour::kCancel:
        EXPECT_EQ(r.code, grpc::StatusCode::CANCELLED);
        break;
      case server::StreamBehaviour::kVanish:
        // The server's idle timeout ended it.
        EXPECT_NE(r.code, grpc::StatusCode::OK) << r.index;
        EXPECT_LT(r.audio_sent_s, 2.0);
        break;
      default:
        EXPECT_EQ(r.code, grpc::StatusCode::OK) << r.error;
        EXPECT_EQ(r.finish_reason, "stop");
        EXPECT_LE(r.audio_sent_s - r.audio_processed_s, options.frame_s + 1e-3);
    }
  }
}

}  // namespace
}  // namespace oasr
