// oasr-client: calls an oasr-server.
//   oasr-client info    [--server HOST:PORT]   prints GetServerInfo as JSON
//   oasr-client health  [--server HOST:PORT] [--service NAME]
//   oasr-client models                         prints ListModels as JSON
//   oasr-client stream  FILE...                streams WAV/raw files, prints partials and finals
//   oasr-client recognize FILE                 one Recognize call, prints the result as JSON
//   oasr-client load FILE --concurrency N --duration S   a ghz-style load test
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "oasr/asr/v1/asr.grpc.pb.h"
#include "server/audio_codec.h"
#include "server/client_channel.h"
#include "server/grpc_status.h"
#include "server/stream_client.h"

namespace {

// --token (or OASR_TOKEN), sent with every call; set once in main.
std::string g_token;

std::unique_ptr<grpc::ClientContext> ContextWithDeadline(double seconds) {
  auto context = std::make_unique<grpc::ClientContext>();
  oasr::server::AddBearerToken(g_token, context.get());
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  return context;
}

int ReportRpcError(const char* what, const grpc::Status& status) {
  std::fprintf(stderr, "oasr-client: %s failed: %s (code %d)\n", what,
               status.error_message().c_str(), static_cast<int>(status.error_code()));
  return 1;
}

std::string ToJson(const google::protobuf::Message& message, bool pretty = true) {
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = pretty;
  print.always_print_primitive_fields = true;
  print.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, print);
  if (!pretty) json += "\n";
  return json;
}

int RunInfo(const std::shared_ptr<grpc::Channel>& channel, double timeout) {
  auto stub = oasr::asr::v1::Speech::NewStub(channel);
  oasr::asr::v1::ServerInfo info;
  auto context = ContextWithDeadline(timeout);
  grpc::Status status = stub->GetServerInfo(context.get(), {}, &info);
  if (!status.ok()) return ReportRpcError("GetServerInfo", status);
  std::fputs(ToJson(info).c_str(), stdout);
  return 0;
}

int RunModels(const std::shared_ptr<grpc::Channel>& channel, double timeout) {
  auto stub = oasr::asr::v1::Speech::NewStub(channel);
  oasr::asr::v1::ListModelsResponse models;
  auto context = ContextWithDeadline(timeout);
  grpc::Status status = stub->ListModels(context.get(), {}, &models);
  if (!status.ok()) return ReportRpcError("ListModels", status);
  std::fputs(ToJson(models).c_str(), stdout);
  return 0;
}

// Audio from a file: a WAV file (rate from its header) or raw 16-bit PCM at
// `raw_rate`. Returns false with a message on stderr.
bool LoadAudio(const std::string& path, int raw_rate, std::vector<int16_t>* samples, int* rate) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "oasr-client: cannot read %s\n", path.c_str());
    return false;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  samples->clear();
  oasr::server::SampleEncoding encoding = oasr::server::SampleEncoding::kLinear16;
  std::string_view data = bytes;
  *rate = raw_rate;
  if (oasr::server::LooksLikeWav(bytes)) {
    absl::StatusOr<oasr::server::WavAudio> wav = oasr::server::ParseWav(bytes);
    if (!wav.ok() || wav->channels != 1) {
      std::fprintf(stderr, "oasr-client: %s: %s\n", path.c_str(),
                   wav.ok() ? "only mono WAV files are supported"
                            : std::string(wav.status().message()).c_str());
      return false;
    }
    *rate = wav->sample_rate;
    encoding = wav->encoding;
    data = wav->data;
  }
  absl::Status decoded = oasr::server::DecodeSamples(encoding, data, samples, "file");
  if (!decoded.ok()) {
    std::fprintf(stderr, "oasr-client: %s: %s\n", path.c_str(),
                 std::string(decoded.message()).c_str());
    return false;
  }
  return true;
}

