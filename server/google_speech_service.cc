#include "server/google_speech_service.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "server/compat_api.h"
#include "server/recognize_call.h"
#include "server/streaming_call.h"

namespace oasr::server {
namespace {

namespace gspeech = ::google::cloud::speech::v1;

// Google's documented range of max_alternatives.
constexpr int kMaxAlternatives = 30;
// Google's generic model names; each selects the served model.
constexpr std::string_view kGenericModels[] = {"default", "latest_long", "latest_short"};

// Fills a Google word with what the config asked for: times with
// enable_word_time_offsets, confidence with enable_word_confidence.
struct WordFiller {
  bool times = false;
  bool confidence = false;

  void operator()(const asr::v1::WordInfo& in, gspeech::WordInfo* out) const {
    out->set_word(in.word());
    if (times) {
      *out->mutable_start_time() = in.start_time();
      *out->mutable_end_time() = in.end_time();
    }
    if (confidence) out->set_confidence(in.confidence());
  }
};

WordFiller WordsFor(const gspeech::RecognitionConfig& config) {
  return {config.enable_word_time_offsets(), config.enable_word_confidence()};
}

}  // namespace

absl::StatusOr<asr::v1::RecognitionConfig> GoogleToNative(const gspeech::RecognitionConfig& in) {
  asr::v1::RecognitionConfig out;
  switch (in.encoding()) {
    case gspeech::RecognitionConfig::ENCODING_UNSPECIFIED:
      break;
    case gspeech::RecognitionConfig::LINEAR16:
      out.set_encoding(asr::v1::LINEAR16);
      break;
    case gspeech::RecognitionConfig::MULAW:
      out.set_encoding(asr::v1::MULAW);
      break;
    default: {
      const std::string& name = gspeech::RecognitionConfig::AudioEncoding_Name(in.encoding());
      return compat::Invalid("encoding: ", name.empty() ? absl::StrCat(in.encoding()) : name,
                             " is not supported (LINEAR16, MULAW)");
    }
  }
  if (in.language_code().empty()) {
    return compat::Invalid("language_code: required (the served model's; see ListModels)");
  }
  if (in.max_alternatives() < 0 || in.max_alternatives() > kMaxAlternatives) {
    return compat::Invalid("max_alternatives: ", in.max_alternatives(), " is outside [0, ",
                           kMaxAlternatives, "]");
  }
  OASR_RETURN_IF_ERROR(compat::CopySharedFields(in, &out));
  for (std::string_view generic : kGenericModels) {
    if (in.model() == generic) out.clear_model();
  }
  // Words carry the times, the confidence or both (WordFiller picks).
  out.set_enable_word_time_offsets(in.enable_word_time_offsets() || in.enable_word_confidence());
  compat::CopySpeechContexts(in.speech_contexts(), /*drop_negative_boost=*/true, &out);
  return out;
}

absl::StatusOr<asr::v1::StreamingRecognitionConfig> GoogleStreamingApi::Configure(
    const Request& first) {
  const gspeech::StreamingRecognitionConfig& in = first.streaming_config();
  OASR_ASSIGN_OR_RETURN(asr::v1::RecognitionConfig config, GoogleToNative(in.config()));
  word_time_offsets_ = in.config().enable_word_time_offsets();
  word_confidence_ = in.config().enable_word_confidence();
  language_code_ = in.config().language_code();
  asr::v1::StreamingRecognitionConfig out;
  *out.mutable_config() = std::move(config);
  out.set_interim_results(in.interim_results());
  out.set_single_utterance(in.single_utterance());
  return out;
}

void GoogleStreamingApi::Translate(asr::v1::StreamingRecognizeResponse native,
                                   std::deque<Response>* out) const {
  const WordFiller words{word_time_offsets_, word_confidence_};
  for (const asr::v1::StreamingRecognitionResult& result : native.results()) {
    // single_utterance ended at an endpoint: no more audio is decoded.
    if (result.finish_reason() == "endpoint") {
      Response& event = out->emplace_back();
      event.set_speech_event_type(Response::END_OF_SINGLE_UTTERANCE);
      *event.mutable_speech_event_time() = result.result_end_time();
    }
    if (!compat::HasText(result)) continue;
    gspeech::StreamingRecognitionResult* google_result = out->emplace_back().add_results();
    compat::CopyAlternatives(result.alternatives(), google_result->mutable_alternatives(), words);
    google_result->set_is_final(result.is_final());
    google_result->set_stability(result.stability());
    *google_result->mutable_result_end_time() = result.result_end_time();
    google_result->set_language_code(language_code_);
  }
}

grpc::ServerUnaryReactor* GoogleSpeechService::Recognize(grpc::CallbackServerContext* call_context,
                                                         const gspeech::RecognizeRequest* request,
                                                         gspeech::RecognizeResponse* response) {
  absl::StatusOr<asr::v1::RecognitionConfig> config = GoogleToNative(request->config());
  if (config.ok() && request->audio().has_uri()) {
    config = compat::Invalid("audio.uri: not supported (oasr reads no storage); use audio.content");
  } else if (config.ok() && !request->audio().has_content()) {
    config = compat::Invalid("audio: neither content nor uri is set; send audio.content");
  }
  return StartRecognize(
      call_context, context_,
      compat::RecognizeInputFor(std::move(config), request->audio().content(), "audio.content"),
      [request, response](asr::v1::RecognizeResponse& native) {
        for (const asr::v1::SpeechRecognitionResult& result : native.results()) {
          if (!compat::HasText(result)) continue;
          gspeech::SpeechRecognitionResult* google_result = response->add_results();
          compat::CopyAlternatives(result.alternatives(), google_result->mutable_alternatives(),
                                   WordsFor(request->config()));
          *google_result->mutable_result_end_time() = result.result_end_time();
          google_result->set_language_code(request->config().language_code());
        }
      });
}

}  // namespace oasr::server
