// oasr-server: the streaming speech-recognition server.
#include <pthread.h>
#include <signal.h>

#include <thread>

#include "CLI/CLI.hpp"
#include "common/logging.h"
#include "common/version.h"
#include "server/server.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  // Block the shutdown signals in every thread; one thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  oasr::server::ServerOptions options;
  CLI::App app{"oasr-server: streaming speech recognition over gRPC"};
  app.set_version_flag("--version", std::string(oasr::kVersion) + " (" + oasr::kGitRevision + ")");
  app.set_config("--config", "", "Read options from a TOML or INI file (flag names as keys)");
  app.add_option("--address", options.address, "Address to bind")->capture_default_str();
  app.add_option("--port", options.port, "gRPC port (0: pick a free one)")->capture_default_str();
  app.add_option("--metrics-port", options.metrics_port,
                 "Prometheus /metrics HTTP port (0: pick a free one, -1: off)")
      ->capture_default_str();
  app.add_option("--model-dir", options.model_dir, "Model directory to serve");
  app.add_option("--device", options.device, "Inference device: auto, cpu, cuda, cuda:N")
      ->capture_default_str();
  app.add_option("--log-level", options.log_level,
                 "trace, debug, info, warn, error, critical or off")
      ->capture_default_str();
  app.add_option("--port-file", options.port_file,
                 "Write the bound ports there as JSON once serving");
  app.add_option("--shutdown-grace", options.shutdown_grace_seconds,
                 "Seconds in-flight calls get after SIGTERM/SIGINT")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  if (absl::Status status = oasr::InitLogging(options.log_level); !status.ok()) {
    fprintf(stderr, "oasr-server: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  oasr::server::Server server(options);
  if (absl::Status status = server.Start(); !status.ok()) {
    spdlog::error("cannot start: {}", status.ToString());
    return status.code() == absl::StatusCode::kInvalidArgument ||
                   status.code() == absl::StatusCode::kNotFound
               ? 2
               : 1;
  }

  std::thread signal_waiter([&server, signals] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    spdlog::info("received {}", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
    server.Shutdown();
  });
  server.Wait();
  signal_waiter.join();
  return 0;
}
