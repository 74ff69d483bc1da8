// Test helpers shared by the server's recognition tests: deterministic audio,
// the engine run in-process as the reference, one-call streaming, and
// /metrics scraping. All of them run against the small random model the
// PyTorch reference writes (fixture encoder_golden).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "decoder/ctc_decoder.h"
#include "oasr/asr/v1/asr.grpc.pb.h"
#include "server/server_options.h"
#include "server/stream_client.h"

namespace oasr::testing {

// The fixture's model directory (small_ln).
std::string SmallModelDir();

// Options of an in-process server of the small model "small" on a free
// loopback port, without metrics, with a 1 s shutdown grace.
server::ServerOptions SmallModelServerOptions();

// Now plus `seconds`, as a gRPC deadline.
std::chrono::system_clock::time_point In(double seconds);

// Deterministic speech-like audio: two tones under a slow envelope, noise.
std::vector<int16_t> MakeAudio(uint32_t seed, double seconds, int rate);

// The final transcripts of `audio` through the engine in this process,
// configured as the server's defaults (adds a gtest failure on error), with
// the CTC search `method`.
std::vector<std::string> EngineFinals(
    const std::vector<int16_t>& audio, int rate,
    decoder::SearchMethod method = decoder::SearchMethod::kPrefixBeam);

// Writes `bytes` to a file under the test's temporary directory; returns its path.
std::string WriteTemp(const std::string& name, const std::string& bytes);

// A LINEAR16 streaming config at `rate`.
asr::v1::StreamingRecognitionConfig Config(int rate, bool interim = false, bool words = false);

// Streams `audio` as fast as possible through `stub` (deadline 120 s).
server::StreamOutcome Stream(asr::v1::Speech::Stub& stub, const std::vector<int16_t>& audio,
                             const asr::v1::StreamingRecognitionConfig& config);

// Scrapes /metrics into name{labels} -> value, checking every line's syntax;
// sets `*error` (and returns what it has) when the answer is missing or bad.
std::map<std::string, double> ScrapeMetrics(int port, std::string* error);

// Waits (bounded, 10 s) until the server's open streams and the engine's
// active and waiting streams and used blocks are back to zero; `*last` holds
// the last scrape.
bool WaitForIdle(int metrics_port, std::map<std::string, double>* last);

}  // namespace oasr::testing
