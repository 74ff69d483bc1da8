// The server's TLS: its certificate chain and key (PEM), and for mutual TLS
// the CA that client certificates must chain to. gRPC asks for the
// certificates at every new connection's handshake (its SSL config fetcher),
// so Reload() -- on SIGHUP -- changes what new connections are served while
// connections already open keep their session and their streams.
//
// Why not grpc::experimental::FileWatcherCertificateProvider: it re-reads
// the files on its own timer, with no way to force a read, so a SIGHUP could
// not say when the new certificate takes effect, and it would serve a key and
// certificate caught half-written. Here a reload reads the files once,
// checks them (both parse, the key matches the certificate, the certificate
// has not expired) and either serves them from the next handshake on or
// keeps the old ones and says why.
#pragma once

#include <grpc/grpc_security.h>
#include <grpcpp/security/server_credentials.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"

namespace oasr::server {

struct TlsFiles {
  std::string cert_path;       // PEM certificate chain, the server's first.
  std::string key_path;        // PEM private key of the first certificate.
  std::string client_ca_path;  // PEM CA bundle; empty: no client certificates asked.
};

class ReloadableTlsCredentials {
 public:
  // Reads and checks the files; errors name the file and what is wrong.
  static absl::StatusOr<std::unique_ptr<ReloadableTlsCredentials>> Create(TlsFiles files);
  ~ReloadableTlsCredentials();
  ReloadableTlsCredentials(const ReloadableTlsCredentials&) = delete;
  ReloadableTlsCredentials& operator=(const ReloadableTlsCredentials&) = delete;

  // Credentials for ServerBuilder::AddListeningPort. They call back into
  // this object at every handshake: it must outlive the grpc::Server.
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials();

  // Reads the files again; when they check out, connections from the next
  // handshake on get them. Otherwise the served ones stay and the error says
  // why. Thread-safe.
  absl::Status Reload();

  // "subject CN=..., expires Jan 1 00:00:00 2030 GMT[, client certificates
  // required]", for the log.
  std::string Describe() const;

 private:
  struct Pem {
    std::string cert_chain;
    std::string private_key;
    std::string client_ca;
    std::string description;
  };
  explicit ReloadableTlsCredentials(TlsFiles files) : files_(std::move(files)) {}
  absl::StatusOr<Pem> ReadFiles() const;
  // gRPC's SSL config fetcher: the current files when they changed since
  // the last call.
  static grpc_ssl_certificate_config_reload_status Fetch(
      void* self, grpc_ssl_server_certificate_config** config);

  const TlsFiles files_;
  mutable std::mutex mu_;
  Pem pem_;
  uint64_t generation_ = 1;  // Bumped by every successful Reload.
  uint64_t fetched_ = 0;     // The generation gRPC has.
};

}  // namespace oasr::server