// What stream, recognize and load send.
struct RecognitionFlags {
  int raw_rate = 16000;
  int chunk_ms = 100;
  bool fast = false;
  bool interim = true;
  bool single_utterance = false;
  bool words = false;
  int max_alternatives = 1;
  std::string model;
  std::vector<std::string> phrases;
  float boost = 0.0f;
  bool json = false;
};

oasr::asr::v1::StreamingRecognitionConfig MakeConfig(const RecognitionFlags& flags, int rate) {
  oasr::asr::v1::StreamingRecognitionConfig config;
  oasr::asr::v1::RecognitionConfig* c = config.mutable_config();
  c->set_encoding(oasr::asr::v1::LINEAR16);
  c->set_sample_rate_hertz(rate);
  c->set_model(flags.model);
  c->set_max_alternatives(flags.max_alternatives);
  c->set_enable_word_time_offsets(flags.words);
  if (!flags.phrases.empty()) {
    oasr::asr::v1::SpeechContext* context = c->add_speech_contexts();
    for (const std::string& p : flags.phrases) context->add_phrases(p);
    context->set_boost(flags.boost);
  }
  config.set_interim_results(flags.interim);
  config.set_single_utterance(flags.single_utterance);
  return config;
}

int RunStreamFiles(const std::shared_ptr<grpc::Channel>& channel,
                   const std::vector<std::string>& files, const RecognitionFlags& flags,
                   double timeout) {
  auto stub = oasr::asr::v1::Speech::NewStub(channel);
  int failures = 0;
  for (const std::string& file : files) {
    std::vector<int16_t> samples;
    int rate = 0;
    if (!LoadAudio(file, flags.raw_rate, &samples, &rate)) {
      ++failures;
      continue;
    }
    oasr::server::StreamClientOptions options;
    options.config = MakeConfig(flags, rate);
    options.chunk_ms = flags.chunk_ms;
    options.realtime = !flags.fast;
    options.timeout_s = timeout;
    options.token = g_token;
    options.on_response = [&](const oasr::asr::v1::StreamingRecognizeResponse& response) {
      if (flags.json) {
        std::fputs(ToJson(response, /*pretty=*/false).c_str(), stdout);
        std::fflush(stdout);
        return;
      }
      for (const auto& result : response.results()) {
        const std::string text =
            result.alternatives_size() > 0 ? result.alternatives(0).transcript() : "";
        if (result.is_final()) {
          std::printf("[final %.2fs] %s%s\n", result.audio_processed(), text.c_str(),
                      result.finish_reason().empty()
                          ? ""
                          : (" (finish_reason: " + result.finish_reason() + ")").c_str());
        } else {
          std::printf("[partial %.2fs] %s\n", result.audio_processed(), text.c_str());
        }
      }
      std::fflush(stdout);
    };
    oasr::server::StreamOutcome outcome = RunStream(*stub, samples, options);
    if (!outcome.status.ok()) {
      ReportRpcError(("StreamingRecognize " + file).c_str(), outcome.status);
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}

int RunRecognize(const std::shared_ptr<grpc::Channel>& channel, const std::string& file,
                 const RecognitionFlags& flags, double timeout) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "oasr-client: cannot read %s\n", file.c_str());
    return 1;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  oasr::asr::v1::RecognizeRequest request;
  *request.mutable_config() = MakeConfig(flags, flags.raw_rate).config();
  if (oasr::server::LooksLikeWav(buffer.str()))
    request.mutable_config()->set_encoding(oasr::asr::v1::WAV);
  request.set_audio(buffer.str());
  auto stub = oasr::asr::v1::Speech::NewStub(channel);
  oasr::asr::v1::RecognizeResponse response;
  auto context = ContextWithDeadline(timeout);
  grpc::Status status = stub->Recognize(context.get(), request, &response);
  if (!status.ok()) return ReportRpcError("Recognize", status);
  std::fputs(ToJson(response).c_str(), stdout);
  return 0;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(p * values.size()));
  return values[index];
}

