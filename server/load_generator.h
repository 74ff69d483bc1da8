// The load generator behind `oasr-client load`: many concurrent
// StreamingRecognize calls paced in real time, driven asynchronously (one
// completion queue per thread, many streams per channel, several channels),
// with per-stream accounting: chunk latency, final latency, status codes,
// audio processed against audio sent, and the generator's own lateness and
// CPU so that a run says whether the server or the generator was the limit.
// Soak behaviours (streams cancelled mid-way, clients that stop reading for a
// while, clients that go silent without closing) are fractions of the streams.
#pragma once

#include <grpcpp/grpcpp.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "oasr/asr/v1/asr.grpc.pb.h"

namespace oasr::server {

// Milliseconds in log-spaced buckets (1 % wide from 10 us to ~17 min):
// percentiles of millions of samples in 15 KB, mergeable across threads.
class LatencyHistogram {
 public:
  void Add(double ms);
  void Merge(const LatencyHistogram& other);
  int64_t count() const { return count_; }
  double max() const { return max_; }
  double mean() const { return count_ == 0 ? 0.0 : sum_ / static_cast<double>(count_); }
  // The value below which a fraction p of the samples lie (upper edge of
  // its bucket, so never below the true percentile by more than 1 %); 0
  // when empty.
  double Percentile(double p) const;

 private:
  static constexpr int kBuckets = 1850;
  std::array<int64_t, kBuckets> buckets_{};
  int64_t count_ = 0;
  double sum_ = 0.0;
  double max_ = 0.0;
};

// Audio a stream sends: 16-bit mono at `rate`.
struct LoadClip {
  std::string name;
  int rate = 16000;
  std::vector<int16_t> samples;
};

// What a stream does besides sending its audio and reading every result.
enum class StreamBehaviour {
  kNormal,  // Sends all its audio, half-closes, reads to the end.
  kCancel,  // Cancels the call at a random point of its audio.
  kStall,   // Stops reading at a random point for stall_seconds, then reads on.
  kVanish,  // Goes silent at a random point: sends nothing more and never
            // half-closes, cancels or reads (the server must end it).
};
const char* StreamBehaviourName(StreamBehaviour behaviour);

struct LoadOptions {
  // Calls go to these channels in turn (at least one); each should hold a
  // connection of its own (ChannelOptions::own_connection).
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  // Stream i sends clips[i % clips.size()] (at least one, each non-empty),
  // resampled to the stream's rate.
  std::vector<LoadClip> clips;
  // Sent first; sample_rate_hertz is set per stream.
  asr::v1::StreamingRecognitionConfig config;
  std::string token;  // Bearer token; empty: none.

  int concurrency = 1;      // Streams open at once; a slot starts its next stream
                            // when one ends.
  double duration_s = 10;   // Slots start new streams until then (0: one each).
  int64_t max_streams = 0;  // At most this many streams in all (0: no limit).
  double ramp_s = 0;        // The first streams' starts spread over this long.
  int threads = 1;          // Completion-queue threads.
  int chunk_ms = 100;       // Audio per message.
  bool realtime = true;     // Message k leaves (k + 1) x chunk_ms after the
                            // stream's start, from a fixed clock; false: each
                            // as soon as the previous one is written.
  double timeout_s = 600;   // Deadline of each call.

  // Stream lengths uniform in [min_seconds, max_seconds] (the clip repeated
  // or cut); both 0: the whole clip.
  double min_seconds = 0, max_seconds = 0;
  // Each stream picks one of these rates (Hz, 8000-48000); empty: its clip's.
  std::vector<int> rates;
  // Fractions of the streams with each behaviour (their sum at most 1).
  double cancel_fraction = 0, stall_fraction = 0, vanish_fraction = 0;
  double stall_seconds = 10;  // How long a stalled client stops reading.
  uint64_t seed = 1;

