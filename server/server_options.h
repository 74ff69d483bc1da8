// Everything oasr-server is configured with, from flags or a config file.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace oasr::server {

struct ServerOptions {
  // Address the gRPC server binds, without the port ("0.0.0.0", "127.0.0.1", "[::]").
  std::string address = "0.0.0.0";
  // gRPC port; 0 picks a free port (reported in the log and in port_file).
  int port = 50051;
  // Prometheus /metrics HTTP port on the same address; 0 picks a free port,
  // -1 disables the endpoint.
  int metrics_port = 8080;
  // Model directory to serve; empty serves no model.
  std::string model_dir;
  // Inference device: "auto" (cuda:0 when a GPU is usable, else cpu), "cpu", "cuda:N".
  std::string device = "auto";
  // trace, debug, info, warn, error, critical, off.
  std::string log_level = "info";
  // When set, the bound ports are written there as JSON once the server
  // serves: {"grpc_port": N, "metrics_port": M}. For tests and supervisors.
  std::string port_file;
  // Seconds in-flight calls get to finish after SIGTERM/SIGINT.
  double shutdown_grace_seconds = 10.0;

  // Rejects out-of-range values with a message naming field, value and limit.
  absl::Status Validate() const;
};

}  // namespace oasr::server
