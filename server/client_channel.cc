#include "server/client_channel.h"

#include <fstream>
#include <sstream>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace oasr::server {
namespace {

absl::Status ReadPem(const char* flag, const std::string& path, std::string* out) {
  if (path.empty()) return absl::OkStatus();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot read '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  *out = text.str();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ChannelOptions& options) {
  const bool tls = options.tls || !options.ca_file.empty() || !options.cert_file.empty() ||
                   !options.key_file.empty() || !options.server_name.empty();
  grpc::ChannelArguments arguments;
  if (options.own_connection) arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (!tls) {
    return grpc::CreateCustomChannel(options.target, grpc::InsecureChannelCredentials(), arguments);
  }
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key: give both (or neither)");
  }
  grpc::SslCredentialsOptions ssl;
  for (const auto& [flag, path, out] :
       {std::tuple{"--tls-ca", &options.ca_file, &ssl.pem_root_certs},
        std::tuple{"--tls-cert", &options.cert_file, &ssl.pem_cert_chain},
        std::tuple{"--tls-key", &options.key_file, &ssl.pem_private_key}}) {
    if (absl::Status status = ReadPem(flag, *path, out); !status.ok()) return status;
  }
  if (!options.server_name.empty()) {
    arguments.SetSslTargetNameOverride(options.server_name);
  }
  return grpc::CreateCustomChannel(options.target, grpc::SslCredentials(ssl), arguments);
}

void AddBearerToken(const std::string& token, grpc::ClientContext* context) {
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
}

}  // namespace oasr::server
