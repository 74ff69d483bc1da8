#include "server/access_control.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace oasr::server {
namespace {

constexpr absl::string_view kHashPrefix = "sha256:";
constexpr absl::string_view kBearer = "bearer ";

int CountOf(const std::map<std::string, int>& counts, const std::string& key) {
  auto it = counts.find(key);
  return it == counts.end() ? 0 : it->second;
}

bool IsHex64(absl::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) != 0;
         });
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text, absl::string_view source) {
  TokenTable table;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    const std::string where = absl::StrCat(source, " line ", line_number);
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    std::string hash;
    if (absl::StartsWith(fields[0], kHashPrefix)) {
      const absl::string_view hex = fields[0].substr(kHashPrefix.size());
      if (!IsHex64(hex)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": sha256: needs the token's SHA-256 as 64 hex digits"));
      }
      hash = absl::AsciiStrToLower(hex);
    } else {
      hash = Sha256Hex(std::string_view(fields[0].data(), fields[0].size()));
    }
    TokenEntry entry;
    entry.name = absl::StrCat("line ", line_number);
    for (size_t i = 1; i < fields.size(); ++i) {
      std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(fields[i], '=');
      if (kv.first == "name" && !kv.second.empty()) {
        entry.name = std::string(kv.second);
      } else if (kv.first == "max_streams") {
        if (!absl::SimpleAtoi(kv.second, &entry.max_streams) || entry.max_streams < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": max_streams='", kv.second, "' is not a count >= 0"));
        }
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": field ", i + 1,
                         " is neither name=NAME nor max_streams=N (a token has no spaces)"));
      }
    }
    if (!table.by_hash_.emplace(hash, std::move(entry)).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": the same token as an earlier line"));
    }
  }
  if (table.by_hash_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no token (every call would fail)"));
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("tokens_file: cannot read '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), absl::StrCat("tokens_file '", path, "'"));
}

const TokenEntry* TokenTable::Find(std::string_view token) const {
  auto it = by_hash_.find(Sha256Hex(token));
  return it == by_hash_.end() ? nullptr : &it->second;
}

std::string PeerAddress(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  if (colon == std::string::npos || colon + 1 == peer.size() ||
      peer.find(':') == colon /* "unix:path" */) {
    return peer;
  }
  const std::string_view port = std::string_view(peer).substr(colon + 1);
  if (!std::all_of(port.begin(), port.end(),
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; })) {
    return peer;
  }
  return peer.substr(0, colon);
}

CallAdmission::Lease& CallAdmission::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = other.owner_;
    token_key_ = std::move(other.token_key_);
    peer_key_ = std::move(other.peer_key_);
    other.owner_ = nullptr;
  }
  return *this;
}

void CallAdmission::Lease::Release() {
  if (owner_ != nullptr) owner_->Release(token_key_, peer_key_);
  owner_ = nullptr;
}

CallAdmission::CallAdmission(AdmissionLimits limits, ServerMetrics* metrics)
    : limits_(limits), metrics_(metrics), bucket_at_(std::chrono::steady_clock::now()) {
  if (limits_.stream_open_burst <= 0) {
    limits_.stream_open_burst = std::max(1.0, std::ceil(limits_.stream_open_rate));
  }
  bucket_ = limits_.stream_open_burst;
}

void CallAdmission::SetTokens(std::shared_ptr<const TokenTable> tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_ = std::move(tokens);
}

bool CallAdmission::requires_token() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_ != nullptr;
}

grpc::Status CallAdmission::Refuse(Refusal reason, grpc::StatusCode code, std::string message) {
  metrics_->CountRefusal(reason);
  return grpc::Status(code, std::move(message));
}

