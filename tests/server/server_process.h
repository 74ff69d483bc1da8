// Test helper: runs oasr-server as a child process on loopback.
#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace oasr::testing {

// Runs `command` through the shell; returns (exit code, stdout), exit code -1
// when it did not exit normally.
std::pair<int, std::string> RunCommand(const std::string& command);

// The services reflection lists on `channel` (deadline 10 s); empty, with
// `*status` saying why, when the call fails.
std::set<std::string> ReflectedServices(const std::shared_ptr<grpc::Channel>& channel,
                                        grpc::Status* status);

class ServerProcess {
 public:
  // Starts `binary` with --address 127.0.0.1 --port 0 --metrics-port 0
  // --port-file <tmp> plus `extra_args`, and waits (at most `timeout_s`) until
  // the port file appears. The child's output goes to log_path().
  // Returns false (with a reason in error()) when it does not come up.
  bool Start(const std::string& binary, const std::vector<std::string>& extra_args,
             double timeout_s = 30.0);
  // Sends `signal` to the child.
  void Signal(int signal);
  // Waits at most `timeout_s` for the child to exit. Returns its wait status,
  // or -1 on timeout (the child is then killed).
  int WaitForExit(double timeout_s);
  ~ServerProcess();

  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  pid_t pid() const { return pid_; }
  std::string grpc_target() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  const std::string& log_path() const { return log_path_; }
  std::string ReadLog() const;
  // How often `what` occurs in the log.
  int CountInLog(const std::string& what) const;
  // Waits (bounded, 10 s) until `what` occurs `times` times in the log.
  bool WaitForLog(const std::string& what, int times = 1) const;
  const std::string& error() const { return error_; }

 private:
  pid_t pid_ = -1;
  std::string dir_;
  std::string log_path_;
  std::string error_;
  int grpc_port_ = 0;
  int metrics_port_ = -1;
};

}  // namespace oasr::testing
