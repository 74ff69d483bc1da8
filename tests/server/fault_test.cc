// The fault campaign (issue 21, part 6), against real oasr-server
// subprocesses serving the small random model (fixture encoder_golden) on
// 127.0.0.1: a client killed mid-stream, streams opened and cancelled as fast
// as a few threads can, garbage and truncated HTTP/2 on the port, a message
// past the receive limit, a config with every field at its limit and one
// past, SIGTERM with every stream slot taken, SIGKILL and a restart on the
// same port, and the K/V pool filled to capacity. Every case ends by checking
// the server still transcribes (or, after SIGTERM, exited 0). Each case runs
// as a process of its own (ctest, in parallel): every path it writes carries
// its pid, and it signals only the processes it started.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "decoder/phrase_tokenizer.h"
#include "decoder/symbol_table.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "oasr/asr/v1/asr.grpc.pb.h"
#include "server/audio_codec.h"
#include "server/stream_client.h"
#include "tests/server/recognition_helpers.h"
#include "tests/server/server_process.h"

namespace oasr {
namespace {

using asr::v1::StreamingRecognizeRequest;
using asr::v1::StreamingRecognizeResponse;
using grpc::health::v1::HealthCheckResponse;
using testing::Config;
using testing::In;
using testing::MakeAudio;
using testing::ServerProcess;

using Call = grpc::ClientReaderWriter<StreamingRecognizeRequest, StreamingRecognizeResponse>;

// A path of this test process's own under the test temp folder.
std::string OwnPath(const std::string& name) {
  return ::testing::TempDir() + "/oasr-fault-" + std::to_string(::getpid()) + "-" + name;
}

// A channel on a connection of its own (no subchannel shared with another
// channel of this process).
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& target) {
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments);
}

// grpc.health.v1 for the whole server; -1 when the call fails.
int Health(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(In(5));
  HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, {}, &response);
  return status.ok() ? response.status() : -1;
}

// The pid of `server`, found among this process's children by the port file
// on its command line (ServerProcess keeps the pid to itself).
pid_t ServerPid(const ServerProcess& server) {
  const std::string port_file =
      std::filesystem::path(server.log_path()).parent_path().string() + "/ports.json";
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t comm_end = line.rfind(')');
    if (comm_end == std::string::npos) continue;
    std::istringstream fields(line.substr(comm_end + 1));
    std::string state;
    pid_t parent = 0;
    fields >> state >> parent;
    if (parent != ::getpid()) continue;
    std::ifstream cmdline(entry.path() / "cmdline");
    const std::string args((std::istreambuf_iterator<char>(cmdline)), {});
    if (args.find(port_file) != std::string::npos) return std::stoi(name);
  }
  return -1;
}

// VmRSS of `pid` in KiB (-1 when unreadable).
int64_t RssKib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      int64_t kib = -1;
      status >> kib;
      return kib;
    }
    status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return -1;
}

int OpenFds(pid_t pid) {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return ec ? -1 : n;
}

// Open fds of `pid` once the count has held for half a second (connections
// the clients closed take a moment to be torn down); at most 10 s.
int SettledFds(pid_t pid) {
  int last = OpenFds(pid), same = 0;
  for (int i = 0; i < 200 && same < 10; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const int now = OpenFds(pid);
    same = now == last ? same + 1 : 0;
    last = now;
  }
  return last;
}

// Threads of a case, joined however it ends (an ASSERT returning early
// included): each runs one stream under its own deadline.
struct Threads {
  ~Threads() { Join(); }
  void Join() {
    for (std::thread& thread : all) {
      if (thread.joinable()) thread.join();
    }
  }
  std::vector<std::thread> all;
};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The audio every case ends by transcribing, and the engine's finals for it.
const std::vector<int16_t>& CheckAudio() {
  static const std::vector<int16_t> audio = MakeAudio(31, 2.0, 16000);
  return audio;
}
const std::vector<std::string>& CheckFinals() {
  static const std::vector<std::string> finals = testing::EngineFinals(CheckAudio(), 16000);
  return finals;
}

// A stream held open by the test: the config sent, audio written at will.
struct OpenStream {
  OpenStream(asr::v1::Speech::Stub& stub, const asr::v1::StreamingRecognitionConfig& config) {
    context.set_deadline(In(90));
    call = stub.StreamingRecognize(&context);
    StreamingRecognizeRequest request;
    *request.mutable_streaming_config() = config;
    opened = call->Write(request);
  }
  bool Send(const int16_t* samples, size_t count) {
    StreamingRecognizeRequest request;
    request.set_audio_content(reinterpret_cast<const char*>(samples), count * 2);
    return call->Write(request);
  }
  // Half-closes, reads to the end; the finish_reason of the last result.
  grpc::Status Close(std::string* finish_reason) {
    call->WritesDone();
    StreamingRecognizeResponse response;
    while (call->Read(&response)) {
      for (const auto& r : response.results()) {
        if (!r.finish_reason().empty()) *finish_reason = r.finish_reason();
      }
    }
    return call->Finish();
  }