// ghz-style: `concurrency` workers stream `file` back to back for `duration`
// seconds, then the figures of every stream that completed.
int RunLoad(const std::shared_ptr<grpc::Channel>& channel, const std::string& file,
            const RecognitionFlags& flags, int concurrency, double duration, double timeout) {
  std::vector<int16_t> samples;
  int rate = 0;
  if (!LoadAudio(file, flags.raw_rate, &samples, &rate)) return 1;
  auto stub = oasr::asr::v1::Speech::NewStub(channel);
  std::mutex mu;
  std::vector<double> chunk_latencies, final_latencies;
  std::map<std::string, int> errors;
  int streams = 0;
  double audio_s = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::milliseconds(static_cast<int64_t>(duration * 1000));
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&, w] {
      // Stagger the starts across one message so the chunks do not align.
      std::this_thread::sleep_for(std::chrono::milliseconds(w * flags.chunk_ms / concurrency));
      while (std::chrono::steady_clock::now() < end) {
        oasr::server::StreamClientOptions options;
        options.config = MakeConfig(flags, rate);
        options.chunk_ms = flags.chunk_ms;
        options.realtime = !flags.fast;
        options.timeout_s = timeout;
        options.token = g_token;
        oasr::server::StreamOutcome outcome = RunStream(*stub, samples, options);
        std::lock_guard<std::mutex> lock(mu);
        ++streams;
        if (!outcome.status.ok()) {
          ++errors[oasr::server::GrpcCodeName(static_cast<int>(outcome.status.error_code()))];
          continue;
        }
        audio_s += static_cast<double>(samples.size()) / rate;
        chunk_latencies.insert(chunk_latencies.end(), outcome.chunk_latency_ms.begin(),
                               outcome.chunk_latency_ms.end());
        if (outcome.final_latency_ms >= 0) final_latencies.push_back(outcome.final_latency_ms);
      }
    });
  }
  for (std::thread& t : workers) t.join();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int error_count = 0;
  for (const auto& [code, n] : errors) error_count += n;
  std::printf("load: %d concurrent %s streams of %.2f s audio, %.1f s wall\n", concurrency,
              flags.fast ? "as-fast-as-possible" : "real-time",
              static_cast<double>(samples.size()) / rate, wall);
  std::printf("  streams        %d (%d ok, %d errors)\n", streams, streams - error_count,
              error_count);
  std::printf("  audio          %.1f s decoded (%.2fx real time over the run)\n", audio_s,
              audio_s / wall);
  std::printf("  chunk latency  p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  (%zu samples)\n",
              Percentile(chunk_latencies, 0.50), Percentile(chunk_latencies, 0.95),
              Percentile(chunk_latencies, 0.99), chunk_latencies.size());
  std::printf("  final latency  p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  (after end of audio)\n",
              Percentile(final_latencies, 0.50), Percentile(final_latencies, 0.95),
              Percentile(final_latencies, 0.99));
  for (const auto& [code, n] : errors) std::printf("  error          %s x%d\n", code.c_str(), n);
  return error_count == 0 ? 0 : 1;
}

