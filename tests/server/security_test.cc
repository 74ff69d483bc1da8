// TLS, mutual TLS, bearer tokens and the operator's limits (issue 21,
// parts 1-3), through real oasr-server subprocesses on loopback and the
// real clients (the C++ library, oasr-client, the Python client).
// Certificates are made at test time by the openssl CLI
// (make_test_certs.sh); every test skips, saying why, without it. Servers
// without a model where a refusal or an info call is enough; with the small
// random model (fixture encoder_golden) where a stream must be recognized.
// Every new flag is given through its OASR_* variable in at least one test.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "google/cloud/speech/v1/speech.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "nvidia/riva/asr/asr.grpc.pb.h"
#include "oasr/asr/v1/asr.grpc.pb.h"
#include "server/client_channel.h"
#include "server/stream_client.h"
#include "tests/server/recognition_helpers.h"
#include "tests/server/server_process.h"

namespace oasr {
namespace {

using testing::In;
using testing::RunCommand;
using testing::ServerProcess;

constexpr char kAliceToken[] = "alice-plain-token-5b1f";
constexpr char kBobToken[] = "bob-hashed-token-9c2e";

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A folder of this test process's own: ctest runs every case as a process of
// its own, in parallel, so no two may share a path.
// Each is removed when the process ends.
std::string ProcessTempDir(const std::string& name) {
  struct Folders {
    ~Folders() {
      std::error_code ignored;
      for (const std::string& dir : made) std::filesystem::remove_all(dir, ignored);
    }
    std::vector<std::string> made;
  };
  static Folders folders;
  const std::string dir = ::testing::TempDir() + "/" + name + "-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  folders.made.push_back(dir);
  return dir;
}

// The certificates of make_test_certs.sh, made once per test process; empty
// (and `*why` set) when they cannot be made.
const std::string& CertDir(std::string* why) {
  static std::string reason;
  static const std::string dir = [] {
    if (RunCommand("command -v openssl >/dev/null 2>&1").first != 0) {
      reason = "the openssl CLI is not installed (it makes the test certificates)";
      return std::string();
    }
    const std::string out = ProcessTempDir("oasr-security-certs");
    auto [code, log] = RunCommand("sh " + std::string(OASR_SOURCE_DIR) +
                                  "/tests/server/make_test_certs.sh " + out + " 2>&1");
    if (code != 0) {
      reason = "make_test_certs.sh failed: " + log;
      return std::string();
    }
    return out;
  }();
  *why = reason;
  return dir;
}

// Sets variables for the servers this test starts (children inherit them);
// unsets them when it goes.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, std::string>> values) {
    for (const auto& [name, value] : values) {
      setenv(name, value.c_str(), 1);
      names_.emplace_back(name);
    }
  }
  ~ScopedEnv() {
    for (const std::string& name : names_) unsetenv(name.c_str());
  }

 private:
  std::vector<std::string> names_;
};

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    certs_ = CertDir(&why);
    if (certs_.empty()) GTEST_SKIP() << why;
  }

  std::string Cert(const std::string& name) const { return certs_ + "/" + name; }

  // A TLS channel on a connection of its own (no subchannel shared with
  // another channel), trusting `ca`, with a client certificate when given.
  std::shared_ptr<grpc::Channel> TlsChannel(const ServerProcess& server, const std::string& ca,
                                            const std::string& client = "") const {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadText(Cert(ca + ".pem"));
    if (!client.empty()) {
      ssl.pem_cert_chain = ReadText(Cert(client + ".pem"));
      ssl.pem_private_key = ReadText(Cert(client + ".key"));
    }
    grpc::ChannelArguments arguments;
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel(server.grpc_target(), grpc::SslCredentials(ssl), arguments);
  }

  std::string certs_;
};

// A plaintext channel; `own_connection`: on a connection of its own.
std::shared_ptr<grpc::Channel> PlainChannel(const ServerProcess& server,
                                            bool own_connection = false) {
  grpc::ChannelArguments arguments;
  if (own_connection) arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(server.grpc_target(), grpc::InsecureChannelCredentials(),
                                   arguments);
}

