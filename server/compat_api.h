// What the Riva and Google Cloud Speech adapters (riva_service.h,
// google_speech_service.h) share: both APIs name most RecognitionConfig and
// result fields as oasr.asr.v1 does, so the copies between them are written
// once here, over the APIs' generated types. The native checks
// (ParseRecognitionConfig) then judge the copied configuration, so the three
// APIs refuse the same things with the same messages.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "oasr/asr/v1/asr.pb.h"
#include "server/recognize_call.h"

namespace oasr::server::compat {

// INVALID_ARGUMENT with `parts` concatenated (the field first, then why).
template <typename... Parts>
absl::Status Invalid(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

// Copies what Riva's and Google's RecognitionConfig share with oasr.asr.v1's
// by name and meaning: sample_rate_hertz, audio_channel_count, language_code,
// model, max_alternatives, enable_word_time_offsets. Refuses speaker
// diarization (diarization_config.enable_speaker_diarization), which neither
// the engine nor oasr.asr.v1 has.
template <typename Config>
absl::Status CopySharedFields(const Config& in, asr::v1::RecognitionConfig* out) {
  if (in.diarization_config().enable_speaker_diarization()) {
    return Invalid(
        "diarization_config.enable_speaker_diarization: speaker diarization is not supported");
  }
  out->set_sample_rate_hertz(in.sample_rate_hertz());
  out->set_audio_channel_count(in.audio_channel_count());
  out->set_language_code(in.language_code());
  out->set_model(in.model());
  out->set_max_alternatives(in.max_alternatives());
  out->set_enable_word_time_offsets(in.enable_word_time_offsets());
  return absl::OkStatus();
}

// Copies speech contexts (phrases and boost). A context with a negative boost
// is dropped when `drop_negative_boost` (Google ignores them) and otherwise
// copied for the native check to refuse.
template <typename Context>
void CopySpeechContexts(const google::protobuf::RepeatedPtrField<Context>& in,
                        bool drop_negative_boost, asr::v1::RecognitionConfig* out) {
  for (const Context& context : in) {
    if (drop_negative_boost && context.boost() < 0.0f) continue;
    asr::v1::SpeechContext* copy = out->add_speech_contexts();
    copy->mutable_phrases()->CopyFrom(context.phrases());
    copy->set_boost(context.boost());
  }
}

// A Riva or Google Recognize call's input: `config` (the adapter's mapping;
// its error passes through) with `audio`, checked as both services do:
// empty audio is INVALID_ARGUMENT naming `field`; a WAV file's header decides
// the encoding and the rate, and a config that names another encoding (not
// unspecified) or another sample_rate_hertz (not 0) is INVALID_ARGUMENT.
// `audio` must outlive the call (it points into the API's request).
absl::StatusOr<RecognizeInput> RecognizeInputFor(absl::StatusOr<asr::v1::RecognitionConfig> config,
                                                 std::string_view audio, const char* field);

// True when `result` has something for a Riva or Google client: oasr.asr.v1's
// closing result (no alternatives, only finish_reason) and results whose best
// transcript is empty (nothing recognized yet) are not sent by those
// services.
template <typename Result>
bool HasText(const Result& result) {
  return result.alternatives_size() > 0 && !result.alternatives(0).transcript().empty();
}

// Copies a native result's alternatives (transcript, confidence) into the
// API's; `fill_word(native_word, api_word)` fills each word.
template <typename Alternative, typename FillWord>
void CopyAlternatives(
    const google::protobuf::RepeatedPtrField<asr::v1::SpeechRecognitionAlternative>& in,
    google::protobuf::RepeatedPtrField<Alternative>* out, const FillWord& fill_word) {
  for (const asr::v1::SpeechRecognitionAlternative& native : in) {
    Alternative* alternative = out->Add();
    alternative->set_transcript(native.transcript());
    alternative->set_confidence(native.confidence());
    for (const asr::v1::WordInfo& word : native.words()) fill_word(word, alternative->add_words());
  }
}

}  // namespace oasr::server::compat
