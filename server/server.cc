#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/device.h"
#include "common/version.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace oasr::server {
namespace {

constexpr const char kSpeechServiceName[] = "oasr.asr.v1.Speech";

// Prometheus label values escape backslash, double quote and newline.
std::string EscapeLabel(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

Server::Server(ServerOptions options) : options_(std::move(options)) {}

Server::~Server() { Shutdown(); }

absl::Status Server::Start() {
  if (absl::Status status = options_.Validate(); !status.ok()) return status;
  device_ = options_.device == "auto" ? DefaultDevice().ToString() : options_.device;
  speech_service_ = std::make_unique<SpeechService>(device_);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default, which would let a second server bind a
  // port already in use and silently split its traffic; refuse instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  const std::string target = absl::StrCat(options_.address, ":", options_.port);
  builder.AddListeningPort(target, grpc::InsecureServerCredentials(), &grpc_port_);
  builder.RegisterService(speech_service_.get());
  grpc_server_ = builder.BuildAndStart();
  if (grpc_server_ == nullptr || grpc_port_ == 0) {
    grpc_server_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot serve gRPC on ", target, " (address in use or not permitted)"));
  }

  if (options_.metrics_port >= 0) {
    metrics_ = std::make_unique<MetricsHttpServer>([this] { return RenderMetrics(); });
    absl::StatusOr<int> bound = metrics_->Start(options_.address, options_.metrics_port);
    if (!bound.ok()) {
      grpc_server_->Shutdown();
      grpc_server_.reset();
      return bound.status();
    }
    metrics_port_ = *bound;
  }

  grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService();
  health->SetServingStatus(kSpeechServiceName, true);
  health->SetServingStatus(true);
  serving_ = true;

  spdlog::info("oasr-server {} ({}, {}; CUDA {}{})", kVersion, kGitRevision, kBuildType,
               BuiltWithCuda() ? "on" : "off",
               BuiltWithCuda() ? absl::StrCat(" ", kCudaVersion) : std::string());
  const int gpus = CudaDeviceCount();
  for (int i = 0; i < gpus; ++i) {
    absl::StatusOr<std::string> name = CudaDeviceName(i);
    spdlog::info("GPU {}: {}", i, name.ok() ? *name : std::string(name.status().message()));
  }
  spdlog::info("inference device: {}{}", device_, gpus == 0 ? " (no usable GPU found)" : "");
  if (options_.model_dir.empty()) {
    spdlog::warn("no model directory given: serving server info, health and reflection only");
  } else {
    spdlog::warn("model directory {} accepted, but this build has no recognition engine yet: "
                 "serving server info, health and reflection only",
                 options_.model_dir);
  }
  spdlog::info("gRPC listening on {}:{} (services: {}, grpc.health.v1.Health, reflection)",
               options_.address, grpc_port_, kSpeechServiceName);
  if (metrics_port_ >= 0) {
    spdlog::info("metrics on http://{}:{}/metrics", options_.address, metrics_port_);
  }
  return WritePortFile();
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

void Server::Shutdown() {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (shut_down_ || grpc_server_ == nullptr) return;
  shut_down_ = true;
  serving_ = false;
  grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService();
  health->SetServingStatus(kSpeechServiceName, false);
  health->SetServingStatus(false);
  spdlog::info("shutting down: NOT_SERVING, {:.1f} s grace for in-flight calls",
               options_.shutdown_grace_seconds);
  const auto deadline =
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(options_.shutdown_grace_seconds * 1000));
  grpc_server_->Shutdown(deadline);
  if (metrics_) metrics_->Stop();
  spdlog::info("shut down");
}

void Server::Wait() {
  if (grpc_server_) grpc_server_->Wait();
}

std::string Server::RenderMetrics() const {
  std::string out;
  absl::StrAppend(&out,
                  "# HELP oasr_build_info Build of the running server (always 1).\n"
                  "# TYPE oasr_build_info gauge\n",
                  "oasr_build_info{version=\"", EscapeLabel(kVersion), "\",git_revision=\"",
                  EscapeLabel(kGitRevision), "\",cuda=\"", BuiltWithCuda() ? "on" : "off",
                  "\",device=\"", EscapeLabel(device_), "\"} 1\n");
  absl::StrAppend(&out,
                  "# HELP oasr_serving 1 while the health service reports SERVING.\n"
                  "# TYPE oasr_serving gauge\n",
                  "oasr_serving ", serving_.load() ? 1 : 0, "\n");
  return out;
}

}  // namespace oasr::server
