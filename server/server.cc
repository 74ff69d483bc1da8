#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/device.h"
#include "common/status.h"
#include "common/version.h"
#include "grpc/health/v1/health.pb.h"
#include "nlohmann/json.hpp"
#include "server/streaming_call.h"
#include "spdlog/spdlog.h"

namespace oasr::server {
namespace {

constexpr const char kSpeechServiceName[] = "oasr.asr.v1.Speech";
// The same engine behind the Riva and Google Cloud Speech APIs.
constexpr const char kRivaServiceName[] = "nvidia.riva.asr.RivaSpeechRecognition";
constexpr const char kGoogleServiceName[] = "google.cloud.speech.v1.Speech";
// After the grace period the engine cancels what is left; the calls get at
// most this long to deliver those endings (milliseconds, usually) before
// gRPC cuts them. Waited only while such calls are still open.
constexpr std::chrono::milliseconds kMaxFinalDelivery{1000};

void SetHealth(grpc::Server* server, bool serving) {
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  for (const char* service : {kSpeechServiceName, kRivaServiceName, kGoogleServiceName}) {
    health->SetServingStatus(service, serving);
  }
  health->SetServingStatus(serving);
}

const std::string& MetricsAddress(const ServerOptions& options) {
  return options.metrics_address.empty() ? options.address : options.metrics_address;
}

}  // namespace

Server::Server(ServerOptions options) : options_(std::move(options)) {}

Server::~Server() { Shutdown(); }

absl::Status Server::Start() {
  if (absl::Status status = options_.Validate(); !status.ok()) return status;
  device_ = options_.device == "auto" ? DefaultDevice().ToString() : options_.device;
  context_.max_pending_responses = options_.max_pending_responses;
  context_.stream_idle_timeout = std::chrono::milliseconds(
      static_cast<int64_t>(std::ceil(options_.stream_idle_timeout_seconds * 1000)));
  if (absl::Status status = SetUpSecurity(); !status.ok()) return status;
  context_.max_stream_duration_seconds = options_.max_stream_duration_seconds;
  dispatcher_ = std::make_unique<EventDispatcher>(
      options_.event_threads > 0 ? options_.event_threads : EventDispatcher::DefaultThreads(),
      [metrics = &context_.metrics](int64_t wait, int64_t run) {
        metrics->stage(Stage::kDispatchWait).Add(wait);
        metrics->stage(Stage::kDispatchRun).Add(run);
      });
  context_.dispatcher = dispatcher_.get();
  speech_service_ = std::make_unique<SpeechService>(device_, &context_);
  riva_service_ = std::make_unique<RivaService>(&context_);
  google_service_ = std::make_unique<GoogleSpeechService>(&context_);

  // gRPC locks absl::Mutexes on every operation; Debian's Abseil checks each
  // acquisition against a lock graph (deadlock detection, a debugging aid
  // that showed in the per-message profile). Production runs without it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  grpc::EnableDefaultHealthCheckService(true);
  // The built-in health service does not register grpc.health.v1's
  // descriptors; linking the generated ones puts them in the pool reflection
  // describes services from (grpcurl describes and calls Health through it).
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default, which would let a second server bind a
  // port already in use and silently split its traffic; refuse instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, options_.keepalive_time_seconds * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             options_.keepalive_timeout_seconds * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             options_.min_client_ping_seconds * 1000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  const std::string target = absl::StrCat(options_.address, ":", options_.port);
  builder.AddListeningPort(
      target, tls_ != nullptr ? tls_->ServerCredentials() : grpc::InsecureServerCredentials(),
      &grpc_port_);
  builder.RegisterService(speech_service_.get());
  builder.RegisterService(riva_service_.get());
  builder.RegisterService(google_service_.get());
  call_queues_ = std::make_unique<CallQueues>(
      &builder, options_.grpc_threads > 0 ? options_.grpc_threads : CallQueues::DefaultThreads());
  grpc_server_ = builder.BuildAndStart();
  if (grpc_server_ == nullptr || grpc_port_ == 0) {
    grpc_server_.reset();
    call_queues_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot serve gRPC on ", target, " (address in use or not permitted)"));
  }
  // Each queue waits for the next StreamingRecognize call of every API.
  call_queues_->Start([this](grpc::ServerCompletionQueue* queue) {
    StreamingCall<NativeStreamingApi, SpeechService>::Accept(speech_service_.get(), queue,
                                                             call_queues_.get(), &context_);
    StreamingCall<RivaStreamingApi, RivaService>::Accept(riva_service_.get(), queue,
                                                         call_queues_.get(), &context_);
    StreamingCall<GoogleStreamingApi, GoogleSpeechService>::Accept(google_service_.get(), queue,
                                                                   call_queues_.get(), &context_);
  });
  // NOT_SERVING until the model is ready.
  SetHealth(grpc_server_.get(), false);

  if (options_.metrics_port >= 0) {
    metrics_ = std::make_unique<MetricsHttpServer>([this] { return RenderMetrics(); });
    absl::StatusOr<int> bound = metrics_->Start(MetricsAddress(options_), options_.metrics_port);
    if (!bound.ok()) {
      StopGrpc(std::chrono::system_clock::now());
      grpc_server_.reset();
      return bound.status();
    }
    metrics_port_ = *bound;
  }

  if (!options_.model_dir.empty()) {
    if (absl::Status status = LoadModel(); !status.ok()) {
      StopGrpc(std::chrono::system_clock::now());
      grpc_server_.reset();
      if (metrics_) metrics_->Stop();
      return status;
    }
  }
  // Without a model nothing can be recognised: health stays NOT_SERVING so
  // probes and load balancers do not send streams here.
  if (model_ != nullptr) SetHealth(grpc_server_.get(), true);
  serving_ = model_ != nullptr;
  LogServing();
  return WritePortFile();
}

absl::Status Server::SetUpSecurity() {
  if (!options_.tls_cert.empty()) {
    absl::StatusOr<std::unique_ptr<ReloadableTlsCredentials>> tls =
        ReloadableTlsCredentials::Create(
            {options_.tls_cert, options_.tls_key, options_.tls_client_ca});
    if (!tls.ok()) return tls.status();
    tls_ = std::move(*tls);
  }
  AdmissionLimits limits;
  limits.max_streams_per_token = options_.max_streams_per_token;
  limits.max_streams_per_peer = options_.max_streams_per_peer;
  limits.stream_open_rate = options_.stream_open_rate;
  limits.stream_open_burst = options_.stream_open_burst;
  admission_ = std::make_unique<CallAdmission>(limits, &context_.metrics);
  if (!options_.tokens_file.empty()) {
    absl::StatusOr<TokenTable> tokens = TokenTable::Load(options_.tokens_file);
    if (!tokens.ok()) return tokens.status();
    spdlog::info("tokens: recognition and info calls need one of the {} in {}{}", tokens->size(),
                 options_.tokens_file,
                 tls_ == nullptr ? " (without --tls-cert they travel in clear text)" : "");
    admission_->SetTokens(std::make_shared<const TokenTable>(std::move(*tokens)));
  }
  context_.admission = admission_.get();
  return absl::OkStatus();
}

absl::Status Server::Reload() {
  absl::Status result;
  if (tls_ != nullptr) {
    if (absl::Status status = tls_->Reload(); status.ok()) {
      spdlog::info("TLS: new connections get {}", tls_->Describe());
    } else {
      result = status;
    }
  }
  if (!options_.tokens_file.empty()) {
    absl::StatusOr<TokenTable> tokens = TokenTable::Load(options_.tokens_file);
    if (tokens.ok()) {
      spdlog::info("tokens: {} accepted from {}", tokens->size(), options_.tokens_file);
      admission_->SetTokens(std::make_shared<const TokenTable>(std::move(*tokens)));
    } else if (result.ok()) {
      result = tokens.status();
    } else {
      result = absl::Status(result.code(),
                            absl::StrCat(result.message(), "; ", tokens.status().message()));
    }
  }
  if (tls_ == nullptr && options_.tokens_file.empty()) {
    spdlog::info("nothing to reload (no --tls-cert, no --tokens-file)");
  }
  return result;
}

absl::Status Server::LoadModel() {
  const auto start = std::chrono::steady_clock::now();
  ServedModelOptions model_options;
  model_options.model.model_dir = options_.model_dir;
  OASR_ASSIGN_OR_RETURN(model_options.model.device, ParseDevice(device_));
  if (!options_.dtype.empty()) {
    OASR_ASSIGN_OR_RETURN(model_options.model.dtype, scheduler::ParseComputeDType(options_.dtype));
  }
  OASR_ASSIGN_OR_RETURN(model_options.model.kv_fp8, scheduler::ParseKvDType(options_.kv_dtype));
  model_options.model.cpu_threads = options_.num_threads;
  model_options.model.use_lm = options_.use_lm;
  model_options.model.decoder.method = options_.search == "greedy"
                                           ? decoder::SearchMethod::kGreedy
                                           : decoder::SearchMethod::kPrefixBeam;
  model_options.model.decoder.search.beam_size = options_.beam_size;
  model_options.model.decoder.search.first_beam_size = options_.beam_size;
  model_options.model.decoder.search.blank_skip_threshold = options_.blank_skip;
  model_options.model.decoder.search.token_beam = options_.token_beam;
  model_options.model.lm_weight = static_cast<float>(options_.lm_weight);
  if (options_.min_word_confidence >= 0.0) {
    model_options.model.min_word_confidence = static_cast<float>(options_.min_word_confidence);
  }
  model_options.name = options_.model_name;
  model_options.language_code = options_.language_code;
  model_options.engine.max_batch_size = options_.max_active_streams;
  model_options.engine.max_waiting = options_.max_waiting_streams;
  model_options.engine.max_buffered_audio_s = options_.max_buffered_audio_seconds;
  model_options.engine.frontend_threads = options_.frontend_threads;
  model_options.engine.attention_rescoring = options_.attention_rescoring;
  model_options.engine.rescoring_max_segment_s = options_.rescoring_max_segment_seconds;
  model_options.engine.rescoring_memory_mib = options_.rescoring_memory_mib;
  model_options.engine.cuda_graphs = options_.cuda_graphs;
  model_options.engine.overlap_ticks = options_.overlap_ticks;
  model_options.engine.decode_thread = options_.decode_thread;
  absl::StatusOr<scheduler::EngineConfig::FrontEnd> front_end =
      scheduler::ParseFrontEnd(options_.front_end);
  if (!front_end.ok()) return front_end.status();
  model_options.engine.front_end = *front_end;
  spdlog::info("loading model {}", options_.model_dir);
  absl::StatusOr<std::unique_ptr<ServedModel>> model = ServedModel::Load(model_options);
  if (!model.ok()) {
    return absl::Status(model.status().code(),
                        absl::StrCat("model_dir '", options_.model_dir,
                                     "': ", std::string(model.status().message())));
  }
  model_ = std::move(*model);
  model_load_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  context_.model = model_.get();
  return absl::OkStatus();
}

void Server::LogServing() const {
  spdlog::info("oasr-server {} ({}, {}; CUDA {}{})", kVersion, kGitRevision, kBuildType,
               BuiltWithCuda() ? "on" : "off",
               BuiltWithCuda() ? absl::StrCat(" ", kCudaVersion) : std::string());
  const int gpus = CudaDeviceCount();
  for (int i = 0; i < gpus; ++i) {
    absl::StatusOr<std::string> name = CudaDeviceName(i);
    spdlog::info("GPU {}: {}", i, name.ok() ? *name : std::string(name.status().message()));
  }
  spdlog::info("inference device: {}{}", device_, gpus == 0 ? " (no usable GPU found)" : "");
  if (model_ == nullptr) {
    spdlog::warn(
        "no model directory given: serving server info, health (NOT_SERVING) and reflection "
        "only");
  } else {
    const asr::v1::ModelInfo& info = model_->info();
    const std::string longest =
        info.max_stream_seconds() > 0
            ? absl::StrCat("longest stream ", info.max_stream_seconds(), " s")
            : std::string("streams of any length");
    spdlog::info(
        "model '{}' ({}) loaded in {:.2f} s: {} Hz, chunk {} ms, {} units, streams {} active + "
        "{} waiting, {}",
        info.name(), info.language_code(), model_load_seconds_, info.sample_rate_hertz(),
        info.chunk_ms(), info.vocabulary_size(), info.max_active_streams(),
        info.max_waiting_streams(), longest);
    spdlog::info("the engine computes on {}", model_->engine().model().context().Describe());
  }
  spdlog::info(
      "gRPC listening on {}:{} ({}; services: {}, {}, {}, grpc.health.v1.Health, reflection)",
      options_.address, grpc_port_,
      tls_ != nullptr ? absl::StrCat("TLS, ", tls_->Describe()) : "plaintext", kSpeechServiceName,
      kRivaServiceName, kGoogleServiceName);

  spdlog::debug(
      "streaming calls run on {} gRPC queue threads, their events on {} dispatcher "
      "threads",
      call_queues_->threads(), dispatcher_->threads());
  if (metrics_port_ >= 0) {
    spdlog::info("metrics on http://{}:{}/metrics", MetricsAddress(options_), metrics_port_);
  }
}

absl::Status Server::WritePortFile() const {
  if (options_.port_file.empty()) return absl::OkStatus();
  const nlohmann::json ports = {{"grpc_port", grpc_port_}, {"metrics_port", metrics_port_}};
  // Write then rename, so a reader never sees a half-written file.
  const std::string tmp = options_.port_file + ".tmp";
  {
    std::ofstream out(tmp);
    out << ports.dump() << "\n";
    if (!out) return absl::InternalError(absl::StrCat("port_file: cannot write '", tmp, "'"));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, options_.port_file, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("port_file: cannot rename to '", options_.port_file, "': ", ec.message()));
  }
  return absl::OkStatus();
}

