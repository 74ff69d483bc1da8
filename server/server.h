// The oasr gRPC server process: the Speech service (and the Riva and Google
// Cloud Speech APIs over the same engine), grpc.health.v1, reflection and the
// Prometheus endpoint, with a graceful shutdown.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "server/access_control.h"
#include "server/call_queues.h"
#include "server/event_dispatcher.h"
#include "server/google_speech_service.h"
#include "server/metrics_http.h"
#include "server/riva_service.h"
#include "server/served_model.h"
#include "server/server_options.h"
#include "server/service_context.h"
#include "server/speech_service.h"
#include "server/tls_credentials.h"

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

  // Validates the options, binds the gRPC and metrics ports and starts
  // serving with health NOT_SERVING; loads the model when one is configured,
  // then reports SERVING. Errors name what failed (a bad option, a port in
  // use, the model's file or field). Call once.
  absl::Status Start();

  // Reports NOT_SERVING and refuses new recognition calls (UNAVAILABLE)
  // while health and info still answer, gives in-flight calls the configured
  // grace period, then stops the engine (the streams left end with
  // finish_reason "cancelled" and status UNAVAILABLE), stops gRPC and the
  // metrics endpoint. Thread-safe and idempotent; returns when the server is
  // down.
  void Shutdown();

  // SIGHUP: reads the TLS files and the tokens file again. What checks out
  // serves new connections and calls from now on; open connections and
  // streams keep going. On an error the previous files stay in force and the
  // status says which file and why (both are tried). Thread-safe.
  absl::Status Reload();

  // Blocks until the server has shut down.
  void Wait();

  int grpc_port() const { return grpc_port_; }
  // What every call shares, for a test to install its seams before Start().
  ServiceContext& context_for_test() { return context_; }
  int metrics_port() const { return metrics_port_; }

 private:
  std::string RenderMetrics() const;
  // The TLS credentials and the tokens, from the options.
  absl::Status SetUpSecurity();
  absl::Status WritePortFile() const;
  absl::Status LoadModel();
  void LogServing() const;
  // Waits until no recognition call is open or `deadline` passes.
  void WaitForCallsUntil(std::chrono::steady_clock::time_point deadline);
  // Stops gRPC (cancelling what is left by `deadline`), then the streaming
  // calls' queues.
  void StopGrpc(std::chrono::system_clock::time_point deadline);

  const ServerOptions options_;
  std::string device_;
  ServiceContext context_;
  // Declared before the model and the gRPC server, so destroyed after them:
  // the engine's last events and the calls' endings still run on it.
  std::unique_ptr<EventDispatcher> dispatcher_;
  // Both outlive the gRPC server (its handshakes and calls use them).
  std::unique_ptr<ReloadableTlsCredentials> tls_;
  std::unique_ptr<CallAdmission> admission_;
  std::unique_ptr<ServedModel> model_;  // Outlives every call (see Shutdown).
  double model_load_seconds_ = 0.0;
  std::unique_ptr<SpeechService> speech_service_;
  std::unique_ptr<RivaService> riva_service_;
  std::unique_ptr<GoogleSpeechService> google_service_;
  // The streaming calls' queues and threads: outlive the gRPC server, which
  // must shut down before they do.
  std::unique_ptr<CallQueues> call_queues_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<MetricsHttpServer> metrics_;
  int grpc_port_ = 0;
  int metrics_port_ = -1;
  std::atomic<bool> serving_{false};
  std::mutex shutdown_mu_;
  bool shut_down_ = false;
};

}  // namespace oasr::server