// GetServerInfo with `token`; `*common_name` gets the CN of the certificate
// the server presented (empty over plaintext).
grpc::Status Info(const std::shared_ptr<grpc::Channel>& channel, const std::string& token = "",
                  std::string* common_name = nullptr) {
  auto stub = asr::v1::Speech::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(In(10));
  server::AddBearerToken(token, &context);
  asr::v1::ServerInfo info;
  grpc::Status status = stub->GetServerInfo(&context, {}, &info);
  if (common_name != nullptr && context.auth_context() != nullptr) {
    for (const grpc::string_ref& cn :
         context.auth_context()->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
      *common_name = std::string(cn.data(), cn.size());
    }
  }
  return status;
}

grpc::Status ListModels(const std::shared_ptr<grpc::Channel>& channel, const std::string& token) {
  auto stub = asr::v1::Speech::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(In(10));
  server::AddBearerToken(token, &context);
  asr::v1::ListModelsResponse models;
  return stub->ListModels(&context, {}, &models);
}

// A StreamingRecognize held open without its first message. Open() returns
// once the server has answered the open (it sends initial metadata when it
// admits a stream, a status when it refuses one); Close() half-closes and
// returns the final status: INVALID_ARGUMENT ("ended before its first
// message") for a stream that was admitted, the refusal for one that was
// not.
class HeldStream {
 public:
  HeldStream(asr::v1::Speech::Stub& stub, const std::string& token) {
    context_.set_deadline(In(60));
    server::AddBearerToken(token, &context_);
    call_ = stub.StreamingRecognize(&context_);
    call_->WaitForInitialMetadata();
  }
  ~HeldStream() {
    if (call_ != nullptr) context_.TryCancel();
  }
  grpc::Status Close() {
    call_->WritesDone();
    grpc::Status status = call_->Finish();
    call_.reset();
    return status;
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<asr::v1::StreamingRecognizeRequest,
                                           asr::v1::StreamingRecognizeResponse>>
      call_;
};

bool Admitted(const grpc::Status& closed) {
  return closed.error_code() == grpc::StatusCode::INVALID_ARGUMENT;
}

double Metric(const ServerProcess& server, const std::string& name) {
  std::string error;
  std::map<std::string, double> values = testing::ScrapeMetrics(server.metrics_port(), &error);
  EXPECT_TRUE(error.empty()) << error;
  auto it = values.find(name);
  EXPECT_NE(it, values.end()) << name << " is not in /metrics";
  return it == values.end() ? -1 : it->second;
}

std::string Refusals(const std::string& reason) {
  return "oasr_refusals_total{reason=\"" + reason + "\"}";
}

std::string ClientCommand(const ServerProcess& server, const std::string& flags) {
  return "timeout 60 " + std::string(OASR_CLIENT_BINARY) + " --server " + server.grpc_target() +
         " " + flags + " 2>&1";
}

std::string PythonClientCommand(const ServerProcess& server, const std::string& flags) {
  return "timeout 120 /usr/bin/python3 -B " + std::string(OASR_SOURCE_DIR) +
         "/tools/python_client/oasr_client.py --stubs-dir " + ::testing::TempDir() +
         "/py_stubs --server " + server.grpc_target() + " " + flags + " 2>&1";
}

TEST_F(SecurityTest, TlsServesTlsOnlyAndClientsVerifyTheServer) {
  ServerProcess server;
  {
    ScopedEnv env({{"OASR_TLS_CERT", Cert("server.pem")}, {"OASR_TLS_KEY", Cert("server.key")}});
    ASSERT_TRUE(server.Start(OASR_SERVER_BINARY, {})) << server.error();
  }
  std::string cn;
  grpc::Status status = Info(TlsChannel(server, "ca"), "", &cn);
  EXPECT_TRUE(status.ok()) << status.error_message() << server.ReadLog();
  EXPECT_EQ(cn, "server");
  // Health over TLS too.
  {
    auto health = grpc::health::v1::Health::NewStub(TlsChannel(server, "ca"));
    grpc::ClientContext context;
    context.set_deadline(In(10));
    grpc::health::v1::HealthCheckResponse response;
    EXPECT_TRUE(health->Check(&context, {}, &response).ok());
  }
  // Plaintext to the TLS port fails; so does a client trusting another CA.
  EXPECT_EQ(Info(PlainChannel(server)).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Info(TlsChannel(server, "wrong-ca")).error_code(), grpc::StatusCode::UNAVAILABLE);

  // The clients' flags.
  auto [code, out] = RunCommand(ClientCommand(server, "--tls-ca " + Cert("ca.pem") + " info"));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"version\""), std::string::npos) << out;
  auto [wrong_code, wrong_out] =
      RunCommand(ClientCommand(server, "--tls-ca " + Cert("wrong-ca.pem") + " info"));
  EXPECT_EQ(wrong_code, 1) << wrong_out;
  auto [plain_code, plain_out] = RunCommand(ClientCommand(server, "info"));
  EXPECT_EQ(plain_code, 1) << plain_out;
  auto [py_code, py_out] = RunCommand(PythonClientCommand(
      server, "--tls-ca " + Cert("ca.pem") + " --tls-server-name localhost models"));
  EXPECT_EQ(py_code, 0) << py_out;
  EXPECT_NE(py_out.find("{"), std::string::npos) << py_out;
  auto [py_plain_code, py_plain_out] = RunCommand(PythonClientCommand(server, "models"));
  EXPECT_EQ(py_plain_code, 1) << py_plain_out;
}