void Server::WaitForCallsUntil(std::chrono::steady_clock::time_point deadline) {
  while (std::chrono::steady_clock::now() < deadline) {
    if (context_.metrics.streaming_calls_active.load() == 0 &&
        context_.metrics.recognize_calls_active.load() == 0) {
      return;
    }
    // Calls end on gRPC's threads; polling keeps them free of shutdown hooks.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Server::Shutdown() {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (shut_down_ || grpc_server_ == nullptr) return;
  shut_down_ = true;
  serving_ = false;
  // Draining: probes see NOT_SERVING (so load balancers move on) while the
  // port still answers; new recognition calls get UNAVAILABLE.
  context_.draining = true;
  SetHealth(grpc_server_.get(), false);
  spdlog::info("shutting down: NOT_SERVING, {:.1f} s grace for {} open streams",
               options_.shutdown_grace_seconds, context_.metrics.streaming_calls_active.load());
  WaitForCallsUntil(
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(options_.shutdown_grace_seconds * 1000)));
  if (model_ != nullptr) {
    const int64_t left = context_.metrics.streaming_calls_active.load() +
                         context_.metrics.recognize_calls_active.load();
    if (left > 0) spdlog::info("grace period over: cancelling {} calls", left);
    // Every open stream ends with "cancelled"; the calls answer UNAVAILABLE.
    model_->Stop();
    // The cancelled calls send their endings; none waits for the client.
    WaitForCallsUntil(std::chrono::steady_clock::now() + kMaxFinalDelivery);
  }
  // No recognition call is left (or the last ones had their chance): stop at
  // once, cutting health watchers and the connections clients keep open,
  // which a deadline in the future would wait for (so would docker stop).
  StopGrpc(std::chrono::system_clock::now());
  if (metrics_) metrics_->Stop();
  spdlog::info("shut down");
}

void Server::StopGrpc(std::chrono::system_clock::time_point deadline) {
  grpc_server_->Shutdown(deadline);
  call_queues_->Stop();
}

void Server::Wait() {
  if (grpc_server_) grpc_server_->Wait();
}

std::string Server::RenderMetrics() const {
  MetricsSnapshotInput input;
  input.server = &context_.metrics;
  input.device = device_;
  input.serving = serving_.load();
  if (const ServedModel* model = context_.model.load(); model != nullptr) {
    input.engine = &model->engine().stats();
    input.model_name = model->name();
    input.model_dir = model->info().model_dir();
    input.model_load_seconds = model_load_seconds_;
  }
  return RenderPrometheus(input);
}

}  // namespace oasr::server
