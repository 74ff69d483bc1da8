// NVIDIA Riva's ASR service (nvidia.riva.asr.RivaSpeechRecognition, our
// proto/nvidia/riva/asr/asr.proto), served beside oasr.asr.v1.Speech on the
// same port by the same engine: Riva's messages are mapped onto
// oasr.asr.v1's and go through the native calls (StreamingCall,
// StartRecognize), so every check, limit and status code is the native one.
#pragma once

#include <deque>

#include "absl/status/statusor.h"
#include "nvidia/riva/asr/asr.grpc.pb.h"
#include "oasr/asr/v1/asr.pb.h"
#include "server/service_context.h"

namespace oasr::server {

// Riva's RecognitionConfig in oasr.asr.v1's shape: LINEAR_PCM (or
// unspecified), MULAW and ALAW are taken, FLAC and OGGOPUS refused;
// endpointing_config.stop_history becomes stop_history_ms; diarization is
// refused; profanity_filter, enable_automatic_punctuation and
// verbatim_transcripts have no effect. INVALID_ARGUMENT names Riva's field.
// The native checks (ParseRecognitionConfig) still apply to the result.
absl::StatusOr<asr::v1::RecognitionConfig> RivaToNative(
    const nvidia::riva::asr::RecognitionConfig& config);

// The StreamingCall adapter for Riva (see NativeStreamingApi).
class RivaStreamingApi {
 public:
  using Request = nvidia::riva::asr::StreamingRecognizeRequest;
  using Response = nvidia::riva::asr::StreamingRecognizeResponse;
  static constexpr const char* kName = "riva";

  absl::StatusOr<asr::v1::StreamingRecognitionConfig> Configure(const Request& first);
  // One response per result that has text (Riva sends no empty results),
  // each with the first message's id, channel_tag 1 and audio_processed.
  void Translate(asr::v1::StreamingRecognizeResponse native, std::deque<Response>* out) const;

 private:
  // The first message's id, returned on every response.
  bool has_id_ = false;
  nvidia::riva::RequestId id_;
};

// Riva's methods on the callback API, except StreamingRecognize, on the
// async API (streaming_call.h).
using RivaServiceBase = nvidia::riva::asr::RivaSpeechRecognition::WithCallbackMethod_Recognize<
    nvidia::riva::asr::RivaSpeechRecognition::WithCallbackMethod_GetRivaSpeechRecognitionConfig<
        nvidia::riva::asr::RivaSpeechRecognition::WithAsyncMethod_StreamingRecognize<
            nvidia::riva::asr::RivaSpeechRecognition::Service>>>;

// Thread-safe; every method returns at once.
class RivaService final : public RivaServiceBase {
 public:
  // `context` (not owned) must outlive every call.
  explicit RivaService(ServiceContext* context) : context_(context) {}

  grpc::ServerUnaryReactor* Recognize(grpc::CallbackServerContext* call_context,
                                      const nvidia::riva::asr::RecognizeRequest* request,
                                      nvidia::riva::asr::RecognizeResponse* response) override;

  // Two Configs for the served model, "online" and "offline" (Riva's
  // clients look for one of each), or none while no model is served or when
  // model_name names another.
  grpc::ServerUnaryReactor* GetRivaSpeechRecognitionConfig(
      grpc::CallbackServerContext* call_context,
      const nvidia::riva::asr::RivaSpeechRecognitionConfigRequest* request,
      nvidia::riva::asr::RivaSpeechRecognitionConfigResponse* response) override;

 private:
  ServiceContext* const context_;
};

}  // namespace oasr::server
