// Starts oasr-server as a subprocess on a free loopback port, without a
// model, and talks to it as a user would: health (NOT_SERVING: nothing can be
// recognised), the version RPC, reflection, /metrics, the client binary, and
// a SIGTERM that must end in exit code 0.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <thread>

#include "common/device.h"
#include "common/version.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "oasr/asr/v1/asr.grpc.pb.h"
#include "tests/server/server_process.h"

namespace oasr {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

std::chrono::system_clock::time_point In(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

HealthCheckResponse::ServingStatus CheckHealth(grpc::health::v1::Health::Stub& stub,
                                               const std::string& service) {
  grpc::ClientContext context;
  context.set_deadline(In(5));
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  grpc::Status status = stub.Check(&context, request, &response);
  if (!status.ok()) return HealthCheckResponse::UNKNOWN;
  return response.status();
}

class ServerIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start(OASR_SERVER_BINARY, {"--shutdown-grace", "2"})) << server_.error();
    channel_ = grpc::CreateChannel(server_.grpc_target(), grpc::InsecureChannelCredentials());
    ASSERT_TRUE(channel_->WaitForConnected(In(10))) << server_.ReadLog();
  }

  testing::ServerProcess server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(ServerIntegrationTest, ServesHealthInfoReflectionMetricsAndExitsCleanlyOnSigterm) {
  // No model: probes must not send streams here (issue 20: it said SERVING).
  auto health = grpc::health::v1::Health::NewStub(channel_);
  EXPECT_EQ(CheckHealth(*health, ""), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(CheckHealth(*health, "oasr.asr.v1.Speech"), HealthCheckResponse::NOT_SERVING);

  // The version RPC reports this build.
  auto speech = asr::v1::Speech::NewStub(channel_);
  {
    grpc::ClientContext context;
    context.set_deadline(In(5));
    asr::v1::ServerInfo info;
    ASSERT_TRUE(speech->GetServerInfo(&context, {}, &info).ok());
    EXPECT_EQ(info.version(), kVersion);
    EXPECT_EQ(info.cuda_enabled(), BuiltWithCuda());
    EXPECT_EQ(info.gpus_size(), CudaDeviceCount());
    EXPECT_EQ(info.device(), CudaDeviceCount() > 0 ? "cuda:0" : "cpu");
    EXPECT_GE(info.uptime_seconds(), 0.0);
  }

  // Reflection lists our service and health.
  {
    auto reflection = grpc::reflection::v1alpha::ServerReflection::NewStub(channel_);
    grpc::ClientContext context;
    context.set_deadline(In(5));
    auto stream = reflection->ServerReflectionInfo(&context);
    grpc::reflection::v1alpha::ServerReflectionRequest request;
    request.set_list_services("");
    ASSERT_TRUE(stream->Write(request));
    grpc::reflection::v1alpha::ServerReflectionResponse response;
    ASSERT_TRUE(stream->Read(&response));
    std::set<std::string> services;
    for (const auto& s : response.list_services_response().service()) services.insert(s.name());
    EXPECT_TRUE(services.count("oasr.asr.v1.Speech")) << response.DebugString();
    EXPECT_TRUE(services.count("grpc.health.v1.Health")) << response.DebugString();
    // ... and describes health too, as grpcurl needs to call it (issue 20:
    // "Symbol not found", the descriptors were not registered).
    for (const char* symbol : {"grpc.health.v1.Health", "oasr.asr.v1.Speech"}) {
      grpc::reflection::v1alpha::ServerReflectionRequest describe;
      describe.set_file_containing_symbol(symbol);
      ASSERT_TRUE(stream->Write(describe));
      ASSERT_TRUE(stream->Read(&response));
      EXPECT_FALSE(response.has_error_response())
          << symbol << ": " << response.error_response().error_message();
      EXPECT_GT(response.file_descriptor_response().file_descriptor_proto_size(), 0) << symbol;
    }
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }

  // Prometheus text on the metrics port.
  {
    httplib::Client http("127.0.0.1", server_.metrics_port());
    auto result = http.Get("/metrics");
    ASSERT_TRUE(result) << "metrics endpoint did not answer";
    EXPECT_EQ(result->status, 200);
    EXPECT_NE(result->body.find("oasr_build_info{version=\""), std::string::npos);
    EXPECT_NE(result->body.find("oasr_serving 0"), std::string::npos) << result->body;
  }

  // The client binary.
  {
    auto [code, out] = testing::RunCommand("timeout 30 " + std::string(OASR_CLIENT_BINARY) +
                                           " --server " + server_.grpc_target() + " info");
    EXPECT_EQ(code, 0);
    EXPECT_NE(out.find("\"version\": \"" + std::string(kVersion) + "\""), std::string::npos) << out;
    auto [hcode, hout] = testing::RunCommand("timeout 30 " + std::string(OASR_CLIENT_BINARY) +
                                             " --server " + server_.grpc_target() + " health");
    EXPECT_EQ(hcode, 1);
    EXPECT_EQ(hout, "NOT_SERVING\n");
  }

  // A health watcher (a call that never ends by itself, on a channel the
  // client keeps open) does not hold the exit past the grace period.
  grpc::ClientContext watch_context;
  watch_context.set_deadline(In(20));
  HealthCheckRequest watch_request;
  auto watch = health->Watch(&watch_context, watch_request);
  HealthCheckResponse update;
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::NOT_SERVING);

  const auto signalled = std::chrono::steady_clock::now();
  server_.Signal(SIGTERM);
  const int status = server_.WaitForExit(20);
  const double exit_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  // The watch ends with the server (gRPC may send a last NOT_SERVING first).
  int more = 0;
  while (more < 5 && watch->Read(&update)) ++more;
  EXPECT_LT(more, 5) << "the watch outlived the server";
  // Nothing is open but the watch: no grace to wait, and no fixed slack.
  EXPECT_LT(exit_s, 1.5) << server_.ReadLog();
  ASSERT_NE(status, -1) << "server did not exit after SIGTERM; log:\n" << server_.ReadLog();
  ASSERT_TRUE(WIFEXITED(status)) << server_.ReadLog();
  EXPECT_EQ(WEXITSTATUS(status), 0) << server_.ReadLog();
  watch_context.TryCancel();
}

TEST(ServerStartTest, BadFlagsExitWithCode2AndNameTheField) {
  testing::ServerProcess server;
  EXPECT_FALSE(server.Start(OASR_SERVER_BINARY, {"--device", "tpu:0"}, 10));
  EXPECT_NE(server.error().find("device: 'tpu:0'"), std::string::npos) << server.error();
}

TEST(ServerStartTest, PortInUseIsReportedAndExits) {
  testing::ServerProcess first;
  ASSERT_TRUE(first.Start(OASR_SERVER_BINARY, {})) << first.error();
  auto [code, out] = testing::RunCommand("timeout 30 " + std::string(OASR_SERVER_BINARY) +
                                         " --address 127.0.0.1 --metrics-port -1 --port " +
                                         std::to_string(first.grpc_port()) + " 2>&1");
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("cannot serve gRPC on 127.0.0.1:" + std::to_string(first.grpc_port())),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace oasr
