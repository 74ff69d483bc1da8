#include "server/server_options.h"

#include <gtest/gtest.h>

#include <cmath>

namespace oasr::server {
namespace {

TEST(ServerOptionsTest, DefaultsAreValid) { EXPECT_TRUE(ServerOptions().Validate().ok()); }

TEST(ServerOptionsTest, ZeroIdleTimeoutDisablesItAndIsValid) {
  ServerOptions options;
  options.stream_idle_timeout_seconds = 0;
  EXPECT_TRUE(options.Validate().ok());
  options.stream_idle_timeout_seconds = 0.25;
  EXPECT_TRUE(options.Validate().ok());
  options.stream_idle_timeout_seconds = std::nan("");
  EXPECT_FALSE(options.Validate().ok());
}

TEST(ServerOptionsTest, EachBadFieldIsNamedWithItsValue) {
  struct Case {
    void (*mutate)(ServerOptions&);
    const char* expected;
  };
  const Case cases[] = {
      {[](ServerOptions& o) { o.port = 70000; }, "port: 70000"},
      {[](ServerOptions& o) { o.port = -5; }, "port: -5"},
      {[](ServerOptions& o) { o.metrics_port = -2; }, "metrics_port: -2"},
      {[](ServerOptions& o) { o.metrics_port = o.port; }, "is the gRPC port too"},
      {[](ServerOptions& o) { o.address.clear(); }, "address"},
      {[](ServerOptions& o) { o.shutdown_grace_seconds = -1; }, "shutdown_grace_seconds: -1"},
      {[](ServerOptions& o) { o.device = "tpu"; }, "device: 'tpu'"},
      {[](ServerOptions& o) { o.kv_dtype = "int8"; }, "kv_dtype: 'int8'"},
      {[](ServerOptions& o) { o.device = "cuda:7"; }, "device: cuda:7 is not present"},
      {[](ServerOptions& o) { o.model_dir = "/nonexistent/model"; },
       "model_dir: '/nonexistent/model'"},
      {[](ServerOptions& o) { o.max_active_streams = 0; }, "max_active_streams: 0"},
      {[](ServerOptions& o) { o.max_active_streams = 131073; }, "max_active_streams: 131073"},
      {[](ServerOptions& o) { o.max_waiting_streams = -1; }, "max_waiting_streams: -1"},
      {[](ServerOptions& o) { o.max_buffered_audio_seconds = 0; }, "max_buffered_audio_seconds: 0"},
      {[](ServerOptions& o) { o.num_threads = 0; }, "num_threads: 0"},
      {[](ServerOptions& o) { o.frontend_threads = -1; }, "frontend_threads: -1"},
      {[](ServerOptions& o) { o.grpc_threads = 65; }, "grpc_threads: 65"},
      {[](ServerOptions& o) { o.event_threads = -1; }, "event_threads: -1"},
      {[](ServerOptions& o) { o.max_pending_responses = 0; }, "max_pending_responses: 0"},
      {[](ServerOptions& o) { o.max_message_bytes = 10; }, "max_message_bytes: 10"},
      {[](ServerOptions& o) { o.stream_idle_timeout_seconds = -1; },
       "stream_idle_timeout_seconds: -1"},
      {[](ServerOptions& o) { o.stream_idle_timeout_seconds = 1e6; },
       "stream_idle_timeout_seconds: 1e+06"},
      {[](ServerOptions& o) { o.keepalive_timeout_seconds = 0; }, "keepalive_timeout_seconds"},
      {[](ServerOptions& o) { o.tls_cert = "cert.pem"; }, "tls_cert, tls_key: 'cert.pem', ''"},
      {[](ServerOptions& o) { o.tls_key = "key.pem"; }, "give both or neither"},
      {[](ServerOptions& o) { o.tls_client_ca = "ca.pem"; }, "tls_client_ca: mutual TLS needs"},
      {[](ServerOptions& o) { o.max_streams_per_peer = -1; }, "max_streams_per_peer: 0, -1"},
      {[](ServerOptions& o) { o.max_streams_per_token = 2; },
       "max_streams_per_token: 2 needs a tokens_file"},
      {[](ServerOptions& o) { o.max_stream_duration_seconds = -1; },
       "max_stream_duration_seconds: -1"},
      {[](ServerOptions& o) { o.stream_open_rate = -0.5; },
       "stream_open_rate, stream_open_burst: -0.5"},
      {[](ServerOptions& o) { o.stream_open_burst = std::nan(""); }, "stream_open_burst: 0, nan"},
  };
  for (const Case& c : cases) {
    ServerOptions options;
    c.mutate(options);
    absl::Status status = options.Validate();
    ASSERT_FALSE(status.ok()) << c.expected;
    EXPECT_NE(status.message().find(c.expected), std::string::npos) << status.message();
  }
}

}  // namespace
}  // namespace oasr::server
