// How a client reaches an oasr-server: plaintext or TLS (optionally with a
// client certificate for mutual TLS), and a bearer token per call. Shared by
// oasr-client and the tests.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace oasr::server {

struct ChannelOptions {
  std::string target = "127.0.0.1:50051";  // HOST:PORT.
  // TLS; implied by any of the files below.
  bool tls = false;
  std::string ca_file;    // PEM roots the server's certificate must chain to; empty: the system's.
  std::string cert_file;  // PEM client certificate chain, for mutual TLS (with key_file).
  std::string key_file;   // PEM private key of cert_file.
  // The name the server's certificate is checked against instead of the
  // target's host (e.g. "localhost" when dialling 127.0.0.1).
  std::string server_name;
  // A connection of this channel's own, not shared with other channels to
  // the same target (a load generator spreads its streams over several).
  bool own_connection = false;
};

// A channel to options.target; errors name the file that cannot be read,
// or a client certificate without its key.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ChannelOptions& options);

// Adds `authorization: Bearer <token>` to the call; nothing for an empty token.
void AddBearerToken(const std::string& token, grpc::ClientContext* context);

}  // namespace oasr::server
