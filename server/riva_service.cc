#include "server/riva_service.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "server/compat_api.h"
#include "server/recognize_call.h"
#include "server/streaming_call.h"

namespace oasr::server {
namespace {

namespace riva = ::nvidia::riva;
namespace riva_asr = ::nvidia::riva::asr;

// Riva's channel_tag counts channels from 1; oasr recognizes mono only.
constexpr int kChannelTag = 1;

void FillWord(const asr::v1::WordInfo& in, riva_asr::WordInfo* out) {
  out->set_word(in.word());
  out->set_start_time(static_cast<int32_t>(in.start_offset_ms()));
  out->set_end_time(static_cast<int32_t>(in.end_offset_ms()));
  out->set_confidence(in.confidence());
}

}  // namespace

absl::StatusOr<asr::v1::RecognitionConfig> RivaToNative(const riva_asr::RecognitionConfig& in) {
  asr::v1::RecognitionConfig out;
  switch (in.encoding()) {
    case riva::ENCODING_UNSPECIFIED:
      break;
    case riva::LINEAR_PCM:
      out.set_encoding(asr::v1::LINEAR16);
      break;
    case riva::MULAW:
      out.set_encoding(asr::v1::MULAW);
      break;
    case riva::ALAW:
      out.set_encoding(asr::v1::ALAW);
      break;
    default: {
      const std::string& name = riva::AudioEncoding_Name(in.encoding());
      return compat::Invalid("encoding: ", name.empty() ? absl::StrCat(in.encoding()) : name,
                             " is not supported (LINEAR_PCM, MULAW, ALAW)");
    }
  }
  OASR_RETURN_IF_ERROR(compat::CopySharedFields(in, &out));
  compat::CopySpeechContexts(in.speech_contexts(), /*drop_negative_boost=*/false, &out);
  const int stop_history = in.endpointing_config().stop_history();
  if (stop_history < 0) {
    return compat::Invalid("endpointing_config.stop_history: ", stop_history,
                           " ms must not be negative (0 keeps the default)");
  }
  if (stop_history > 0) out.mutable_endpointing_config()->set_stop_history_ms(stop_history);
  return out;
}

absl::StatusOr<asr::v1::StreamingRecognitionConfig> RivaStreamingApi::Configure(
    const Request& first) {
  has_id_ = first.has_id();
  id_ = first.id();
  OASR_ASSIGN_OR_RETURN(asr::v1::RecognitionConfig config,
                        RivaToNative(first.streaming_config().config()));
  asr::v1::StreamingRecognitionConfig out;
  *out.mutable_config() = std::move(config);
  out.set_interim_results(first.streaming_config().interim_results());
  return out;
}

void RivaStreamingApi::Translate(asr::v1::StreamingRecognizeResponse native,
                                 std::deque<Response>* out) const {
  for (const asr::v1::StreamingRecognitionResult& result : native.results()) {
    if (!compat::HasText(result)) continue;
    Response& response = out->emplace_back();
    if (has_id_) *response.mutable_id() = id_;
    riva_asr::StreamingRecognitionResult* riva_result = response.add_results();
    compat::CopyAlternatives(result.alternatives(), riva_result->mutable_alternatives(), FillWord);
    riva_result->set_is_final(result.is_final());
    riva_result->set_stability(result.stability());
    riva_result->set_channel_tag(kChannelTag);
    riva_result->set_audio_processed(result.audio_processed());
  }
}

grpc::ServerUnaryReactor* RivaService::Recognize(grpc::CallbackServerContext* call_context,
                                                 const riva_asr::RecognizeRequest* request,
                                                 riva_asr::RecognizeResponse* response) {
  return StartRecognize(
      call_context, context_,
      compat::RecognizeInputFor(RivaToNative(request->config()), request->audio(), "audio"),
      [request, response](asr::v1::RecognizeResponse& native) {
        for (const asr::v1::SpeechRecognitionResult& result : native.results()) {
          if (!compat::HasText(result)) continue;
          riva_asr::SpeechRecognitionResult* riva_result = response->add_results();
          compat::CopyAlternatives(result.alternatives(), riva_result->mutable_alternatives(),
                                   FillWord);
          riva_result->set_channel_tag(kChannelTag);
          riva_result->set_audio_processed(native.audio_processed());
        }
        if (request->has_id()) *response->mutable_id() = request->id();
      });
}

grpc::ServerUnaryReactor* RivaService::GetRivaSpeechRecognitionConfig(
    grpc::CallbackServerContext* call_context,
    const riva_asr::RivaSpeechRecognitionConfigRequest* request,
    riva_asr::RivaSpeechRecognitionConfigResponse* response) {
  grpc::ServerUnaryReactor* reactor = call_context->DefaultReactor();
  if (grpc::Status status = AuthenticateCall(context_, *call_context); !status.ok()) {
    reactor->Finish(status);
    return reactor;
  }
  const ServedModel* model = context_->model.load();
  if (model != nullptr &&
      (request->model_name().empty() || request->model_name() == model->name())) {
    const asr::v1::ModelInfo& info = model->info();
    for (const char* type : {"online", "offline"}) {
      riva_asr::RivaSpeechRecognitionConfigResponse::Config* config = response->add_model_config();
      config->set_model_name(info.name());
      google::protobuf::Map<std::string, std::string>& parameters = *config->mutable_parameters();
      parameters["type"] = type;
      parameters["streaming"] = std::string_view(type) == "online" ? "true" : "false";
      parameters["language_code"] = info.language_code();
      parameters["sample_rate"] = absl::StrCat(info.sample_rate_hertz());
      parameters["chunk_ms"] = absl::StrCat(info.chunk_ms());
      parameters["vocabulary_size"] = absl::StrCat(info.vocabulary_size());
      parameters["max_stream_seconds"] = absl::StrCat(info.max_stream_seconds());
    }
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace oasr::server