  grpc::ClientContext context;
  std::unique_ptr<Call> call;
  bool opened = false;
};

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(CheckFinals().empty()); }

  // Starts server_ with the small model and `args`; connects channel_.
  void Start(const std::vector<std::string>& args) {
    std::vector<std::string> all = {"--model-dir", testing::SmallModelDir()};
    all.insert(all.end(), args.begin(), args.end());
    ASSERT_TRUE(server_.Start(OASR_SERVER_BINARY, all)) << server_.error();
    channel_ = OwnChannel(server_.grpc_target());
    ASSERT_TRUE(channel_->WaitForConnected(In(10))) << server_.ReadLog();
    stub_ = asr::v1::Speech::NewStub(channel_);
    pid_ = ServerPid(server_);
    ASSERT_GT(pid_, 0) << "the server is not among this process's children";
  }

  // One figure of /metrics; -1, and a failure, when it is not there.
  double Metric(const std::string& name) {
    std::string error;
    const std::map<std::string, double> values =
        testing::ScrapeMetrics(server_.metrics_port(), &error);
    if (const auto it = values.find(name); error.empty() && it != values.end()) return it->second;
    ADD_FAILURE() << name << ": not in /metrics " << error;
    return -1;
  }

  // oasr_streams_finished_total by finish_reason.
  std::map<std::string, double> Finished() {
    std::string error;
    std::map<std::string, double> finished;
    for (const auto& [name, value] : testing::ScrapeMetrics(server_.metrics_port(), &error)) {
      if (name.starts_with("oasr_streams_finished_total{")) finished[name] = value;
    }
    EXPECT_EQ(error, "");
    EXPECT_FALSE(finished.empty()) << "no oasr_streams_finished_total in /metrics";
    return finished;
  }

  // Streams finished, for any reason, since `before` was taken.
  double FinishedSince(const std::map<std::string, double>& before) {
    double total = 0;
    for (const auto& [name, value] : Finished()) {
      const auto it = before.find(name);
      total += value - (it != before.end() ? it->second : 0);
    }
    return total;
  }

  // The reasons with streams finished since `before`, e.g. "cancelled 1".
  std::string FinishedReasons(const std::map<std::string, double>& before) {
    std::string out;
    for (const auto& [name, value] : Finished()) {
      const auto it = before.find(name);
      const double since = value - (it != before.end() ? it->second : 0);
      if (since == 0) continue;
      const size_t open = name.find('"') + 1;
      out += (out.empty() ? "" : ", ") + name.substr(open, name.rfind('"') - open) + " " +
             std::to_string(static_cast<int64_t>(since));
    }
    return out.empty() ? "none" : out;
  }

  // Polls (bounded, 10 s) until `name` reaches `value`.
  bool WaitForMetric(const std::string& name, double value) {
    for (int i = 0; i < 500; ++i) {
      if (Metric(name) == value) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // Nothing open, the pool full again, health SERVING, the process alive.
  void ExpectIdleAndServing() {
    std::map<std::string, double> metrics;
    EXPECT_TRUE(testing::WaitForIdle(server_.metrics_port(), &metrics))
        << "streams_open " << metrics["oasr_grpc_streams_open"] << ", active "
        << metrics["oasr_streams_active"] << ", waiting " << metrics["oasr_streams_waiting"]
        << ", blocks used " << metrics["oasr_kv_pool_blocks_used"] << "\n"
        << server_.ReadLog();
    EXPECT_GT(metrics["oasr_kv_pool_blocks_total"], 0);
    // The engine's other pools, as /metrics reports them.
    EXPECT_TRUE(WaitForMetric("oasr_stream_slots_used", 0));
    EXPECT_TRUE(WaitForMetric("oasr_decoder_states_in_use", 0));
    EXPECT_EQ(kill(pid_, 0), 0) << "the server died:\n" << server_.ReadLog();
    EXPECT_EQ(Health(channel_), HealthCheckResponse::SERVING);
  }

  // A fresh stream transcribes as the engine does.
  void ExpectTranscribes(asr::v1::Speech::Stub& stub) {
    server::StreamOutcome got = testing::Stream(stub, CheckAudio(), Config(16000));
    ASSERT_TRUE(got.status.ok()) << got.status.error_message() << "\n" << server_.ReadLog();
    EXPECT_EQ(got.finals, CheckFinals());
    EXPECT_EQ(got.finish_reason, "stop");
  }

  ServerProcess server_;
  pid_t pid_ = -1;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<asr::v1::Speech::Stub> stub_;
};

// 1. A client killed with SIGKILL mid-stream.
TEST_F(FaultTest, ClientKilledMidStreamFreesItsStreamWhileAnotherGoesOn) {
  Start({});
  const std::map<std::string, double> finished_before = Finished();
  const double blocks_total = Metric("oasr_kv_pool_blocks_total");

  // Another stream, in real time, from before the kill to after it.
  const std::vector<int16_t> other_audio = MakeAudio(41, 5.0, 16000);
  server::StreamOutcome other;
  Threads other_thread;
  other_thread.all.emplace_back([&] {
    server::StreamClientOptions options;
    options.config = Config(16000, /*interim=*/true);
    options.timeout_s = 60;
    other = server::RunStream(*stub_, other_audio, options);
  });

  // The real oasr-client streaming a 20 s file in real time.
  const std::string wav = testing::WriteTemp("oasr-fault-" + std::to_string(getpid()) + ".wav",
                                             server::EncodeWav(MakeAudio(43, 20.0, 16000), 16000));
  const std::string target = server_.grpc_target();
  const pid_t client = fork();
  ASSERT_GE(client, 0);
  if (client == 0) {
    const int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) dup2(fd, STDOUT_FILENO);
    execl(OASR_CLIENT_BINARY, OASR_CLIENT_BINARY, "--server", target.c_str(), "stream", "--json",
          wav.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Killed once both streams hold a slot and have audio decoded.
  EXPECT_TRUE(WaitForMetric("oasr_streams_active", 2)) << server_.ReadLog();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_GT(Metric("oasr_kv_pool_blocks_used"), 0);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(client, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(client, &status, 0), client);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;

  // The killed client's stream goes at once; the other one still decodes.
  // Its read fails and gRPC's notice that the call broke follows; the server
  // waits one turn of the call's queue for that notice and then cancels the
  // stream (finish_reason "cancelled"). On a loaded machine the thread that
  // delivers the notice can be preempted for longer than the engine takes to
  // decode the few samples left, and the stream then ends as a half-close
  // would ("stop", its final sent to no one). Either way it must end at once
  // and free its memory; the reason it was counted under is printed.
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    gone = FinishedSince(finished_before) >= 1;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone) << server_.ReadLog();
  std::cout << "SIGKILLed oasr-client: its stream ended " << SecondsSince(killed) * 1000
            << " ms after the kill; finished since the start: " << FinishedReasons(finished_before)
            << std::endl;
  EXPECT_EQ(Metric("oasr_streams_active"), 1) << "the other stream ended with the killed one";
  EXPECT_EQ(FinishedSince(finished_before), 1) << FinishedReasons(finished_before);
  other_thread.Join();
  ASSERT_TRUE(other.status.ok()) << other.status.error_message();
  EXPECT_EQ(other.finish_reason, "stop");
  EXPECT_EQ(other.finals, testing::EngineFinals(other_audio, 16000));

  ExpectIdleAndServing();
  EXPECT_EQ(Metric("oasr_kv_pool_blocks_total"), blocks_total);
  // The killed stream and the other one, which stopped.
  EXPECT_EQ(FinishedSince(finished_before), 2) << FinishedReasons(finished_before);
  ExpectTranscribes(*stub_);
  std::filesystem::remove(wav);
}

// 2. Streams opened and cancelled as fast as a few client threads can:
// first each call waiting for the server's answer before its cancel (the
// server keeps up; RSS and fds are bounded), then a flood that does not wait
// (calls pile up on the server; they must all drain). OASR_FAULT_CHURN_SECONDS
// sets how long the first part runs (default 10; the long form: 60).
TEST_F(FaultTest, OpenCancelChurnLeavesNoStreamMemoryOrFdBehind) {
  Start({});
  const char* env = std::getenv("OASR_FAULT_CHURN_SECONDS");
  const double seconds = env != nullptr ? std::atof(env) : 10.0;
  constexpr int kThreads = 4;
  constexpr int kCallsPerChannel = 200;  // Then a new connection.
  const std::vector<int16_t> audio = MakeAudio(47, 1.0, 16000);
  const std::string cancelled = "oasr_streams_finished_total{finish_reason=\"cancelled\"}";

  std::atomic<bool> stop{false};
  std::atomic<int64_t> calls{0};
  std::vector<std::map<int, int64_t>> codes(kThreads);
  // Call n is cancelled before its config, after it, after some audio, or
  // once that audio is decoded (an engine stream then surely exists);
  // `wait`: only once the server has answered it (initial metadata, sent
  // when the server admits a call, or the first result).
  auto churn = [&](int t, bool wait) {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<asr::v1::Speech::Stub> stub;
    for (int64_t n = 0; !stop.load(); ++n) {
      if (n % kCallsPerChannel == 0) {
        channel = OwnChannel(server_.grpc_target());
        stub = asr::v1::Speech::NewStub(channel);
      }
      grpc::ClientContext context;
      context.set_deadline(In(10));
      auto call = stub->StreamingRecognize(&context);
      StreamingRecognizeRequest request;
      *request.mutable_streaming_config() = Config(16000, /*interim=*/true);
      const int kind = static_cast<int>(n % 4);
      bool answered = !wait;
      if (kind >= 1 && call->Write(request) && kind >= 2) {
        request.set_audio_content(reinterpret_cast<const char*>(audio.data()), audio.size() * 2);
        StreamingRecognizeResponse response;
        if (call->Write(request) && kind == 3 && wait) {
          call->Read(&response);
          answered = true;
        }
      }
      if (!answered) call->WaitForInitialMetadata();
      context.TryCancel();
      ++codes[t][call->Finish().error_code()];
      calls.fetch_add(1);
    }
  };
  // Runs the threads for `for_seconds`; returns what they did.
  auto run = [&](double for_seconds, bool wait) {
    stop = false;
    calls = 0;
    for (auto& c : codes) c.clear();
    const double cancelled_before = Metric(cancelled);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(churn, t, wait);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(static_cast<int64_t>(for_seconds * 1000)));
    stop = true;
    for (std::thread& thread : threads) thread.join();
    const double elapsed = SecondsSince(start);
    std::map<int, int64_t> total;
    for (const auto& c : codes) {
      for (const auto& [code, n] : c) total[code] += n;
    }
    // A cancelled call ends CANCELLED on the client; the stream limit may
    // refuse one while cancelled streams are torn down; nothing else.
    for (const auto& [code, n] : total) {
      EXPECT_TRUE(code == grpc::StatusCode::CANCELLED ||
                  code == grpc::StatusCode::RESOURCE_EXHAUSTED)
          << "code " << code << " x" << n;
    }
    std::map<std::string, double> metrics;
    EXPECT_TRUE(testing::WaitForIdle(server_.metrics_port(), &metrics))
        << "still open: " << metrics["oasr_grpc_streams_open"];
    std::ostringstream report;
    report << calls.load() << " calls in " << elapsed << " s by " << kThreads << " threads ("
           << static_cast<int64_t>(calls.load() / elapsed) << "/s), "
           << metrics[cancelled] - cancelled_before << " engine streams cancelled";
    return std::make_pair(metrics[cancelled] - cancelled_before, report.str());
  };

  // Warm up (the allocator and gRPC reach their working size), the baseline.
  run(1.0, /*wait=*/true);
  ExpectTranscribes(*stub_);
  ExpectIdleAndServing();
  const int64_t rss_before = RssKib(pid_);
  const int fds_before = SettledFds(pid_);

  const auto [engine_cancelled, waited] = run(seconds, /*wait=*/true);
  ExpectIdleAndServing();
  // Connections the clients closed are closed on the server too.
  const int fds_after = SettledFds(pid_);
  const int64_t rss_after = RssKib(pid_);
  std::ostringstream report;
  report << "open/cancel churn, each call answered: " << waited << "; server VmRSS " << rss_before
         << " -> " << rss_after << " KiB, fds " << fds_before << " -> " << fds_after;
  std::cout << report.str() << std::endl;
  RecordProperty("churn", report.str());
  EXPECT_GT(calls.load(), 500) << report.str();
  EXPECT_GT(engine_cancelled, calls.load() / 8) << "few calls got to an engine stream";
  // Bounds: RSS within 32 MiB of the warmed-up baseline, fds where they were
  // (give or take a /metrics connection).
  EXPECT_LE(rss_after - rss_before, 32 * 1024) << report.str();
  EXPECT_LE(fds_after, fds_before + 1) << report.str();
  ExpectTranscribes(*stub_);

  // The flood: every call drains, and the fds are back (the allocator keeps
  // the RSS the backlog took; reported, not bounded).
  const std::string flooded = run(3.0, /*wait=*/false).second;
  ExpectIdleAndServing();
  const int fds_flood = SettledFds(pid_);
  std::cout << "open/cancel flood, no call waited for: " << flooded << "; server VmRSS "
            << rss_after << " -> " << RssKib(pid_) << " KiB, fds " << fds_after << " -> "
            << fds_flood << std::endl;
  EXPECT_GT(calls.load(), 500);
  EXPECT_LE(fds_flood, fds_before + 1);
  ExpectTranscribes(*stub_);
}

