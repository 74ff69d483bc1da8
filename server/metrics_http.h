// A small HTTP endpoint that serves Prometheus text metrics at /metrics.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace oasr::server {

class MetricsHttpServer {
 public:
  // `render` produces the exposition text; it is called on the HTTP thread
  // for every scrape and must be thread-safe.
  explicit MetricsHttpServer(std::function<std::string()> render);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds address:port (port 0 picks a free one) and serves on a thread of
  // its own. Returns the bound port, or UNAVAILABLE when the bind fails.
  absl::StatusOr<int> Start(const std::string& address, int port);

  // Stops serving and joins the thread. Idempotent.
  void Stop();

 private:
  std::function<std::string()> render_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
};

}  // namespace oasr::server