TEST_F(SecurityTest, MutualTlsRefusesMissingForeignAndExpiredClientCertificates) {
  ServerProcess server;
  {
    ScopedEnv env({{"OASR_TLS_CLIENT_CA", Cert("ca.pem")}});
    ASSERT_TRUE(server.Start(OASR_SERVER_BINARY,
                             {"--tls-cert", Cert("server.pem"), "--tls-key", Cert("server.key")}))
        << server.error();
  }
  EXPECT_TRUE(Info(TlsChannel(server, "ca", "client")).ok()) << server.ReadLog();
  EXPECT_EQ(Info(TlsChannel(server, "ca")).error_code(), grpc::StatusCode::UNAVAILABLE)
      << "a client without a certificate got through";
  EXPECT_EQ(Info(TlsChannel(server, "ca", "wrong-client")).error_code(),
            grpc::StatusCode::UNAVAILABLE)
      << "a certificate from a CA the server does not trust got through";
  EXPECT_EQ(Info(TlsChannel(server, "ca", "expired-client")).error_code(),
            grpc::StatusCode::UNAVAILABLE)
      << "an expired client certificate got through";

  const std::string ca = " --tls-ca " + Cert("ca.pem");
  const std::string client =
      " --tls-cert " + Cert("client.pem") + " --tls-key " + Cert("client.key");
  auto [code, out] = RunCommand(ClientCommand(server, ca + client + " info"));
  EXPECT_EQ(code, 0) << out;
  auto [no_cert_code, no_cert_out] = RunCommand(ClientCommand(server, ca + " info"));
  EXPECT_EQ(no_cert_code, 1) << no_cert_out;
  auto [py_code, py_out] = RunCommand(PythonClientCommand(server, ca + client + " models"));
  EXPECT_EQ(py_code, 0) << py_out;
  auto [py_no_cert_code, py_no_cert_out] = RunCommand(PythonClientCommand(server, ca + " models"));
  EXPECT_EQ(py_no_cert_code, 1) << py_no_cert_out;
}

TEST_F(SecurityTest, BadCertificatesStopTheStartNamingTheFile) {
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const Case cases[] = {
      {{"--tls-cert", Cert("expired-server.pem"), "--tls-key", Cert("expired-server.key")},
       "expired"},
      {{"--tls-cert", Cert("server.pem"), "--tls-key", Cert("server2.key")},
       "is not the key of the certificate"},
      {{"--tls-cert", Cert("server.pem")}, "give both or neither"},
      {{"--tls-cert", Cert("server.pem"), "--tls-key", Cert("server.key"), "--tls-client-ca",
        Cert("server.key")},
       "holds no PEM certificate"},
  };
  for (const Case& c : cases) {
    ServerProcess server;
    EXPECT_FALSE(server.Start(OASR_SERVER_BINARY, c.args, 10));
    EXPECT_NE(server.error().find(c.expected), std::string::npos) << server.error();
  }
}

