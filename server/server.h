// The oasr gRPC server process: the Speech service, grpc.health.v1,
// reflection and the Prometheus endpoint, with a graceful shutdown.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "server/metrics_http.h"
#include "server/server_options.h"
#include "server/speech_service.h"

namespace grpc {
class Server;
}

namespace oasr::server {

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Validates the options, binds the gRPC and metrics ports, starts serving
  // and reports SERVING on the health service. Errors name what failed (a
  // bad option, a port in use). Call once.
  absl::Status Start();

  // Reports NOT_SERVING, stops accepting calls, gives in-flight calls the
  // configured grace period, cancels what remains, then stops the metrics
  // endpoint. Thread-safe and idempotent; returns when the server is down.
  void Shutdown();

  // Blocks until the server has shut down.
  void Wait();

  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }

 private:
  std::string RenderMetrics() const;
  absl::Status WritePortFile() const;

  const ServerOptions options_;
  std::string device_;
  std::unique_ptr<SpeechService> speech_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<MetricsHttpServer> metrics_;
  int grpc_port_ = 0;
  int metrics_port_ = -1;
  std::atomic<bool> serving_{false};
  std::mutex shutdown_mu_;
  bool shut_down_ = false;
};

}  // namespace oasr::server