  // A result's audio_processed may fall short of the audio sent by this much
  // (one encoder frame of the model) and still account for all of it.
  double frame_s = 0.04;
  // Audio past audio_processed that the result needed (the model's
  // look-ahead): chunk latency runs from the message that completed it.
  double lookahead_s = 0;
  // Chunk latency p99 above this is reported as the server falling behind.
  double latency_bound_ms = 200;
  // Keep every stream's record (LoadReport::records, with its transcript):
  // memory grows with the streams run (~0.5 KB each, ~0.5 GiB over the
  // 9-minute hold of 20,000 streams at a time); without them the report's
  // counts are kept as streams end.
  bool keep_records = false;

  absl::Status Validate() const;
};

// One stream's account.
struct StreamRecord {
  int64_t index = 0;  // Order of starting.
  StreamBehaviour behaviour = StreamBehaviour::kNormal;
  int rate = 0;
  double start_s = 0;  // Since the run began.
  double end_s = 0;    // When its status arrived.
  double audio_sent_s = 0;
  double audio_processed_s = 0;  // The largest audio_processed received.
  int responses = 0;
  bool final_result = false;  // A result with finish_reason came.
  std::string finish_reason;
  std::string transcript;        // The finals' best transcripts, joined by spaces.
  double final_latency_ms = -1;  // Half-close to the closing result; -1: none.
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string error;  // The status message when not OK.
};

struct LoadReport {
  double wall_s = 0;
  int64_t streams = 0;
  std::map<std::string, int64_t> codes;       // Status code name -> streams.
  std::map<std::string, int64_t> behaviours;  // Behaviour name -> streams.
  // Streams whose outcome is wrong for their behaviour: a normal or stalled
  // stream not OK, without its closing result, or (finish_reason "stop")
  // whose audio_processed falls short of the audio sent by more than
  // frame_s; a cancelled one not CANCELLED.
  int64_t failed_streams = 0;
  int64_t audio_lost_streams = 0;  // Of those: audio not accounted for.
  int64_t no_final_streams = 0;    // Of those: OK without a closing result.
  double audio_sent_s = 0, audio_processed_s = 0;
  // Per response covering new audio (normal streams): from sending the
  // message that completed the audio it needed (audio_processed plus the
  // look-ahead) to receiving it.
  LatencyHistogram chunk_latency;
  LatencyHistogram final_latency;  // Half-close to the closing result (normal streams).
  LatencyHistogram send_lag;       // A message's send time past its schedule.
  int64_t messages = 0;
  double cpu_s = 0;           // The process's user + system time.
  double busiest_thread = 0;  // Highest CPU share of one completion-queue thread.
  // Each line: something that limited or spoiled the run (the server behind
  // real time, the generator behind, streams failed); empty: it held.
  std::vector<std::string> warnings;
  // Every stream, in starting order, with LoadOptions::keep_records.
  std::vector<StreamRecord> records;

  std::string Summary(const LoadOptions& options) const;  // Human-readable.
  std::string ToJson() const;                             // Without the records.
};

// The clock of `model` (the first served model when empty), from
// ListModels; false when the server does not say.
struct ModelClock {
  double frame_s = 0;      // An encoder frame: LoadOptions::frame_s.
  double lookahead_s = 0;  // LoadOptions::lookahead_s.
};
bool GetModelClock(const std::shared_ptr<grpc::Channel>& channel, const std::string& model,
                   const std::string& token, ModelClock* clock);

// One JSON object per line per record (index, behaviour, rate, times, audio
// sent and processed, final result, latency, status).
std::string RecordsToJsonLines(const std::vector<StreamRecord>& records);

// The connections a load of `concurrency` streams on `threads` threads
// spreads over by default: one per 40 streams (an HTTP/2 connection's work
// is done one piece at a time: on the H200 box 20,000 streams fell behind on
// 64 connections and held on 512), at least one per thread, at most 4,096.
int DefaultLoadChannels(int threads, int concurrency);

// Runs the load and returns its report; INVALID_ARGUMENT for bad options.
// Blocks until every stream has ended (each bounded by timeout_s).
absl::StatusOr<LoadReport> RunLoad(const LoadOptions& options);

}  // namespace oasr::server
