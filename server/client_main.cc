// oasr-client: calls an oasr-server.
//   oasr-client info   [--server HOST:PORT]   prints GetServerInfo as JSON
//   oasr-client health [--server HOST:PORT] [--service NAME]
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "oasr/asr/v1/asr.grpc.pb.h"

namespace {

std::unique_ptr<grpc::ClientContext> ContextWithDeadline(double seconds) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  return context;
}

int ReportRpcError(const char* what, const grpc::Status& status) {
  std::fprintf(stderr, "oasr-client: %s failed: %s (code %d)\n", what,
               status.error_message().c_str(), static_cast<int>(status.error_code()));
  return 1;
}

int RunInfo(const std::shared_ptr<grpc::Channel>& channel, double timeout) {
  auto stub = oasr::asr::v1::Speech::NewStub(channel);
  oasr::asr::v1::ServerInfo info;
  auto context = ContextWithDeadline(timeout);
  grpc::Status status = stub->GetServerInfo(context.get(), {}, &info);
  if (!status.ok()) return ReportRpcError("GetServerInfo", status);
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = true;
  print.always_print_primitive_fields = true;
  print.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(info, &json, print);
  std::fputs(json.c_str(), stdout);
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
  std::printf("%s\n", grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status())
                          .c_str());
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"oasr-client: talk to an oasr-server"};
  std::string server = "127.0.0.1:50051";
  double timeout = 10.0;
  app.add_option("--server", server, "Server address HOST:PORT")->capture_default_str();
  app.add_option("--timeout", timeout, "Deadline per call in seconds")->capture_default_str();
  app.require_subcommand(1);
  CLI::App* info = app.add_subcommand("info", "Print the server's version and build as JSON");
  CLI::App* health = app.add_subcommand("health", "Check grpc.health.v1 (exit 0 when SERVING)");
  std::string service;
  health->add_option("--service", service, "Service name; empty for the whole server");
  CLI11_PARSE(app, argc, argv);

  auto channel = grpc::CreateChannel(server, grpc::InsecureChannelCredentials());
  if (*info) return RunInfo(channel, timeout);
  return RunHealth(channel, service, timeout);
}
