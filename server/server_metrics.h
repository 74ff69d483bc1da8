// The server's own counters (calls, errors by gRPC code) and the Prometheus
// text exposition of them together with the engine's statistics.
#pragma once

#include <grpcpp/support/status.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/engine_stats.h"

namespace oasr::server {

// Why a call was refused before it started (CallAdmission).
enum class Refusal : int {
  kMissingToken = 0,  // UNAUTHENTICATED: no authorization metadata.
  kInvalidToken,      // UNAUTHENTICATED: not "Bearer <token>", or a token not in the file.
  kTokenQuota,        // PERMISSION_DENIED: the token holds its max_streams.
  kPeerLimit,         // RESOURCE_EXHAUSTED: the peer address holds --max-streams-per-peer.
  kOpenRate,          // RESOURCE_EXHAUSTED: above --stream-open-rate.
  kCount,
};

// The reason label of oasr_refusals_total.
inline const char* RefusalName(Refusal reason) {
  static const char* const kNames[] = {"missing_token", "invalid_token", "token_quota",
                                       "peer_limit", "open_rate"};
  return kNames[static_cast<int>(reason)];
}

// Where a streaming message's time goes, to locate a stall: a read's wait
// (started -> delivered: the client, or the transport), the reaction to it
// (delivered -> the next read started: decoding, the push to the engine,
// the call's lock), a response write's wait (started -> done: the transport
// and the client's flow-control window), and the event dispatcher's wait
// (posted -> running) and run (responses built, writes started).
enum class Stage : int {
  kReadWait = 0,
  kReaction,
  kWriteWait,
  kDispatchWait,
  kDispatchRun,
  kCount
};

// The stage label of oasr_grpc_stage_seconds_total.
inline const char* StageName(Stage stage) {
  static const char* const kNames[] = {"read_wait", "reaction", "write_wait", "dispatch_wait",
                                       "dispatch_run"};
  return kNames[static_cast<int>(stage)];
}

// Total time and count of one stage. Thread-safe (relaxed atomics).
struct StageClock {
  std::atomic<int64_t> ns{0};
  std::atomic<int64_t> count{0};
  void Add(int64_t elapsed_ns) {
    ns.fetch_add(elapsed_ns, std::memory_order_relaxed);
    count.fetch_add(1, std::memory_order_relaxed);
  }
};

// Counters written by the call reactors. Thread-safe (atomics).
struct ServerMetrics {
  std::atomic<int64_t> streaming_calls_active{0};  // StreamingRecognize calls not yet done.
  std::atomic<int64_t> recognize_calls_active{0};  // Recognize calls not yet answered.
  std::atomic<int64_t> streaming_calls_total{0};
  std::atomic<int64_t> recognize_calls_total{0};
  // Streams the server ended because their client sent nothing for
  // --stream-idle-timeout seconds (also counted under OUT_OF_RANGE).
  std::atomic<int64_t> streams_idle_timed_out{0};
  // Streams that reached --max-stream-duration (they end with "length").
  std::atomic<int64_t> streams_max_duration{0};
  // Interim responses never sent because a newer one replaced them while
  // the client was behind on reading.
  std::atomic<int64_t> interim_results_coalesced{0};
  // From the engine's event (StreamEvent::pushed) to the write of the
  // response it became done: the dispatcher, responses queued behind a
  // write in flight, and the transport up to the client's flow control.
  // Coalesced interims are not counted.
  scheduler::Histogram response_delivery_s{
      std::vector<double>{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}};
  // Per-stage time of the streaming calls (Stage).
  std::array<StageClock, static_cast<size_t>(Stage::kCount)> stages;
  StageClock& stage(Stage s) { return stages[static_cast<size_t>(s)]; }
  // Calls refused by CallAdmission, by reason (also counted under their code).
  std::array<std::atomic<int64_t>, static_cast<size_t>(Refusal::kCount)> refusals{};
  // Calls that ended with each non-OK gRPC status code (index = code).
  std::array<std::atomic<int64_t>, 17> errors{};

  void CountRefusal(Refusal reason) { refusals[static_cast<size_t>(reason)].fetch_add(1); }

  // Counts `status` when it is not OK.
  void CountStatus(const grpc::Status& status) {
    if (!status.ok()) {
      const int code = static_cast<int>(status.error_code());
      if (code > 0 && code < static_cast<int>(errors.size())) errors[code].fetch_add(1);
    }
  }
};

// What one scrape shows beyond the counters.
struct MetricsSnapshotInput {
  const ServerMetrics* server = nullptr;           // Required.
  const scheduler::EngineStats* engine = nullptr;  // Null while no model is served.
  std::string model_name;
  std::string model_dir;
  std::string device;
  bool serving = false;
  double model_load_seconds = 0.0;
};

// The Prometheus text exposition (format 0.0.4) of everything in `input`,
// every name prefixed oasr_. Thread-safe as long as `input`'s pointers live.
std::string RenderPrometheus(const MetricsSnapshotInput& input);

// Prometheus label values escape backslash, double quote and newline.
std::string EscapeLabel(const std::string& value);

}  // namespace oasr::server