// A tokens file with a plain token (quota 1) and a hashed one (the server's
// default quota), given through OASR_TOKENS_FILE.
class TokensTest : public SecurityTest {
 protected:
  void SetUp() override {
    SecurityTest::SetUp();
    if (IsSkipped()) return;
    tokens_file_ = ProcessTempDir("oasr-tokens") + "/tokens.txt";
    std::ofstream(tokens_file_) << "# test tokens\n"
                                << kAliceToken << " name=alice max_streams=1\n\n"
                                << "sha256:" << HashOf(kBobToken) << " name=bob\n";
    ScopedEnv env({{"OASR_TOKENS_FILE", tokens_file_}, {"OASR_MAX_STREAMS_PER_TOKEN", "2"}});
    ASSERT_TRUE(server_.Start(OASR_SERVER_BINARY, {"--log-level", "debug"})) << server_.error();
    channel_ = PlainChannel(server_);
  }

  static std::string HashOf(const std::string& token) {
    auto [code, out] = RunCommand("printf %s '" + token + "' | openssl dgst -sha256 -r");
    EXPECT_EQ(code, 0);
    return out.substr(0, 64);
  }

  std::string tokens_file_;
  ServerProcess server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(TokensTest, CallsNeedAValidTokenHealthAndReflectionStayOpen) {
  EXPECT_EQ(ListModels(channel_, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ListModels(channel_, "not-a-token").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Info(channel_, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(ListModels(channel_, kAliceToken).ok());
  EXPECT_TRUE(ListModels(channel_, kBobToken).ok()) << "the hashed token was not accepted";
  EXPECT_TRUE(Info(channel_, kBobToken).ok());
  {
    // A scheme other than Bearer.
    auto stub = asr::v1::Speech::NewStub(channel_);
    grpc::ClientContext context;
    context.set_deadline(In(20));
    context.AddMetadata("authorization", std::string("Basic ") + kAliceToken);
    asr::v1::ListModelsResponse models;
    EXPECT_EQ(stub->ListModels(&context, {}, &models).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }

  // The streaming call of every API on the port, and the unary ones.
  auto speech = asr::v1::Speech::NewStub(channel_);
  EXPECT_EQ(HeldStream(*speech, "").Close().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  {
    auto riva = nvidia::riva::asr::RivaSpeechRecognition::NewStub(channel_);
    grpc::ClientContext context;
    context.set_deadline(In(20));
    nvidia::riva::asr::RivaSpeechRecognitionConfigResponse config;
    EXPECT_EQ(riva->GetRivaSpeechRecognitionConfig(&context, {}, &config).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    grpc::ClientContext stream_context;
    stream_context.set_deadline(In(20));
    auto stream = riva->StreamingRecognize(&stream_context);
    stream->WritesDone();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
    grpc::ClientContext ok_context;
    ok_context.set_deadline(In(20));
    server::AddBearerToken(kBobToken, &ok_context);
    EXPECT_TRUE(riva->GetRivaSpeechRecognitionConfig(&ok_context, {}, &config).ok());
  }
  {
    auto google = google::cloud::speech::v1::Speech::NewStub(channel_);
    grpc::ClientContext context;
    context.set_deadline(In(20));
    google::cloud::speech::v1::RecognizeResponse response;
    EXPECT_EQ(google->Recognize(&context, {}, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    // With a token the call gets as far as the model (none is served here).
    grpc::ClientContext ok_context;
    ok_context.set_deadline(In(20));
    server::AddBearerToken(kAliceToken, &ok_context);
    EXPECT_EQ(google->Recognize(&ok_context, {}, &response).error_code(),
              grpc::StatusCode::UNAVAILABLE);
  }

  // Health and reflection without a token.
  {
    auto health = grpc::health::v1::Health::NewStub(channel_);
    grpc::ClientContext context;
    context.set_deadline(In(20));
    grpc::health::v1::HealthCheckResponse response;
    EXPECT_TRUE(health->Check(&context, {}, &response).ok());
    grpc::Status listed;
    const std::set<std::string> services = testing::ReflectedServices(channel_, &listed);
    EXPECT_TRUE(listed.ok()) << listed.error_message();
    EXPECT_TRUE(services.count("oasr.asr.v1.Speech"));
  }

  // The clients' --token and OASR_TOKEN.
  auto [code, out] =
      RunCommand("OASR_TOKEN=" + std::string(kBobToken) + " " + ClientCommand(server_, "models"));
  EXPECT_EQ(code, 0) << out;
  auto [no_code, no_out] = RunCommand(ClientCommand(server_, "models"));
  EXPECT_EQ(no_code, 1) << no_out;
  EXPECT_NE(no_out.find("(code 16)"), std::string::npos) << no_out;  // UNAUTHENTICATED
  auto [py_code, py_out] =
      RunCommand(PythonClientCommand(server_, "--token " + std::string(kAliceToken) + " models"));
  EXPECT_EQ(py_code, 0) << py_out;
  auto [py_no_code, py_no_out] = RunCommand(PythonClientCommand(server_, "models"));
  EXPECT_EQ(py_no_code, 1) << py_no_out;
  EXPECT_NE(py_no_out.find("UNAUTHENTICATED"), std::string::npos) << py_no_out;

  EXPECT_GE(Metric(server_, Refusals("missing_token")), 5);
  EXPECT_GE(Metric(server_, Refusals("invalid_token")), 2);

  // Nothing of a token reached the log (debug level), in any form.
  const std::string log = server_.ReadLog();
  for (const std::string secret :
       {std::string(kAliceToken), std::string(kBobToken), std::string("not-a-token")}) {
    EXPECT_EQ(log.find(secret), std::string::npos) << secret << " is in the log:\n" << log;
  }
  EXPECT_EQ(log.find(HashOf(kBobToken)), std::string::npos) << log;
}

TEST_F(TokensTest, StreamsBeyondATokensQuotaArePermissionDenied) {
  auto speech = asr::v1::Speech::NewStub(channel_);
  // alice's line says max_streams=1.
  HeldStream alice(*speech, kAliceToken);
  HeldStream alice_again(*speech, kAliceToken);
  EXPECT_EQ(alice_again.Close().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // bob has the server's --max-streams-per-token (2, from OASR_MAX_STREAMS_PER_TOKEN).
  HeldStream bob1(*speech, kBobToken);
  HeldStream bob2(*speech, kBobToken);
  HeldStream bob3(*speech, kBobToken);
  EXPECT_EQ(bob3.Close().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // A Recognize counts against the quota too.
  {
    grpc::ClientContext context;
    context.set_deadline(In(20));
    server::AddBearerToken(kAliceToken, &context);
    asr::v1::RecognizeResponse response;
    EXPECT_EQ(speech->Recognize(&context, {}, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  // The quota frees with the stream.
  EXPECT_TRUE(Admitted(alice.Close()));
  HeldStream alice_later(*speech, kAliceToken);
  EXPECT_TRUE(Admitted(alice_later.Close()));
  EXPECT_TRUE(Admitted(bob1.Close()));
  EXPECT_TRUE(Admitted(bob2.Close()));
  EXPECT_EQ(Metric(server_, Refusals("token_quota")), 3);
}

TEST_F(TokensTest, SighupReloadsTheTokensFile) {
  std::ofstream(tokens_file_) << "new-token-after-reload name=carol\n";
  const size_t reloads = server_.ReadLog().find("tokens: 1 accepted");
  EXPECT_EQ(reloads, std::string::npos);
  server_.Signal(SIGHUP);
  ASSERT_TRUE(server_.WaitForLog("tokens: 1 accepted")) << server_.ReadLog();
  EXPECT_TRUE(ListModels(channel_, "new-token-after-reload").ok());
  EXPECT_EQ(ListModels(channel_, kAliceToken).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // A file that does not parse leaves the tokens as they were.
  std::ofstream(tokens_file_) << "token name=x max_streams=many\n";
  server_.Signal(SIGHUP);
  ASSERT_TRUE(server_.WaitForLog("reload failed")) << server_.ReadLog();
  EXPECT_NE(server_.ReadLog().find("line 1: max_streams='many'"), std::string::npos);
  EXPECT_TRUE(ListModels(channel_, "new-token-after-reload").ok());
  EXPECT_EQ(server_.ReadLog().find("new-token-after-reload"), std::string::npos);
}

TEST_F(SecurityTest, PerPeerLimitAndOpenRateRefuseWithResourceExhausted) {
  {
    ServerProcess server;
    {
      ScopedEnv env({{"OASR_MAX_STREAMS_PER_PEER", "2"},
                     {"OASR_NO_REFLECTION", "1"},
                     {"OASR_METRICS_ADDRESS", "127.0.0.1"}});
      ASSERT_TRUE(server.Start(OASR_SERVER_BINARY, {})) << server.error();
    }
    EXPECT_NE(server.ReadLog().find("metrics on http://127.0.0.1:"), std::string::npos);
    auto speech = asr::v1::Speech::NewStub(PlainChannel(server));
    HeldStream first(*speech, "");
    HeldStream second(*speech, "");
    // Another channel is another connection from the same address.
    auto other = asr::v1::Speech::NewStub(PlainChannel(server, /*own_connection=*/true));
    HeldStream third(*other, "");
    const grpc::Status refused = third.Close();
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(refused.error_message().find("--max-streams-per-peer"), std::string::npos);
    EXPECT_TRUE(Admitted(first.Close()));
    HeldStream fourth(*other, "");
    EXPECT_TRUE(Admitted(fourth.Close()));
    EXPECT_TRUE(Admitted(second.Close()));
    EXPECT_EQ(Metric(server, Refusals("peer_limit")), 1);
    EXPECT_EQ(Metric(server, Refusals("open_rate")), 0);
  }
  {
    // One open per 1000 s after a burst of 2: the third open is refused
    // however slowly this machine runs.
    ServerProcess server;
    {
      ScopedEnv env({{"OASR_STREAM_OPEN_RATE", "0.001"}, {"OASR_STREAM_OPEN_BURST", "2"}});
      ASSERT_TRUE(server.Start(OASR_SERVER_BINARY, {})) << server.error();
    }
    auto speech = asr::v1::Speech::NewStub(PlainChannel(server));
    EXPECT_TRUE(Admitted(HeldStream(*speech, "").Close()));
    EXPECT_TRUE(Admitted(HeldStream(*speech, "").Close()));
    const grpc::Status refused = HeldStream(*speech, "").Close();
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(refused.error_message().find("--stream-open-rate"), std::string::npos);
    grpc::ClientContext context;
    context.set_deadline(In(20));
    asr::v1::RecognizeResponse response;
    EXPECT_EQ(speech->Recognize(&context, {}, &response).error_code(),
              grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_EQ(Metric(server, Refusals("open_rate")), 2);
    EXPECT_EQ(Metric(server, Refusals("peer_limit")), 0);
    EXPECT_EQ(Metric(server, "oasr_errors_total{code=\"RESOURCE_EXHAUSTED\"}"), 2);
  }
}

// With the small random model: streams that are recognized.
class ModelSecurityTest : public SecurityTest {};

TEST_F(ModelSecurityTest, SighupServesTheNewCertificateWhileAnOpenStreamKeepsRunning) {
  // The server reads copies the test replaces.
  const std::string dir = ProcessTempDir("oasr-reload-certs");
  const std::string cert = dir + "/tls.pem", key = dir + "/tls.key";
  auto install = [&](const std::string& cert_from, const std::string& key_from) {
    // Written beside, then renamed: the server never reads half a file.
    std::filesystem::copy_file(Cert(cert_from), cert + ".new",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(Cert(key_from), key + ".new",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::rename(cert + ".new", cert);
    std::filesystem::rename(key + ".new", key);
  };
  install("server.pem", "server.key");
  ServerProcess server;
  ASSERT_TRUE(server.Start(OASR_SERVER_BINARY, {"--model-dir", testing::SmallModelDir(),
                                                "--tls-cert", cert, "--tls-key", key}))
      << server.error();

  const std::vector<int16_t> audio = testing::MakeAudio(21, 4.0, 16000);
  const std::vector<std::string> want = testing::EngineFinals(audio, 16000);
  ASSERT_FALSE(want.empty());
  auto old_channel = TlsChannel(server, "ca");
  auto stub = asr::v1::Speech::NewStub(old_channel);
  grpc::ClientContext context;
  context.set_deadline(In(120));
  auto call = stub->StreamingRecognize(&context);
  asr::v1::StreamingRecognizeRequest request;
  *request.mutable_streaming_config() = testing::Config(16000);
  ASSERT_TRUE(call->Write(request));
  const size_t step = 1600;  // 100 ms messages.
  auto send = [&](size_t from, size_t to) {
    for (size_t at = from; at < to; at += step) {
      request.set_audio_content(reinterpret_cast<const char*>(audio.data() + at),
                                std::min(step, to - at) * 2);
      ASSERT_TRUE(call->Write(request));
    }
  };
  send(0, audio.size() / 2);

  install("server2.pem", "server2.key");
  server.Signal(SIGHUP);
  ASSERT_TRUE(server.WaitForLog("TLS: new connections get subject CN = server2"))
      << server.ReadLog();
  std::string cn;
  EXPECT_TRUE(Info(TlsChannel(server, "ca"), "", &cn).ok());
  EXPECT_EQ(cn, "server2") << "a new connection still got the old certificate";

  // A key that is not the certificate's: refused, the last good pair stays.
  install("server.pem", "server2.key");
  server.Signal(SIGHUP);
  ASSERT_TRUE(server.WaitForLog("reload failed")) << server.ReadLog();
  EXPECT_NE(server.ReadLog().find("is not the key of the certificate"), std::string::npos);
  cn.clear();
  EXPECT_TRUE(Info(TlsChannel(server, "ca"), "", &cn).ok());
  EXPECT_EQ(cn, "server2");

  // The stream opened before both reloads finishes on its connection.
  send(audio.size() / 2, audio.size());
  call->WritesDone();
  std::vector<std::string> finals;
  std::string finish_reason;
  asr::v1::StreamingRecognizeResponse response;
  while (call->Read(&response)) {
    for (const auto& result : response.results()) {
      if (result.is_final() && result.alternatives_size() > 0) {
        finals.push_back(result.alternatives(0).transcript());
      }
      if (!result.finish_reason().empty()) finish_reason = result.finish_reason();
    }
  }
  const grpc::Status status = call->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message() << server.ReadLog();
  EXPECT_EQ(finals, want);
  EXPECT_EQ(finish_reason, "stop");
  cn.clear();
  EXPECT_TRUE(Info(old_channel, "", &cn).ok());
  EXPECT_EQ(cn, "server") << "the old connection was replaced";
}

TEST_F(ModelSecurityTest, MaxStreamDurationEndsWithTheTranscriptSoFarAndLength) {
  ServerProcess server;
  {
    ScopedEnv env({{"OASR_MAX_STREAM_DURATION", "2"}});
    ASSERT_TRUE(server.Start(OASR_SERVER_BINARY, {"--model-dir", testing::SmallModelDir()}))
        << server.error();
  }
  const std::vector<int16_t> audio = testing::MakeAudio(5, 5.0, 16000);
  const std::vector<int16_t> first(audio.begin(), audio.begin() + 2 * 16000);
  const std::vector<std::string> want = testing::EngineFinals(first, 16000);
  ASSERT_FALSE(want.empty());
  auto stub = asr::v1::Speech::NewStub(PlainChannel(server));
  server::StreamOutcome got = testing::Stream(*stub, audio, testing::Config(16000));
  ASSERT_TRUE(got.status.ok()) << got.status.error_message() << server.ReadLog();
  EXPECT_EQ(got.finish_reason, "length");
  EXPECT_EQ(got.finals, want);
  ASSERT_FALSE(got.responses.empty());
  const auto& last = got.responses.back().results();
  ASSERT_GT(last.size(), 0);
  EXPECT_LE(last.rbegin()->audio_processed(), 2.0f + 1e-3f);

  // At 8 kHz the limit is the same 2 s of audio.
  const std::vector<int16_t> audio8k = testing::MakeAudio(6, 4.0, 8000);
  server::StreamOutcome got8k = testing::Stream(*stub, audio8k, testing::Config(8000));
  ASSERT_TRUE(got8k.status.ok()) << got8k.status.error_message();
  EXPECT_EQ(got8k.finish_reason, "length");
  EXPECT_EQ(got8k.finals,
            testing::EngineFinals({audio8k.begin(), audio8k.begin() + 2 * 8000}, 8000));

  // Shorter streams are untouched.
  const std::vector<int16_t> short_audio = testing::MakeAudio(8, 1.5, 16000);
  server::StreamOutcome short_got = testing::Stream(*stub, short_audio, testing::Config(16000));
  ASSERT_TRUE(short_got.status.ok());
  EXPECT_EQ(short_got.finish_reason, "stop");
  EXPECT_EQ(Metric(server, "oasr_grpc_stream_max_duration_total"), 2);
}

}  // namespace
}  // namespace oasr