grpc::Status CallAdmission::CheckToken(const grpc::ServerContextBase& call, std::string* hash,
                                       TokenEntry* entry) {
  std::shared_ptr<const TokenTable> tokens;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tokens = tokens_;
  }
  if (tokens == nullptr) return grpc::Status::OK;
  const auto& metadata = call.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return Refuse(Refusal::kMissingToken, grpc::StatusCode::UNAUTHENTICATED,
                  "missing token: send metadata 'authorization: Bearer <token>'");
  }
  const absl::string_view value(it->second.data(), it->second.size());
  if (value.size() <= kBearer.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kBearer.size()), kBearer)) {
    return Refuse(Refusal::kInvalidToken, grpc::StatusCode::UNAUTHENTICATED,
                  "invalid token: the authorization metadata must be 'Bearer <token>'");
  }
  const absl::string_view stripped = absl::StripAsciiWhitespace(value.substr(kBearer.size()));
  const std::string_view token(stripped.data(), stripped.size());
  const TokenEntry* found = tokens->Find(token);
  if (found == nullptr) {
    return Refuse(Refusal::kInvalidToken, grpc::StatusCode::UNAUTHENTICATED,
                  "invalid token: not in the server's tokens file");
  }
  *hash = Sha256Hex(token);
  *entry = *found;
  return grpc::Status::OK;
}

grpc::Status CallAdmission::Authenticate(const grpc::ServerContextBase& call) {
  std::string hash;
  TokenEntry entry;
  return CheckToken(call, &hash, &entry);
}

bool CallAdmission::TakeOpenLocked() {
  if (limits_.stream_open_rate <= 0) return true;
  const auto now = std::chrono::steady_clock::now();
  bucket_ = std::min(
      limits_.stream_open_burst,
      bucket_ + std::chrono::duration<double>(now - bucket_at_).count() * limits_.stream_open_rate);
  bucket_at_ = now;
  if (bucket_ < 1.0) return false;
  bucket_ -= 1.0;
  return true;
}

grpc::Status CallAdmission::AdmitStream(const grpc::ServerContextBase& call, Lease* lease) {
  std::string hash;
  TokenEntry entry;
  if (grpc::Status status = CheckToken(call, &hash, &entry); !status.ok()) return status;
  const std::string peer = limits_.max_streams_per_peer > 0 ? PeerAddress(call.peer()) : "";
  const int token_limit = entry.max_streams > 0 ? entry.max_streams : limits_.max_streams_per_token;
  std::lock_guard<std::mutex> lock(mu_);
  if (!hash.empty() && token_limit > 0 && CountOf(streams_by_token_, hash) >= token_limit) {
    return Refuse(Refusal::kTokenQuota, grpc::StatusCode::PERMISSION_DENIED,
                  absl::StrCat("token '", entry.name, "' already holds its ", token_limit,
                               " concurrent streams (its quota)"));
  }
  if (!peer.empty() && CountOf(streams_by_peer_, peer) >= limits_.max_streams_per_peer) {
    return Refuse(Refusal::kPeerLimit, grpc::StatusCode::RESOURCE_EXHAUSTED,
                  absl::StrCat(peer, " already holds ", limits_.max_streams_per_peer,
                               " concurrent streams (--max-streams-per-peer); retry later"));
  }
  if (!TakeOpenLocked()) {
    return Refuse(Refusal::kOpenRate, grpc::StatusCode::RESOURCE_EXHAUSTED,
                  absl::StrCat("streams are opened faster than ", limits_.stream_open_rate,
                               " per second (--stream-open-rate); retry later"));
  }
  lease->Release();
  lease->owner_ = this;
  if (!hash.empty()) {
    ++streams_by_token_[hash];
    lease->token_key_ = hash;
  }
  if (!peer.empty()) {
    ++streams_by_peer_[peer];
    lease->peer_key_ = peer;
  }
  return grpc::Status::OK;
}

void CallAdmission::Release(const std::string& token_key, const std::string& peer_key) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto [counts, key] :
       {std::pair{&streams_by_token_, &token_key}, std::pair{&streams_by_peer_, &peer_key}}) {
    if (key->empty()) continue;
    auto it = counts->find(*key);
    if (it != counts->end() && --it->second <= 0) counts->erase(it);
  }
}

}  // namespace oasr::server
