// oasr-client: calls an oasr-server.
//   oasr-client info    [--server HOST:PORT]   prints GetServerInfo as JSON
//   oasr-client health  [--server HOST:PORT] [--service NAME]
//   oasr-client models                         prints ListModels as JSON
//   oasr-client stream  FILE...                streams WAV/raw files, prints partials and finals
//   oasr-client mic [--wav FILE]                streams the microphone live (Ctrl-C ends)
//   oasr-client recognize FILE                 one Recognize call, prints the result as JSON
//   oasr-client load FILE... --concurrency N --duration S   paced load with accounting
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "oasr/asr/v1/asr.grpc.pb.h"
#include "server/audio_capture.h"
#include "server/audio_codec.h"
#include "server/client_channel.h"
#include "server/grpc_status.h"
#include "server/load_generator.h"
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

// What `load` takes besides the recognition flags: most of it straight into
// the generator's options.
struct LoadFlags {
  oasr::server::LoadOptions options;
  int threads = 0;   // 0: one per core, at most 8.
  int channels = 0;  // 0: oasr::server::DefaultLoadChannels.
  std::string report_json;
  std::string records_json;
};

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

// Concurrent paced streams of `files` (oasr::server::RunLoad); exit 0 when
// every stream ended as its behaviour should and nothing limited the run.
int RunLoadTest(const oasr::server::ChannelOptions& channel_options,
                const std::vector<std::string>& files, const RecognitionFlags& flags,
                const LoadFlags& load, double timeout) {
  oasr::server::LoadOptions options = load.options;
  for (const std::string& file : files) {
    oasr::server::LoadClip clip;
    clip.name = file;
    if (!LoadAudio(file, flags.raw_rate, &clip.samples, &clip.rate)) return 1;
    options.clips.push_back(std::move(clip));
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options.threads = load.threads > 0 ? load.threads : std::min(8, cores);
  const int channels =
      load.channels > 0 ? load.channels
                        : oasr::server::DefaultLoadChannels(options.threads, options.concurrency);
  for (int c = 0; c < channels; ++c) {
    oasr::server::ChannelOptions own = channel_options;
    own.own_connection = true;
    absl::StatusOr<std::shared_ptr<grpc::Channel>> made = oasr::server::MakeChannel(own);
    if (!made.ok()) {
      std::fprintf(stderr, "oasr-client: %s\n", std::string(made.status().message()).c_str());
      return 2;
    }
    options.channels.push_back(*made);
  }
  options.config = MakeConfig(flags, 16000);
  options.token = g_token;
  options.chunk_ms = flags.chunk_ms;
  options.realtime = !flags.fast;
  options.timeout_s = timeout;
  options.keep_records = !load.records_json.empty();  // Otherwise only the counts.
  oasr::server::ModelClock clock;
  if (oasr::server::GetModelClock(options.channels.front(), flags.model, g_token, &clock)) {
    options.frame_s = clock.frame_s;
    options.lookahead_s = clock.lookahead_s;
  }
  absl::StatusOr<oasr::server::LoadReport> report = oasr::server::RunLoad(options);
  if (!report.ok()) {
    std::fprintf(stderr, "oasr-client: load: %s\n", std::string(report.status().message()).c_str());
    return 2;
  }
  std::fputs(report->Summary(options).c_str(), stdout);
  if (!load.report_json.empty() && !WriteFile(load.report_json, report->ToJson() + "\n")) {
    std::fprintf(stderr, "oasr-client: cannot write %s\n", load.report_json.c_str());
    return 1;
  }
  if (!load.records_json.empty() &&
      !WriteFile(load.records_json, oasr::server::RecordsToJsonLines(report->records))) {
    std::fprintf(stderr, "oasr-client: cannot write %s\n", load.records_json.c_str());
    return 1;
  }
  return report->warnings.empty() ? 0 : 1;
}

// What `mic` takes besides the recognition flags.
struct MicFlags {
  int device = -1;  // -1: the default input device.
  int rate = 16000;
  double seconds = 0;  // 0: until Ctrl-C.
  std::string wav;     // Play this file as the microphone instead.
  bool list = false;
};

std::atomic<bool> g_interrupted{false};

// The first Ctrl-C ends the stream (its final still comes); a second one
// kills as usual.
void OnInterrupt(int signal) {
  g_interrupted.store(true);
  std::signal(signal, SIG_DFL);
}

// Streams live audio (the microphone, or --wav in real time) until Ctrl-C,
// --seconds or the file's end, then half-closes and prints the last final.
// Partials are rewritten in place on a terminal and printed as lines
// ("[partial] ...") otherwise; finals always get their own line.
int RunMic(const std::shared_ptr<grpc::Channel>& channel, const RecognitionFlags& flags,
           const MicFlags& mic, double timeout) {
  if (mic.list) {
    absl::StatusOr<std::string> devices = oasr::server::ListCaptureDevices();
    if (!devices.ok()) {
      std::fprintf(stderr, "oasr-client: %s\n", std::string(devices.status().message()).c_str());
      return 1;
    }
    std::fputs(devices->empty() ? "no input devices\n" : devices->c_str(), stdout);
    return 0;
  }
  std::unique_ptr<oasr::server::AudioCapture> capture;
  if (!mic.wav.empty()) {
    std::vector<int16_t> samples;
    int rate = 0;
    if (!LoadAudio(mic.wav, flags.raw_rate, &samples, &rate)) return 1;
    capture = oasr::server::MakeReplayCapture(mic.wav, std::move(samples), rate);
  } else {
    absl::StatusOr<std::unique_ptr<oasr::server::AudioCapture>> opened =
        oasr::server::OpenDeviceCapture(mic.device, mic.rate);
    if (!opened.ok()) {
      std::fprintf(stderr, "oasr-client: mic: %s\n",
                   std::string(opened.status().message()).c_str());
      return 1;
    }
    capture = std::move(*opened);
  }

  std::mutex mu;
  std::condition_variable cv;
  std::vector<int16_t> queued;
  const bool tty = isatty(fileno(stdout)) != 0;
  auto stub = oasr::asr::v1::Speech::NewStub(channel);
  auto context = ContextWithDeadline(timeout);
  auto call = stub->StreamingRecognize(context.get());
  oasr::asr::v1::StreamingRecognizeRequest request;
  *request.mutable_streaming_config() = MakeConfig(flags, capture->rate());
  if (!call->Write(request)) return ReportRpcError("StreamingRecognize", call->Finish());

  std::thread reader([&] {
    oasr::asr::v1::StreamingRecognizeResponse response;
    while (call->Read(&response)) {
      for (const auto& result : response.results()) {
        const std::string text =
            result.alternatives_size() > 0 ? result.alternatives(0).transcript() : "";
        if (result.is_final()) {
          if (!text.empty()) std::printf(tty ? "\r\033[K%s\n" : "[final] %s\n", text.c_str());
        } else if (tty) {
          std::printf("\r\033[K%s", text.c_str());
        } else {
          std::printf("[partial] %s\n", text.c_str());
        }
      }
      std::fflush(stdout);
    }
  });

  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
  absl::Status started = capture->Start([&](const int16_t* samples, size_t count) {
    std::lock_guard<std::mutex> lock(mu);
    queued.insert(queued.end(), samples, samples + count);
    cv.notify_one();
  });
  if (!started.ok()) {
    std::fprintf(stderr, "oasr-client: mic: %s\n", std::string(started.message()).c_str());
    context->TryCancel();
    reader.join();
    call->Finish();
    return 1;
  }
  std::fprintf(stderr, "listening to %s at %d Hz (Ctrl-C ends)\n", capture->name().c_str(),
               capture->rate());
  const size_t step =
      std::max<size_t>(1, static_cast<size_t>(capture->rate()) * flags.chunk_ms / 1000);
  const auto start = std::chrono::steady_clock::now();
  std::vector<int16_t> message;
  bool open = true;
  while (open) {
    bool last = false;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(20), [&] { return queued.size() >= step; });
      const bool timed_out = mic.seconds > 0 && std::chrono::steady_clock::now() - start >=
                                                    std::chrono::duration<double>(mic.seconds);
      last = g_interrupted.load() || timed_out || capture->ended();
      if (queued.size() < step && !last) continue;
      message.swap(queued);
      queued.clear();
    }
    if (last) capture->Stop();  // Then take what it delivered before stopping.
    if (last) {
      std::lock_guard<std::mutex> lock(mu);
      message.insert(message.end(), queued.begin(), queued.end());
      queued.clear();
    }
    if (!message.empty()) {
      request.Clear();
      request.set_audio_content(reinterpret_cast<const char*>(message.data()), message.size() * 2);
      open = call->Write(request);
    }
    if (last) break;
  }
  capture->Stop();  // Before mu, cv and queued go: its sink uses them.
  call->WritesDone();
  reader.join();
  if (tty) std::printf("\n");
  grpc::Status status = call->Finish();
  if (!status.ok()) return ReportRpcError("StreamingRecognize", status);
  return 0;
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
  LoadFlags load_flags;
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
  MicFlags mic_flags;
  CLI::App* mic = app.add_subcommand(
      "mic", "Stream the microphone live: partials in place, finals on their own lines");
  mic->add_option("--device", mic_flags.device, "Input device index (--list-devices)");
  mic->add_option("--capture-rate", mic_flags.rate, "Capture rate in Hz")->capture_default_str();
  mic->add_option("--seconds", mic_flags.seconds, "Stop after this long (0: at Ctrl-C)");
  mic->add_option("--wav", mic_flags.wav,
                  "Play this WAV or raw file in real time as if it were the microphone");
  mic->add_flag("--list-devices", mic_flags.list, "List the input devices and exit");
  add_recognition_flags(mic, true);
  CLI::App* load = app.add_subcommand(
      "load",
      "Load test: N concurrent real-time streams paced from a fixed clock, with per-stream "
      "accounting (chunk and final latency, statuses, audio processed against sent); exit 0 "
      "when the run held");
  load->add_option("files", files, "WAV or raw 16-bit PCM files (stream i sends file i % n)")
      ->required();
  LoadFlags& l = load_flags;
  oasr::server::LoadOptions& o = load_flags.options;
  load->add_option("--concurrency", o.concurrency, "Streams open at once")->capture_default_str();
  load->add_option("--duration", o.duration_s,
                   "Seconds to keep starting streams (0: one stream per slot)")
      ->capture_default_str();
  load->add_option("--max-streams", o.max_streams, "At most this many streams (0: no limit)");
  load->add_option("--ramp", o.ramp_s, "Seconds over which the first streams start");
  load->add_option("--threads", l.threads,
                   "Completion-queue threads (default: one per core, at most 8)");
  load->add_option("--channels", l.channels,
                   "Connections the streams are spread over (default: one per 40 streams, at "
                   "least one per thread)");
  load->add_option("--rates", o.rates,
                   "Sample rates streams pick from at random, e.g. 8000,16000,44100 (the files "
                   "are resampled; default: each file's own)")
      ->delimiter(',');
  load->add_option("--min-seconds", o.min_seconds, "Shortest stream (file repeated or cut)");
  load->add_option("--max-seconds", o.max_seconds, "Longest stream (0: each file's length)");
  load->add_option("--cancel-fraction", o.cancel_fraction,
                   "Fraction of streams cancelled at a random point");
  load->add_option("--stall-fraction", o.stall_fraction,
                   "Fraction of clients that stop reading for --stall-seconds");
  load->add_option("--stall-seconds", o.stall_seconds, "How long a stalled client stops reading")
      ->capture_default_str();
  load->add_option("--vanish-fraction", o.vanish_fraction,
                   "Fraction of clients that go silent without closing (the server must end them)");
  load->add_option("--seed", o.seed, "Seed of the random choices")->capture_default_str();
  load->add_option("--latency-bound-ms", o.latency_bound_ms,
                   "Chunk latency p99 above this fails the run")
      ->capture_default_str();
  load->add_option("--report-json", l.report_json, "Write the figures as JSON to this file");
  load->add_option("--records-json", l.records_json,
                   "Write every stream's account as one JSON line each to this file");
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
  if (*mic) return RunMic(channel, flags, mic_flags, stream_timeout);
  if (*recognize) return RunRecognize(channel, files.front(), flags, stream_timeout);
  return RunLoadTest(channel_options, files, flags, load_flags, stream_timeout);
}