// 3. Garbage and truncated HTTP/2 on raw TCP sockets.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ =
        fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~RawConnection() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return connected_; }
  // False once the server has closed the connection.
  bool Send(const std::string& bytes) {
    for (size_t at = 0; at < bytes.size();) {
      const ssize_t n = send(fd_, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return false;
      at += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads until the server closes the connection (true) or `timeout_s` passes.
  bool ReadUntilClosed(double timeout_s) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
    char buffer[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return true;  // EOF, or reset.
      received_.append(buffer, static_cast<size_t>(n));
    }
    return false;
  }
  // Whether the server's bytes hold a frame of `type` (frames from the start).
  bool ReceivedFrame(uint8_t type) const {
    for (size_t at = 0; at + 9 <= received_.size();) {
      const auto* h = reinterpret_cast<const uint8_t*>(received_.data() + at);
      if (h[3] == type) return true;
      at += 9 + ((size_t{h[0]} << 16) | (size_t{h[1]} << 8) | h[2]);
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
};

constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr uint8_t kHeaders = 1, kRstStream = 3, kSettings = 4, kGoAway = 7;

// An HTTP/2 frame header claiming `length` payload bytes.
std::string FrameHeader(uint32_t length, uint8_t type, uint8_t flags, uint32_t stream) {
  const char h[9] = {static_cast<char>(length >> 16), static_cast<char>(length >> 8),
                     static_cast<char>(length),       static_cast<char>(type),
                     static_cast<char>(flags),        static_cast<char>(stream >> 24),
                     static_cast<char>(stream >> 16), static_cast<char>(stream >> 8),
                     static_cast<char>(stream)};
  return std::string(h, 9);
}

std::string RandomBytes(std::mt19937& rng, size_t n) {
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

TEST_F(FaultTest, GarbageAndTruncatedHttp2LeaveTheServerServing) {
  Start({});
  const int port = server_.grpc_port();
  const std::string preface(kPreface, sizeof(kPreface) - 1);
  std::mt19937 rng(2106);

  // A SETTINGS frame cut short, the connection then closed by the client;
  // and one left hanging half-sent while health and a stream are served.
  {
    RawConnection cut(port);
    ASSERT_TRUE(cut.connected());
    EXPECT_TRUE(cut.Send(preface + FrameHeader(18, kSettings, 0, 0) + std::string("\0\x03\0", 3)));
  }
  RawConnection hanging(port);
  ASSERT_TRUE(hanging.connected());
  EXPECT_TRUE(hanging.Send(preface + FrameHeader(12, kSettings, 0, 0) + std::string("\0\x04", 2)));
  EXPECT_EQ(Health(channel_), HealthCheckResponse::SERVING);

  // HEADERS whose HPACK block is garbage: the stream is reset, the
  // connection closed.
  {
    RawConnection headers(port);
    ASSERT_TRUE(headers.connected());
    const std::string block = RandomBytes(rng, 48);
    headers.Send(preface + FrameHeader(0, kSettings, 0, 0) +
                 FrameHeader(static_cast<uint32_t>(block.size()), kHeaders, 0x4 | 0x1, 1) + block);
    EXPECT_TRUE(headers.ReadUntilClosed(10)) << "the server kept a connection with bad HPACK";
    EXPECT_TRUE(headers.ReceivedFrame(kRstStream) || headers.ReceivedFrame(kGoAway))
        << "the stream with bad HPACK was neither reset nor the connection ended";
  }
  // A frame header claiming 16 MiB - 1 (past the peer's max frame size).
  {
    RawConnection huge(port);
    ASSERT_TRUE(huge.connected());
    huge.Send(preface + FrameHeader(0, kSettings, 0, 0) + FrameHeader(0xffffff, 0, 0, 1) +
              RandomBytes(rng, 1000));
    EXPECT_TRUE(huge.ReadUntilClosed(10)) << "the server kept a connection with a 16 MiB frame";
  }
  // Pure random bytes, of many lengths, on connections of their own; the
  // server closes each.
  int closed = 0;
  constexpr int kRandomConnections = 24;
  for (int i = 0; i < kRandomConnections; ++i) {
    RawConnection raw(port);
    ASSERT_TRUE(raw.connected());
    raw.Send(RandomBytes(rng, size_t{1} << (i % 17)));
    if (raw.ReadUntilClosed(10)) ++closed;
  }
  EXPECT_EQ(closed, kRandomConnections) << "connections of random bytes the server kept open";
  std::cout << "random bytes: the server closed " << closed << " of " << kRandomConnections
            << " connections (1 B to 64 KiB each)" << std::endl;
  // Random bytes after a valid preface.
  {
    RawConnection after(port);
    ASSERT_TRUE(after.connected());
    after.Send(preface + RandomBytes(rng, 4096));
    EXPECT_TRUE(after.ReadUntilClosed(10));
  }

  ExpectIdleAndServing();
  EXPECT_EQ(Metric("oasr_grpc_calls_total{method=\"StreamingRecognize\"}"), 0)
      << "garbage became a call";
  ExpectTranscribes(*stub_);
  // And with the half-sent frame still hanging.
  EXPECT_TRUE(hanging.Send(std::string(2, '\0')));
  ExpectTranscribes(*stub_);
}

// 4. A message of 4 MiB + 1 byte (the server's --max-message-bytes default,
// gRPC's own default receive limit too).
TEST_F(FaultTest, MessageOverTheReceiveLimitIsResourceExhaustedOtherStreamsGoOn) {
  Start({});
  constexpr size_t kLimit = size_t{4} << 20;
  // Two other streams in real time on the same connection, through it all.
  const std::vector<int16_t> other_audio = MakeAudio(53, 4.0, 16000);
  std::vector<server::StreamOutcome> others(2);
  Threads threads;
  for (auto& outcome : others) {
    threads.all.emplace_back([&] {
      server::StreamClientOptions options;
      options.config = Config(16000, /*interim=*/true);
      options.timeout_s = 60;
      outcome = server::RunStream(*stub_, other_audio, options);
    });
  }
  ASSERT_TRUE(WaitForMetric("oasr_streams_active", 2));

  // 4 MiB exactly is received: 48 kHz LINEAR16 (43.7 s, under the 60 s of
  // --max-buffered-audio) and a 3-byte unknown field make it whole.
  {
    OpenStream at_limit(*stub_, Config(48000, /*interim=*/true));
    ASSERT_TRUE(at_limit.opened);
    StreamingRecognizeRequest request;
    request.set_audio_content(std::string(kLimit - 8, '\0'));
    request.GetReflection()->MutableUnknownFields(&request)->AddVarint(100, 0);
    ASSERT_EQ(request.ByteSizeLong(), kLimit);
    ASSERT_TRUE(at_limit.call->Write(request));
    StreamingRecognizeResponse response;
    EXPECT_TRUE(at_limit.call->Read(&response)) << "a 4 MiB message was not decoded";
    at_limit.context.TryCancel();
    at_limit.call->Finish();
  }
  // One byte more is refused by the transport, before the server reads it.
  OpenStream over(*stub_, Config(16000));
  ASSERT_TRUE(over.opened);
  StreamingRecognizeRequest request;
  request.set_audio_content(std::string(kLimit - 4, '\0'));  // 1 + 4 bytes of tag and length.
  ASSERT_EQ(request.ByteSizeLong(), kLimit + 1);
  over.call->Write(request);
  std::string finish;
  const grpc::Status status = over.Close(&finish);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("larger than max"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(finish, "");
  std::cout << "4 MiB + 1 byte: code " << status.error_code() << " '" << status.error_message()
            << "'" << std::endl;

  threads.Join();
  const std::vector<std::string> want = testing::EngineFinals(other_audio, 16000);
  for (const auto& outcome : others) {
    EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    EXPECT_EQ(outcome.finish_reason, "stop");
    EXPECT_EQ(outcome.finals, want);
  }
  ExpectIdleAndServing();
  ExpectTranscribes(*stub_);
}

// 5. A config with every field at its limit, then one past each.
TEST_F(FaultTest, ConfigAtEveryLimitTranscribesAndOnePastEachIsRefusedNamingTheField) {
  Start({});
  absl::StatusOr<decoder::SymbolTable> units =
      decoder::SymbolTable::Load(testing::SmallModelDir() + "/units.txt");
  ASSERT_TRUE(units.ok()) << units.status();
  auto units_of = [&](const std::string& phrase) {
    absl::StatusOr<std::vector<int32_t>> tokens = decoder::TokenizePhrase(phrase, *units);
    return tokens.ok() ? static_cast<int>(tokens->size()) : -1;
  };
  // "t22" is one unit of the fixture's units (t2 .. t51).
  auto repeated = [](int n) {
    std::string phrase;
    for (int i = 0; i < n; ++i) phrase += "t22";
    return phrase;
  };
  ASSERT_EQ(units_of(repeated(100)), 100);

  // 4999 phrases in one context and the 5000th, of 100 units, in another;
  // both at the largest boost.
  auto at_limit = [&](int rate) {
    asr::v1::StreamingRecognitionConfig config = Config(rate, /*interim=*/true, /*words=*/true);
    asr::v1::RecognitionConfig* c = config.mutable_config();
    c->set_audio_channel_count(1);
    c->set_max_alternatives(1024);
    asr::v1::SpeechContext* many = c->add_speech_contexts();
    for (int i = 0; i < 4999; ++i) many->add_phrases(absl::StrCat("t", 2 + i % 50));
    many->set_boost(50.0f);
    asr::v1::SpeechContext* longest = c->add_speech_contexts();
    longest->add_phrases(repeated(100));
    longest->set_boost(50.0f);
    asr::v1::EndpointingConfig* e = c->mutable_endpointing_config();
    e->set_stop_history_ms(std::numeric_limits<int32_t>::max());
    e->set_stop_history_no_speech_ms(std::numeric_limits<int32_t>::max());
    e->set_max_segment_ms(std::numeric_limits<int32_t>::max());
    e->set_stop_threshold(std::nextafter(1.0f, 0.0f));
    return config;
  };
  for (const int rate : {8000, 48000}) {
    const std::vector<int16_t> audio = MakeAudio(59, 3.0, rate);
    server::StreamOutcome got = testing::Stream(*stub_, audio, at_limit(rate));
    ASSERT_TRUE(got.status.ok()) << rate << " Hz: " << got.status.error_message();
    EXPECT_EQ(got.finish_reason, "stop") << rate;
    EXPECT_EQ(got.finals.size(), 1u) << rate << " Hz: endpointing at its limits never fires";
    int alternatives = 0;
    for (const auto& response : got.responses) {
      for (const auto& r : response.results()) {
        EXPECT_LE(r.alternatives_size(), 1024);
        if (r.is_final()) alternatives = std::max(alternatives, r.alternatives_size());
      }
    }
    EXPECT_GE(alternatives, 1) << rate;
    EXPECT_NEAR(got.responses.back().results().rbegin()->audio_processed(), 3.0, 0.25) << rate;
  }

  struct Past {
    std::string field;  // The refusal's message starts with it.
    std::function<void(asr::v1::RecognitionConfig*)> edit;
  };
  const float past_boost = std::nextafter(50.0f, 100.0f);
  const std::vector<Past> cases = {
      {"sample_rate_hertz: 7999", [](auto* c) { c->set_sample_rate_hertz(7999); }},
      {"sample_rate_hertz: 48001", [](auto* c) { c->set_sample_rate_hertz(48001); }},
      {"audio_channel_count: 2", [](auto* c) { c->set_audio_channel_count(2); }},
      {"max_alternatives: 1025", [](auto* c) { c->set_max_alternatives(1025); }},
      {"max_alternatives: -1", [](auto* c) { c->set_max_alternatives(-1); }},
      {"speech_contexts: 5001 phrases",
       [](auto* c) { c->mutable_speech_contexts(0)->add_phrases("t5"); }},
      {"speech_contexts[1].phrases[0]: 101 units",
       [&](auto* c) { c->mutable_speech_contexts(1)->set_phrases(0, repeated(101)); }},
      {"speech_contexts[1].boost",
       [&](auto* c) { c->mutable_speech_contexts(1)->set_boost(past_boost); }},
      {"endpointing_config.stop_threshold: 1",
       [](auto* c) { c->mutable_endpointing_config()->set_stop_threshold(1.0f); }},
      {"endpointing_config: times must not be negative",
       [](auto* c) { c->mutable_endpointing_config()->set_max_segment_ms(-1); }},
  };
  for (const Past& past : cases) {
    asr::v1::StreamingRecognitionConfig config = at_limit(16000);
    past.edit(config.mutable_config());
    OpenStream stream(*stub_, config);
    std::string finish;
    const grpc::Status status = stream.Close(&finish);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << past.field << ": " << status.error_message();
    EXPECT_EQ(status.error_message().rfind(past.field, 0), 0u)
        << past.field << ": '" << status.error_message() << "'";
  }
  ExpectIdleAndServing();
  ExpectTranscribes(*stub_);
}

// 6. SIGTERM with every stream slot the server has taken, at its defaults
// (--max-active-streams 64 decoding, --max-waiting-streams 256 waiting), half
// of the streams ending their audio in the grace period.
TEST_F(FaultTest, SigtermUnderFullLoadGivesEveryStreamItsFinalsOrUnavailableAndExitsZero) {
  constexpr int kActive = 64, kWaiting = 256, kStreams = kActive + kWaiting;
  constexpr double kGrace = 5.0;
  Start({"--shutdown-grace", std::to_string(kGrace)});
  // Short streams end their audio 3 s in, inside the grace; long ones cannot.
  const std::vector<int16_t> short_audio = MakeAudio(61, 3.0, 16000);
  const std::vector<std::string> short_finals = testing::EngineFinals(short_audio, 16000);
  const std::vector<int16_t> long_audio = MakeAudio(67, 30.0, 16000);
  std::vector<server::StreamOutcome> outcomes(kStreams);
  // A stream that has had a response holds a slot (a waiting one has none).
  std::vector<std::atomic<bool>> answered(kStreams);
  Threads threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.all.emplace_back([&, i] {
      server::StreamClientOptions options;
      options.config = Config(16000, /*interim=*/true);
      options.timeout_s = 60;
      options.on_response = [&answered, i](const asr::v1::StreamingRecognizeResponse&) {
        answered[i] = true;
      };
      outcomes[i] = server::RunStream(*stub_, i % 2 == 0 ? short_audio : long_audio, options);
    });
  }
  EXPECT_TRUE(WaitForMetric("oasr_streams_active", kActive)) << server_.ReadLog();
  EXPECT_TRUE(WaitForMetric("oasr_streams_waiting", kWaiting)) << server_.ReadLog();
  // Full: one more is refused.
  server::StreamOutcome refused = testing::Stream(*stub_, CheckAudio(), Config(16000));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.status.error_message();

  // The signal comes once half the slots' streams have had a result (their
  // first chunk decoded), and which those are is noted: the slots go to
  // whichever streams came first, and on a busy machine a short stream may
  // even end before the signal and give its slot to a waiting one.
  const auto answered_count = [&] {
    return std::count_if(answered.begin(), answered.end(), [](const auto& a) { return a.load(); });
  };
  for (int k = 0; k < 200 && answered_count() < kActive / 2; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<bool> decoding(kStreams);
  const auto signalled = std::chrono::steady_clock::now();
  server_.Signal(SIGTERM);
  for (int i = 0; i < kStreams; ++i) decoding[i] = answered[i];
  threads.Join();
  const int status = server_.WaitForExit(30);
  const double exit_s = SecondsSince(signalled);
  ASSERT_NE(status, -1) << server_.ReadLog();
  ASSERT_TRUE(WIFEXITED(status)) << server_.ReadLog();
  EXPECT_EQ(WEXITSTATUS(status), 0) << server_.ReadLog();
  EXPECT_LT(exit_s, kGrace + 2.0) << server_.ReadLog();

  int finished = 0, unavailable = 0, short_decoding = 0;
  for (int i = 0; i < kStreams; ++i) {
    const server::StreamOutcome& o = outcomes[i];
    const bool is_short = i % 2 == 0;
    if (is_short && decoding[i]) ++short_decoding;
    if (o.status.ok() && o.finish_reason == "stop") {
      ++finished;
      EXPECT_TRUE(is_short) << "stream " << i << " of 30 s ended 'stop' within the grace";
      EXPECT_EQ(o.finals, short_finals) << "stream " << i;
    } else if (o.status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      ++unavailable;
      EXPECT_EQ(o.finish_reason, "cancelled") << "stream " << i;
      // A short stream decoding at the signal has at most 3 s of audio left:
      // it ends within the grace.
      EXPECT_FALSE(is_short && decoding[i]) << "short stream " << i << " decoding at SIGTERM";
    } else {
      ADD_FAILURE() << "stream " << i << ": code " << o.status.error_code() << " '"
                    << o.status.error_message() << "', finish_reason '" << o.finish_reason << "'";
    }
  }
  std::cout << "SIGTERM under full load: " << kStreams << " streams (" << kActive << " decoding + "
            << kWaiting << " waiting): " << finished << " finals + OK (" << short_decoding
            << " short streams had decoded audio by the signal), " << unavailable
            << " cancelled + UNAVAILABLE; exit 0 after " << exit_s << " s" << std::endl;
  EXPECT_GE(short_decoding, kActive / 4) << "too few short streams were decoding at SIGTERM";
  EXPECT_GE(finished, short_decoding);
  EXPECT_GE(unavailable, kStreams / 2) << "every long stream is cut at the end of the grace";
}

// 7. SIGKILL of the server, and a restart on the same port.
TEST_F(FaultTest, SigkillAndRestartOnTheSamePortServesAgain) {
  Start({});
  const int port = server_.grpc_port();
  // Streams in flight when the server dies get UNAVAILABLE.
  OpenStream in_flight(*stub_, Config(16000, /*interim=*/true));
  ASSERT_TRUE(in_flight.opened);
  ASSERT_TRUE(in_flight.Send(CheckAudio().data(), CheckAudio().size()));
  StreamingRecognizeResponse response;
  ASSERT_TRUE(in_flight.call->Read(&response));
  server_.Signal(SIGKILL);
  const int status = server_.WaitForExit(10);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  std::string finish;
  EXPECT_EQ(in_flight.Close(&finish).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Health(OwnChannel("127.0.0.1:" + std::to_string(port))), -1);

  // ServerProcess asks for --port 0; a wrapper of this process's own swaps
  // in the old port and execs the same binary (same pid).
  const std::string wrapper = OwnPath("same-port.sh");
  std::ofstream(wrapper) << "#!/bin/sh\n"
                         << "address=$2\nshift 4\n"
                         << "exec " << OASR_SERVER_BINARY << " --address \"$address\" --port "
                         << port << " \"$@\"\n";
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  ServerProcess restarted;
  const auto restart = std::chrono::steady_clock::now();
  ASSERT_TRUE(restarted.Start(wrapper, {"--model-dir", testing::SmallModelDir()}))
      << restarted.error();
  EXPECT_EQ(restarted.grpc_port(), port);
  // The channel from before the kill reconnects; so does a new one.
  ASSERT_TRUE(channel_->WaitForConnected(In(30))) << restarted.ReadLog();
  EXPECT_EQ(Health(channel_), HealthCheckResponse::SERVING);
  std::cout << "restart on port " << port << ": SERVING to the channel from before the kill "
            << SecondsSince(restart) << " s after the restart" << std::endl;
  auto fresh = asr::v1::Speech::NewStub(OwnChannel(restarted.grpc_target()));
  ExpectTranscribes(*fresh);
  ExpectTranscribes(*stub_);
  std::filesystem::remove(wrapper);
}

// 8. The K/V pool at capacity. The server has no pool-size flag: the pool is
// max-active-streams x the blocks one stream may hold (the fixture's model
// keeps its whole history: ListModels.max_stream_seconds), so two slots fill
// it when both streams reach the longest stream.
TEST_F(FaultTest, KvPoolAtCapacityRefusesNewStreamsAndEndsFullOnesWithLength) {
  Start({"--max-active-streams", "2", "--max-waiting-streams", "0", "--max-buffered-audio", "200",
         "--stream-idle-timeout", "0"});
  grpc::ClientContext context;
  asr::v1::ListModelsResponse models;
  ASSERT_TRUE(stub_->ListModels(&context, {}, &models).ok());
  const double longest = models.models(0).max_stream_seconds();
  ASSERT_GT(longest, 0) << "the fixture's model is expected to keep its whole history";
  const double total = Metric("oasr_kv_pool_blocks_total");
  const int64_t per_stream =
      std::lround(longest * 1000 / models.models(0).chunk_ms());  // A block a chunk.
  EXPECT_EQ(total, 2 * per_stream);

  // Two streams send exactly the longest stream's audio, fast, and wait.
  const std::vector<int16_t> audio = MakeAudio(71, longest + 2.0, 16000);
  const size_t at_capacity = static_cast<size_t>(longest * 16000);
  std::vector<std::unique_ptr<OpenStream>> full;
  for (int i = 0; i < 2; ++i) {
    full.push_back(std::make_unique<OpenStream>(*stub_, Config(16000)));
    ASSERT_TRUE(full.back()->opened);
    for (size_t at = 0; at < at_capacity; at += 16000) {
      ASSERT_TRUE(full.back()->Send(audio.data() + at, std::min<size_t>(16000, at_capacity - at)));
    }
  }
  // The pool fills up to the chunk each stream's look-ahead still waits for.
  double used = 0;
  for (int i = 0; i < 1500 && used < total - 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    used = Metric("oasr_kv_pool_blocks_used");
  }
  std::cout << "K/V pool at capacity: " << used << " of " << total
            << " blocks used by 2 streams of " << longest << " s" << std::endl;
  EXPECT_GE(used, total - 2) << "of " << total;
  EXPECT_LE(used, total);
  EXPECT_EQ(Metric("oasr_streams_active"), 2);

  // A new stream is refused; the full ones go on, past capacity, to "length".
  server::StreamOutcome refused = testing::Stream(*stub_, CheckAudio(), Config(16000));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.status.error_message();
  for (auto& stream : full) {
    stream->Send(audio.data() + at_capacity, audio.size() - at_capacity);
    std::string finish;
    const grpc::Status status = stream->Close(&finish);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(finish, "length");
  }
  EXPECT_EQ(Metric("oasr_streams_finished_total{finish_reason=\"length\"}"), 2);
  EXPECT_EQ(Metric("oasr_streams_finished_total{finish_reason=\"error\"}"), 0);
  ExpectIdleAndServing();
  ExpectTranscribes(*stub_);
}

}  // namespace
}  // namespace oasr
