#include "tests/server/recognition_helpers.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "scheduler/engine.h"
#include "scheduler/model_factory.h"

namespace oasr::testing {

std::string SmallModelDir() { return std::string(OASR_ENCODER_FIXTURES) + "/small_ln/model"; }

server::ServerOptions SmallModelServerOptions() {
  server::ServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  options.metrics_port = -1;
  options.model_dir = SmallModelDir();
  options.model_name = "small";
  options.shutdown_grace_seconds = 1;
  return options;
}

std::chrono::system_clock::time_point In(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

std::vector<int16_t> MakeAudio(uint32_t seed, double seconds, int rate) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> freq(150, 2500);
  std::normal_distribution<double> noise(0, 200);
  const double f1 = freq(rng), f2 = freq(rng);
  std::vector<int16_t> out(static_cast<size_t>(seconds * rate));
  for (size_t i = 0; i < out.size(); ++i) {
    const double t = static_cast<double>(i) / rate;
    const double env = 0.5 + 0.5 * std::sin(2 * M_PI * 0.9 * t);
    const double x =
        6000 * env * (std::sin(2 * M_PI * f1 * t) + 0.5 * std::sin(2 * M_PI * f2 * t)) + noise(rng);
    out[i] = static_cast<int16_t>(std::clamp(x, -32768.0, 32767.0));
  }
  return out;
}

std::vector<std::string> EngineFinals(const std::vector<int16_t>& audio, int rate,
                                      decoder::SearchMethod method) {
  const std::string model_dir = SmallModelDir();
  scheduler::EngineConfig config;
  scheduler::ModelOptions options;
  options.model_dir = model_dir;
  options.decoder.method = method;
  auto engine = scheduler::LoadEngine(options, config);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  scheduler::StreamRequest request;
  request.sample_rate = rate;
  request.interim_results = false;
  request.decode = config.decoder.stream;
  request.decode.nbest = 1;
  auto stream = (*engine)->OpenStream(request);
  EXPECT_TRUE(stream.ok()) << stream.status();
  if (!stream.ok()) return {};
  EXPECT_TRUE((*stream)->PushAudio(audio).ok());
  EXPECT_TRUE((*stream)->EndAudio().ok());
  std::vector<std::string> finals;
  scheduler::StreamEvent event;
  while ((*stream)->outbox().WaitPop(&event, 120)) {
    for (const auto& r : event.results) {
      if (r.is_final) finals.push_back(r.nbest.empty() ? "" : r.nbest[0].transcript);
    }
    if (event.finish.has_value()) {
      EXPECT_EQ(*event.finish, scheduler::FinishReason::kStop);
      break;
    }
  }
  return finals;
}

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

asr::v1::StreamingRecognitionConfig Config(int rate, bool interim, bool words) {
  asr::v1::StreamingRecognitionConfig config;
  config.mutable_config()->set_encoding(asr::v1::LINEAR16);
  config.mutable_config()->set_sample_rate_hertz(rate);
  config.mutable_config()->set_enable_word_time_offsets(words);
  config.set_interim_results(interim);
  return config;
}

server::StreamOutcome Stream(asr::v1::Speech::Stub& stub, const std::vector<int16_t>& audio,
                             const asr::v1::StreamingRecognitionConfig& config) {
  server::StreamClientOptions options;
  options.config = config;
  options.realtime = false;
  options.timeout_s = 120;
  return server::RunStream(stub, audio, options);
}

std::map<std::string, double> ScrapeMetrics(int port, std::string* error) {
  std::map<std::string, double> values;
  httplib::Client http("127.0.0.1", port);
  auto result = http.Get("/metrics");
  if (!result || result->status != 200) {
    *error = "no answer from /metrics";
    return values;
  }
  static const std::regex kSample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})?) (\S+)$)");
  static const std::regex kComment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$)");
  std::istringstream lines(result->body);
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_match(line, kComment)) continue;
    if (!std::regex_match(line, m, kSample)) {
      *error = "not Prometheus text: '" + line + "'";
      return values;
    }
    values[m[1]] = m[5] == "+Inf" ? INFINITY : std::stod(m[5]);
  }
  return values;
}

bool WaitForIdle(int metrics_port, std::map<std::string, double>* last) {
  for (int i = 0; i < 500; ++i) {
    std::string error;
    *last = ScrapeMetrics(metrics_port, &error);
    if (error.empty() && (*last)["oasr_grpc_streams_open"] == 0 &&
        (*last)["oasr_streams_active"] == 0 && (*last)["oasr_streams_waiting"] == 0 &&
        (*last)["oasr_kv_pool_blocks_used"] == 0 && (*last)["oasr_stream_slots_used"] == 0 &&
        (*last)["oasr_decoder_states_in_use"] == 0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace oasr::testing