int RunHealth(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
              double timeout) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  auto context = ContextWithDeadline(timeout);
  grpc::Status status = stub->Check(context.get(), request, &response);
  if (!status.ok()) return ReportRpcError("Health.Check", status);
  std::printf("%s\n",
              grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()).c_str());
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"oasr-client: talk to an oasr-server"};
  std::string server = "127.0.0.1:50051";
  double timeout = 10.0;
  double stream_timeout = 600.0;
  app.add_option("--server", server, "Server address HOST:PORT")->capture_default_str();
  oasr::server::ChannelOptions channel_options;
  app.add_flag("--tls", channel_options.tls, "Connect with TLS (implied by the --tls-* options)");
  app.add_option("--tls-ca", channel_options.ca_file,
                 "PEM CA bundle the server's certificate must chain to (default: the system's)");
  app.add_option("--tls-cert", channel_options.cert_file,
                 "PEM client certificate chain for mutual TLS (with --tls-key)");
  app.add_option("--tls-key", channel_options.key_file, "PEM private key of --tls-cert");
  app.add_option("--tls-server-name", channel_options.server_name,
                 "Name to check the server's certificate against (default: the --server host)");
  app.add_option("--token", g_token,
                 "Bearer token sent as 'authorization: Bearer TOKEN' (or OASR_TOKEN, which keeps "
                 "it out of the process list)")
      ->envname("OASR_TOKEN");
  app.add_option("--timeout", timeout, "Deadline of unary calls in seconds")->capture_default_str();
  app.add_option("--stream-timeout", stream_timeout, "Deadline of each stream in seconds")
      ->capture_default_str();
  app.require_subcommand(1);
  CLI::App* info = app.add_subcommand("info", "Print the server's version and build as JSON");
  CLI::App* health = app.add_subcommand("health", "Check grpc.health.v1 (exit 0 when SERVING)");
  std::string service;
  health->add_option("--service", service, "Service name; empty for the whole server");
  CLI::App* models = app.add_subcommand("models", "Print the served models as JSON");

  RecognitionFlags flags;
  std::vector<std::string> files;
  int concurrency = 1;
  double duration = 10.0;
  auto add_recognition_flags = [&](CLI::App* sub, bool streaming) {
    sub->add_option("--rate", flags.raw_rate, "Sample rate of raw PCM files (WAV: from the header)")
        ->capture_default_str();
    sub->add_option("--model", flags.model, "Model name (ListModels)");
    sub->add_option("--max-alternatives", flags.max_alternatives, "Alternatives per result")
        ->capture_default_str();
    sub->add_flag("--words", flags.words, "Ask for word time offsets");
    sub->add_option("--phrase", flags.phrases, "A phrase to boost (repeatable)");
    sub->add_option("--boost", flags.boost, "Boost of the phrases (0: server default)");
    if (!streaming) return;
    sub->add_option("--chunk-ms", flags.chunk_ms, "Audio per message in ms")->capture_default_str();
    sub->add_flag("--fast", flags.fast, "Send as fast as possible instead of in real time");
    sub->add_flag("!--no-interim", flags.interim, "Ask for final results only");
    sub->add_flag("--single-utterance", flags.single_utterance, "Stop at the first endpoint");
  };
  CLI::App* stream = app.add_subcommand("stream", "Stream WAV or raw PCM files; print results");
  stream->add_option("files", files, "WAV or raw 16-bit PCM files")->required();
  stream->add_flag("--json", flags.json, "Print each response as one JSON line");
  add_recognition_flags(stream, true);
  CLI::App* recognize = app.add_subcommand("recognize", "Recognize one file (unary Recognize)");
  recognize->add_option("files", files, "A WAV or raw 16-bit PCM file")->required();
  add_recognition_flags(recognize, false);
  CLI::App* load = app.add_subcommand(
      "load", "Load test: N concurrent streams of FILE for S seconds; latency percentiles");
  load->add_option("files", files, "A WAV or raw 16-bit PCM file")->required();
  load->add_option("--concurrency", concurrency, "Concurrent streams")->capture_default_str();
  load->add_option("--duration", duration, "Seconds to keep starting streams")
      ->capture_default_str();
  add_recognition_flags(load, true);
  CLI11_PARSE(app, argc, argv);

  channel_options.target = server;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> made = oasr::server::MakeChannel(channel_options);
  if (!made.ok()) {
    std::fprintf(stderr, "oasr-client: %s\n", std::string(made.status().message()).c_str());
    return 2;
  }
  const std::shared_ptr<grpc::Channel>& channel = *made;
  if (*info) return RunInfo(channel, timeout);
  if (*health) return RunHealth(channel, service, timeout);
  if (*models) return RunModels(channel, timeout);
  if (*stream) return RunStreamFiles(channel, files, flags, stream_timeout);
  if (*recognize) return RunRecognize(channel, files.front(), flags, stream_timeout);
  return RunLoad(channel, files.front(), flags, concurrency, duration, stream_timeout);
}
