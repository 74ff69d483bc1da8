#include "tests/server/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "nlohmann/json.hpp"

namespace oasr::testing {

std::pair<int, std::string> RunCommand(const std::string& command) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

std::set<std::string> ReflectedServices(const std::shared_ptr<grpc::Channel>& channel,
                                        grpc::Status* status) {
  namespace reflection = grpc::reflection::v1alpha;
  auto stub = reflection::ServerReflection::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->ServerReflectionInfo(&context);
  reflection::ServerReflectionRequest request;
  request.set_list_services("");
  reflection::ServerReflectionResponse response;
  std::set<std::string> services;
  if (stream->Write(request) && stream->Read(&response)) {
    for (const auto& s : response.list_services_response().service()) services.insert(s.name());
  }
  stream->WritesDone();
  *status = stream->Finish();
  return services;
}

bool ServerProcess::Start(const std::string& binary, const std::vector<std::string>& extra_args,
                          double timeout_s) {
  char dir_template[] = "/tmp/oasr-server-test-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    error_ = "mkdtemp failed";
    return false;
  }
  dir_ = dir_template;
  log_path_ = dir_ + "/server.log";
  const std::string port_file = dir_ + "/ports.json";

  std::vector<std::string> args = {binary,           "--address", "127.0.0.1",   "--port", "0",
                                   "--metrics-port", "0",         "--port-file", port_file};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_ = fork();
  if (pid_ < 0) {
    error_ = "fork failed";
    return false;
  }
  if (pid_ == 0) {
    const int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }

  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      error_ = "server exited during start; log:\n" + ReadLog();
      return false;
    }
    if (std::filesystem::exists(port_file)) {
      std::ifstream in(port_file);
      nlohmann::json ports = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (!ports.is_discarded()) {
        grpc_port_ = ports.value("grpc_port", 0);
        metrics_port_ = ports.value("metrics_port", -1);
        return grpc_port_ > 0;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  error_ = "server did not write its port file in time; log:\n" + ReadLog();
  return false;
}

void ServerProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

int ServerProcess::WaitForExit(double timeout_s) {
  if (pid_ <= 0) return -1;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return -1;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string ServerProcess::ReadLog() const {
  std::ifstream in(log_path_);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

int ServerProcess::CountInLog(const std::string& what) const {
  const std::string log = ReadLog();
  int n = 0;
  for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
  return n;
}

bool ServerProcess::WaitForLog(const std::string& what, int times) const {
  for (int i = 0; i < 500 && CountInLog(what) < times; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return CountInLog(what) >= times;
}

}  // namespace oasr::testing
