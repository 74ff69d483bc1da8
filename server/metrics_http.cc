#include "server/metrics_http.h"

#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "common/thread_name.h"

namespace oasr::server {

MetricsHttpServer::MetricsHttpServer(std::function<std::string()> render)
    : render_(std::move(render)) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::StatusOr<int> MetricsHttpServer::Start(const std::string& address, int port) {
  http_ = std::make_unique<httplib::Server>();
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
    response.set_content(render_(), "text/plain; version=0.0.4; charset=utf-8");
  });
  const std::string host = address == "[::]" ? "::" : address;
  int bound = port;
  if (port == 0) {
    bound = http_->bind_to_any_port(host);
  } else if (!http_->bind_to_port(host, port)) {
    bound = -1;
  }
  if (bound <= 0) {
    http_.reset();
    return absl::UnavailableError(
        absl::StrCat("metrics: cannot bind ", address, ":", port, " (in use or not permitted)"));
  }
  thread_ = std::thread([this] {
    SetThreadName("oasr-metrics");
    http_->listen_after_bind();
  });
  return bound;
}

void MetricsHttpServer::Stop() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
  http_.reset();
}

}  // namespace oasr::server
