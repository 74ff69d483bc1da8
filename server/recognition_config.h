// RecognitionConfig (the API's request) to the engine's StreamRequest, and
// the decoder's results back to the API's messages. Every refusal is an
// INVALID_ARGUMENT naming the field and why.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "decoder/decode_result.h"
#include "oasr/asr/v1/asr.pb.h"
#include "scheduler/engine_config.h"
#include "server/audio_codec.h"

namespace oasr::server {

class ServedModel;

// A validated configuration.
struct ParsedConfig {
  scheduler::StreamRequest request;  // For Engine::OpenStream.
  SampleEncoding encoding = SampleEncoding::kLinear16;
  bool wav = false;  // encoding WAV (Recognize only).
  bool word_time_offsets = false;
  int max_alternatives = 1;
};

// Checks `config` against `model` and builds the engine request: encoding
// (WAV only when `allow_wav`), sample_rate_hertz in [8000, 48000] (0: the
// model's), audio_channel_count 0 or 1, language_code and model naming what
// is served, max_alternatives in [0, 1024], speech_contexts (tokenized with
// the model's units; boost in (0, 50]), endpointing_config. Builds the
// phrase graph, so it costs time in proportion to the phrases. Thread-safe.
absl::StatusOr<ParsedConfig> ParseRecognitionConfig(const asr::v1::RecognitionConfig& config,
                                                    const ServedModel& model, bool allow_wav);

// Writes `result`'s n-best (at most config.max_alternatives, words only when
// asked for) into `alternatives`.
void FillAlternatives(
    const decoder::DecodeResult& result, const ParsedConfig& config,
    google::protobuf::RepeatedPtrField<asr::v1::SpeechRecognitionAlternative>* alternatives);

// One streaming result: alternatives, is_final, stability, result_end_time,
// segment and audio_processed.
void FillStreamingResult(const decoder::DecodeResult& result, const ParsedConfig& config,
                         double audio_processed_s, asr::v1::StreamingRecognitionResult* out);

// Milliseconds as a google.protobuf.Duration.
void SetDurationMs(int64_t ms, google::protobuf::Duration* out);

}  // namespace oasr::server
