#include "server/tls_credentials.h"

#include <grpc/grpc.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace oasr::server {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

absl::StatusOr<std::string> ReadFile(const char* field, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(field, ": cannot read '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return std::string(data, size > 0 ? static_cast<size_t>(size) : 0);
}

std::string Subject(X509* cert) {
  Bio out(BIO_new(BIO_s_mem()));
  X509_NAME_print_ex(out.get(), X509_get_subject_name(cert), 0, XN_FLAG_ONELINE);
  return BioText(out.get());
}

std::string NotAfter(X509* cert) {
  Bio out(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(out.get(), X509_get0_notAfter(cert));
  return BioText(out.get());
}

// The certificates of a PEM bundle; at least one, or an error naming `field`.
absl::Status CheckBundle(const char* field, const std::string& path, const std::string& pem,
                         Cert* first) {
  Bio bio = MemoryBio(pem);
  int count = 0;
  while (Cert cert{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)}) {
    if (count++ == 0 && first != nullptr) *first = std::move(cert);
  }
  if (count == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", path, "' holds no PEM certificate"));
  }
  return absl::OkStatus();
}

// The C credentials gRPC's C++ API has no wrapper for (an SSL config
// fetcher), as grpc::ServerCredentials.
class FetcherServerCredentials final : public grpc::ServerCredentials {
 public:
  FetcherServerCredentials(grpc_ssl_client_certificate_request_type request,
                           grpc_ssl_server_certificate_config_callback fetch, void* user_data) {
    grpc_ssl_server_credentials_options* options =
        grpc_ssl_server_credentials_create_options_using_config_fetcher(request, fetch, user_data);
    credentials_ = grpc_ssl_server_credentials_create_with_options(options);
  }
  ~FetcherServerCredentials() override { grpc_server_credentials_release(credentials_); }

  // Tokens are checked in the handlers (server/access_control.h), so a
  // processor is never set; one would be ignored.
  void SetAuthMetadataProcessor(const std::shared_ptr<grpc::AuthMetadataProcessor>&) override {}

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), credentials_);
  }

  grpc_server_credentials* credentials_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ReloadableTlsCredentials>> ReloadableTlsCredentials::Create(
    TlsFiles files) {
  std::unique_ptr<ReloadableTlsCredentials> tls(new ReloadableTlsCredentials(std::move(files)));
  absl::StatusOr<Pem> pem = tls->ReadFiles();
  if (!pem.ok()) return pem.status();
  tls->pem_ = std::move(*pem);
  return tls;
}

ReloadableTlsCredentials::~ReloadableTlsCredentials() = default;

absl::StatusOr<ReloadableTlsCredentials::Pem> ReloadableTlsCredentials::ReadFiles() const {
  Pem pem;
  absl::StatusOr<std::string> cert = ReadFile("tls_cert", files_.cert_path);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFile("tls_key", files_.key_path);
  if (!key.ok()) return key.status();
  pem.cert_chain = std::move(*cert);
  pem.private_key = std::move(*key);
  Cert leaf;
  if (absl::Status status = CheckBundle("tls_cert", files_.cert_path, pem.cert_chain, &leaf);
      !status.ok()) {
    return status;
  }
  Bio key_bio = MemoryBio(pem.private_key);
  Key private_key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (private_key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls_key: '", files_.key_path, "' holds no unencrypted PEM private key"));
  }
  if (X509_check_private_key(leaf.get(), private_key.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("tls_key: '", files_.key_path,
                                                   "' is not the key of the certificate in '",
                                                   files_.cert_path, "'"));
  }
  if (X509_cmp_current_time(X509_get0_notAfter(leaf.get())) <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls_cert: '", files_.cert_path, "' expired on ", NotAfter(leaf.get())));
  }
  pem.description =
      absl::StrCat("subject ", Subject(leaf.get()), ", expires ", NotAfter(leaf.get()));
  if (!files_.client_ca_path.empty()) {
    absl::StatusOr<std::string> ca = ReadFile("tls_client_ca", files_.client_ca_path);
    if (!ca.ok()) return ca.status();
    pem.client_ca = std::move(*ca);
    if (absl::Status status =
            CheckBundle("tls_client_ca", files_.client_ca_path, pem.client_ca, nullptr);
        !status.ok()) {
      return status;
    }
    absl::StrAppend(&pem.description, ", client certificates required");
  }
  return pem;
}

std::shared_ptr<grpc::ServerCredentials> ReloadableTlsCredentials::ServerCredentials() {
  return std::make_shared<FetcherServerCredentials>(
      files_.client_ca_path.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                    : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY,
      &ReloadableTlsCredentials::Fetch, this);
}

absl::Status ReloadableTlsCredentials::Reload() {
  absl::StatusOr<Pem> pem = ReadFiles();
  if (!pem.ok()) return pem.status();
  std::lock_guard<std::mutex> lock(mu_);
  pem_ = std::move(*pem);
  ++generation_;
  return absl::OkStatus();
}

std::string ReloadableTlsCredentials::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pem_.description;
}

grpc_ssl_certificate_config_reload_status ReloadableTlsCredentials::Fetch(
    void* self, grpc_ssl_server_certificate_config** config) {
  auto* tls = static_cast<ReloadableTlsCredentials*>(self);
  std::lock_guard<std::mutex> lock(tls->mu_);
  if (tls->fetched_ == tls->generation_) return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;
  const grpc_ssl_pem_key_cert_pair pair = {tls->pem_.private_key.c_str(),
                                           tls->pem_.cert_chain.c_str()};
  // The config copies the strings. gRPC (1.51) asserts that a fetched
  // config has roots even when no client certificate is asked for; then the
  // server's own chain stands in, unused (no certificate request is sent).
  *config = grpc_ssl_server_certificate_config_create(
      tls->pem_.client_ca.empty() ? tls->pem_.cert_chain.c_str() : tls->pem_.client_ca.c_str(),
      &pair, 1);
  tls->fetched_ = tls->generation_;
  return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW;
}

}  // namespace oasr::server
