// Who may call the server and how much: bearer tokens from a tokens file,
// and the limits on streams an operator sets (per token, per peer address,
// the rate of stream opens). Every recognition call of every API
// (oasr.asr.v1, Riva's, Google's) goes through one CallAdmission; health and
// reflection do not (probes carry no token).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/server_metrics.h"

namespace oasr::server {

// The lowercase hex SHA-256 of `data` (OpenSSL's libcrypto).
std::string Sha256Hex(std::string_view data);

// One accepted token.
struct TokenEntry {
  // For logs and refusals; never the token. Default: "line N".
  std::string name;
  // Concurrent recognition calls this token may hold; 0: the server's
  // --max-streams-per-token (0 there too: no limit).
  int max_streams = 0;
};

// The tokens file, parsed. One token per line:
//   TOKEN [name=NAME] [max_streams=N]
//   sha256:HEX [name=NAME] [max_streams=N]   (HEX: the token's SHA-256, 64 hex digits)
// Blank lines and lines starting with '#' are skipped. Tokens are kept only
// as their SHA-256, so a plain token and its hash are the same entry.
class TokenTable {
 public:
  // Parses `text`; errors name `source` and the line (never its token).
  static absl::StatusOr<TokenTable> Parse(absl::string_view text, absl::string_view source);
  // Reads and parses the file at `path`.
  static absl::StatusOr<TokenTable> Load(const std::string& path);

  // The entry of `token`, or null. The pointer lives as long as the table.
  const TokenEntry* Find(std::string_view token) const;
  size_t size() const { return by_hash_.size(); }

 private:
  std::unordered_map<std::string, TokenEntry> by_hash_;  // Hex SHA-256 -> entry.
};

// What an operator limits; 0 turns a limit off.
struct AdmissionLimits {
  int max_streams_per_token = 0;   // Default for tokens without max_streams.
  int max_streams_per_peer = 0;    // Per client IP address (the port is ignored).
  double stream_open_rate = 0.0;   // Recognition calls opened per second, server-wide.
  double stream_open_burst = 0.0;  // Bucket size; 0: the rate rounded up, at least 1.
};

// Admits or refuses calls. Thread-safe; every refusal is counted in
// ServerMetrics::refusals by reason.
class CallAdmission {
 public:
  // A recognition call's share of the limits: released when destroyed (or
  // moved from and reset). Default-constructed: holds nothing.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { Release(); }
    void Release();

   private:
    friend class CallAdmission;
    CallAdmission* owner_ = nullptr;  // Not owned; outlives the lease.
    std::string token_key_;           // Empty: no token counted.
    std::string peer_key_;            // Empty: no peer counted.
  };

  // `metrics` (not owned) must outlive this.
  CallAdmission(AdmissionLimits limits, ServerMetrics* metrics);

  // Tokens from now on (a reload); null: no token needed. Calls admitted
  // before keep their leases, counted under their token's hash.
  void SetTokens(std::shared_ptr<const TokenTable> tokens);
  bool requires_token() const;

  // For calls that open no engine stream (server info, models): OK, or
  // UNAUTHENTICATED without a valid `authorization: Bearer` token.
  grpc::Status Authenticate(const grpc::ServerContextBase& call);
  // For recognition calls: the token, then its quota (PERMISSION_DENIED),
  // the peer's limit and the open rate (RESOURCE_EXHAUSTED: retry later).
  // On OK `*lease` holds the call's share until it is released.
  grpc::Status AdmitStream(const grpc::ServerContextBase& call, Lease* lease);

 private:
  // Finds the call's token; on success `*hash` is its key (empty without a
  // table) and `*entry` its entry (null without a table).
  grpc::Status CheckToken(const grpc::ServerContextBase& call, std::string* hash,
                          TokenEntry* entry);
  grpc::Status Refuse(Refusal reason, grpc::StatusCode code, std::string message);
  void Release(const std::string& token_key, const std::string& peer_key);
  // Takes one open from the bucket if there is one; under mu_.
  bool TakeOpenLocked();

  AdmissionLimits limits_;  // Set in the constructor.
  ServerMetrics* const metrics_;
  mutable std::mutex mu_;
  std::shared_ptr<const TokenTable> tokens_;
  std::map<std::string, int> streams_by_token_;
  std::map<std::string, int> streams_by_peer_;
  double bucket_ = 0.0;
  std::chrono::steady_clock::time_point bucket_at_;
};

// "ipv4:10.0.0.1:5555" -> "ipv4:10.0.0.1", "ipv6:[::1]:80" -> "ipv6:[::1]";
// what is not address:port stays as it is.
std::string PeerAddress(const std::string& peer);

}  // namespace oasr::server
