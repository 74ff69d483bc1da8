// Google Cloud Speech-to-Text v1 (google.cloud.speech.v1.Speech: Recognize
// and StreamingRecognize, our proto/google/cloud/speech/v1/speech.proto),
// served beside oasr.asr.v1.Speech on the same port by the same engine:
// Google's messages are mapped onto oasr.asr.v1's and go through the native
// calls (StreamingCall, StartRecognize), so every check, limit and status
// code is the native one.
#pragma once

#include <deque>
#include <string>

#include "absl/status/statusor.h"
#include "google/cloud/speech/v1/speech.grpc.pb.h"
#include "oasr/asr/v1/asr.pb.h"
#include "server/service_context.h"

namespace oasr::server {

// Google's RecognitionConfig in oasr.asr.v1's shape: LINEAR16 (or
// unspecified) and MULAW are taken, the other encodings refused;
// language_code is required; max_alternatives is at most 30, Google's limit;
// model "default", "latest_long" and "latest_short" select the served model;
// enable_word_confidence asks for words as enable_word_time_offsets does;
// speech contexts with a negative boost are ignored; diarization is refused;
// profanity_filter, enable_automatic_punctuation and
// alternative_language_codes have no effect. INVALID_ARGUMENT names Google's
// field. The native checks (ParseRecognitionConfig) still apply to the result.
absl::StatusOr<asr::v1::RecognitionConfig> GoogleToNative(
    const google::cloud::speech::v1::RecognitionConfig& config);

// The StreamingCall adapter for Google (see NativeStreamingApi).
class GoogleStreamingApi {
 public:
  using Request = google::cloud::speech::v1::StreamingRecognizeRequest;
  using Response = google::cloud::speech::v1::StreamingRecognizeResponse;
  static constexpr const char* kName = "google";

  absl::StatusOr<asr::v1::StreamingRecognitionConfig> Configure(const Request& first);
  // One response per result that has text (Google sends no empty results),
  // words as the config asked for them, language_code set; with
  // single_utterance, a response with speech_event_type
  // END_OF_SINGLE_UTTERANCE ahead of the endpoint's final result.
  void Translate(asr::v1::StreamingRecognizeResponse native, std::deque<Response>* out) const;

 private:
  bool word_time_offsets_ = false;
  bool word_confidence_ = false;
  std::string language_code_;
};

// Google's Recognize on the callback API, StreamingRecognize on the async
// API (streaming_call.h).
using GoogleSpeechServiceBase = google::cloud::speech::v1::Speech::WithCallbackMethod_Recognize<
    google::cloud::speech::v1::Speech::WithAsyncMethod_StreamingRecognize<
        google::cloud::speech::v1::Speech::Service>>;

// Thread-safe; every method returns at once.
class GoogleSpeechService final : public GoogleSpeechServiceBase {
 public:
  // `context` (not owned) must outlive every call.
  explicit GoogleSpeechService(ServiceContext* context) : context_(context) {}

  grpc::ServerUnaryReactor* Recognize(
      grpc::CallbackServerContext* call_context,
      const google::cloud::speech::v1::RecognizeRequest* request,
      google::cloud::speech::v1::RecognizeResponse* response) override;

 private:
  ServiceContext* const context_;
};

}  // namespace oasr::server
