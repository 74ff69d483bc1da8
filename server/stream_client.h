// The client side of one StreamingRecognize call, for oasr-client and the
// load mode: sends audio in fixed-size messages (in real time or as fast as
// possible) while a reader thread collects the results and their latencies.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "oasr/asr/v1/asr.grpc.pb.h"

namespace oasr::server {

struct StreamClientOptions {
  asr::v1::StreamingRecognitionConfig config;  // Sent first; sample rate must match the audio.
  int chunk_ms = 100;                          // Audio per message.
  bool realtime = true;                        // Pace the messages at the audio's rate.
  double timeout_s = 300.0;                    // Deadline of the whole call.
  std::string token;                           // Bearer token; empty: none sent.
  // Called for every response as it arrives (on the reader thread).
  std::function<void(const asr::v1::StreamingRecognizeResponse&)> on_response;
};

struct StreamOutcome {
  grpc::Status status;
  std::vector<std::string> finals;  // Best transcript of each final result.
  int interim_results = 0;
  std::string finish_reason;  // From the last result.
  // Per response: receive time minus the send time of the message that
  // completed the audio it covers (audio_processed), in ms.
  std::vector<double> chunk_latency_ms;
  // End of audio (half-close) to the last response, in ms; -1 if none came.
  double final_latency_ms = -1.0;
  std::vector<asr::v1::StreamingRecognizeResponse> responses;
};

// Streams `samples` (16-bit mono at config.config.sample_rate_hertz) through
// `stub` and returns what came back. Blocks until the call ends. Thread-safe
// (each call uses its own context).
StreamOutcome RunStream(asr::v1::Speech::Stub& stub, const std::vector<int16_t>& samples,
                        const StreamClientOptions& options);

}  // namespace oasr::server
