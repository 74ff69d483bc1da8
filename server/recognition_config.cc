#include "server/recognition_config.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "decoder/context_graph.h"
#include "decoder/phrase_tokenizer.h"
#include "server/served_model.h"

namespace oasr::server {
namespace {

constexpr int kMinSampleRate = 8000;
constexpr int kMaxSampleRate = 48000;
constexpr int kMaxAlternatives = 1024;
constexpr float kDefaultBoost = 3.0f;

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

absl::Status ParseEndpointing(const asr::v1::EndpointingConfig& in, decoder::EndpointConfig* out) {
  if (in.disable()) {
    out->enabled = false;
    return absl::OkStatus();
  }
  if (in.stop_history_ms() < 0 || in.stop_history_no_speech_ms() < 0 || in.max_segment_ms() < 0) {
    return Invalid(absl::StrCat("endpointing_config: times must not be negative (stop_history_ms ",
                                in.stop_history_ms(), ", stop_history_no_speech_ms ",
                                in.stop_history_no_speech_ms(), ", max_segment_ms ",
                                in.max_segment_ms(), ")"));
  }
  if (!(in.stop_threshold() >= 0.0f && in.stop_threshold() < 1.0f)) {
    return Invalid(absl::StrCat("endpointing_config.stop_threshold: ", in.stop_threshold(),
                                " is outside [0, 1) (0 keeps the default)"));
  }
  // The decoder's rules, in its order: silence without speech, silence after
  // speech, a segment's length (docs in decoder/endpoint.h).
  if (in.stop_history_no_speech_ms() > 0) {
    out->rules[0].min_trailing_silence_ms = in.stop_history_no_speech_ms();
  }
  if (in.stop_history_ms() > 0) out->rules[1].min_trailing_silence_ms = in.stop_history_ms();
  if (in.max_segment_ms() > 0) out->rules[2].min_utterance_length_ms = in.max_segment_ms();
  if (in.stop_threshold() > 0.0f) out->blank_threshold = in.stop_threshold();
  return absl::OkStatus();
}

absl::Status ParseContexts(const asr::v1::RecognitionConfig& config, const ServedModel& model,
                           decoder::StreamOptions* options) {
  // The graph's limits are checked here, so that a refusal names the
  // request's field: the graph numbers the phrases of all contexts as one
  // list ("phrases[4999]" for speech_contexts[1].phrases[0]).
  const decoder::ContextGraphConfig limits;
  int64_t count = 0;
  for (const asr::v1::SpeechContext& context : config.speech_contexts()) {
    count += context.phrases_size();
  }
  if (count > limits.max_phrases) {
    return Invalid(absl::StrCat("speech_contexts: ", count, " phrases in all contexts, more than ",
                                limits.max_phrases));
  }
  std::vector<decoder::TokenPhrase> phrases;
  for (int c = 0; c < config.speech_contexts_size(); ++c) {
    const asr::v1::SpeechContext& context = config.speech_contexts(c);
    const float boost = context.boost() == 0.0f ? kDefaultBoost : context.boost();
    if (!std::isfinite(boost) || boost < 0.0f || boost > limits.max_boost) {
      return Invalid(
          absl::StrFormat("speech_contexts[%d].boost: %.9g is outside (0, %g] (0 keeps "
                          "the default %g)",
                          c, context.boost(), limits.max_boost, kDefaultBoost));
    }
    for (int i = 0; i < context.phrases_size(); ++i) {
      absl::StatusOr<std::vector<int32_t>> tokens =
          decoder::TokenizePhrase(context.phrases(i), model.units());
      if (!tokens.ok()) {
        return Invalid(absl::StrCat("speech_contexts[", c, "].phrases[", i,
                                    "]: ", std::string(tokens.status().message())));
      }
      if (static_cast<int64_t>(tokens->size()) > limits.max_phrase_tokens) {
        return Invalid(absl::StrCat("speech_contexts[", c, "].phrases[", i, "]: ", tokens->size(),
                                    " units, more than ", limits.max_phrase_tokens));
      }
      phrases.push_back({std::move(*tokens), boost});
    }
  }
  if (phrases.empty()) return absl::OkStatus();
  absl::StatusOr<std::shared_ptr<const decoder::ContextGraph>> graph =
      decoder::ContextGraph::Build(phrases, model.units().size(), limits);
  if (!graph.ok()) {
    return Invalid(absl::StrCat("speech_contexts: ", std::string(graph.status().message())));
  }
  options->context = std::move(*graph);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ParsedConfig> ParseRecognitionConfig(const asr::v1::RecognitionConfig& config,
                                                    const ServedModel& model, bool allow_wav) {
  ParsedConfig parsed;
  switch (config.encoding()) {
    case asr::v1::ENCODING_UNSPECIFIED:
    case asr::v1::LINEAR16:
      parsed.encoding = SampleEncoding::kLinear16;
      break;
    case asr::v1::MULAW:
      parsed.encoding = SampleEncoding::kMulaw;
      break;
    case asr::v1::ALAW:
      parsed.encoding = SampleEncoding::kAlaw;
      break;
    case asr::v1::WAV:
      if (!allow_wav) {
        return Invalid(
            "encoding: WAV is for Recognize; stream LINEAR16, MULAW or ALAW samples instead");
      }
      parsed.wav = true;
      break;
    default:
      return Invalid(absl::StrCat("encoding: ", config.encoding(),
                                  " is not supported (LINEAR16, MULAW, ALAW, WAV)"));
  }
  const int rate =
      config.sample_rate_hertz() == 0 ? model.sample_rate() : config.sample_rate_hertz();
  if (rate < kMinSampleRate || rate > kMaxSampleRate) {
    return Invalid(absl::StrCat("sample_rate_hertz: ", config.sample_rate_hertz(), " is outside [",
                                kMinSampleRate, ", ", kMaxSampleRate, "]"));
  }
  if (config.audio_channel_count() < 0 || config.audio_channel_count() > 1) {
    return Invalid(absl::StrCat("audio_channel_count: ", config.audio_channel_count(),
                                " channels are not supported (mono only: 0 or 1)"));
  }
  if (!config.model().empty() && config.model() != model.name()) {
    return Invalid(absl::StrCat("model: '", config.model(), "' is not served (served: '",
                                model.name(), "'; see ListModels)"));
  }
  // BCP-47 tags are case-insensitive ("en-us" is "en-US").
  if (!config.language_code().empty() &&
      !absl::EqualsIgnoreCase(config.language_code(), model.info().language_code())) {
    return Invalid(absl::StrCat("language_code: '", config.language_code(),
                                "' is not served (model '", model.name(), "' is '",
                                model.info().language_code(), "')"));
  }
  if (config.max_alternatives() < 0 || config.max_alternatives() > kMaxAlternatives) {
    return Invalid(absl::StrCat("max_alternatives: ", config.max_alternatives(), " is outside [0, ",
                                kMaxAlternatives, "]"));
  }
  parsed.max_alternatives = std::max(1, config.max_alternatives());
  parsed.word_time_offsets = config.enable_word_time_offsets();

  scheduler::StreamRequest& request = parsed.request;
  request.sample_rate = rate;
  request.decode = model.engine().decoder().config().stream;
  request.decode.context.reset();
  request.decode.nbest = parsed.max_alternatives;
  request.attention_rescoring = !config.disable_attention_rescoring();
  if (config.has_endpointing_config()) {
    OASR_RETURN_IF_ERROR(ParseEndpointing(config.endpointing_config(), &request.decode.endpoint));
  }
  OASR_RETURN_IF_ERROR(ParseContexts(config, model, &request.decode));
  if (absl::Status status = request.decode.Validate(); !status.ok()) {
    return Invalid(absl::StrCat("config: ", std::string(status.message())));
  }
  return parsed;
}

void SetDurationMs(int64_t ms, google::protobuf::Duration* out) {
  out->set_seconds(ms / 1000);
  out->set_nanos(static_cast<int32_t>((ms % 1000) * 1000000));
}

void FillAlternatives(
    const decoder::DecodeResult& result, const ParsedConfig& config,
    google::protobuf::RepeatedPtrField<asr::v1::SpeechRecognitionAlternative>* alternatives) {
  const size_t n =
      std::min<size_t>(result.nbest.size(), static_cast<size_t>(config.max_alternatives));
  for (size_t i = 0; i < n; ++i) {
    const decoder::Hypothesis& hyp = result.nbest[i];
    asr::v1::SpeechRecognitionAlternative* alt = alternatives->Add();
    alt->set_transcript(hyp.transcript);
    alt->set_confidence(hyp.confidence);
    if (!config.word_time_offsets) continue;
    for (const decoder::WordResult& w : hyp.words) {
      asr::v1::WordInfo* word = alt->add_words();
      word->set_word(w.text);
      word->set_confidence(w.confidence);
      word->set_start_offset_ms(w.start_ms);
      word->set_end_offset_ms(w.end_ms);
      SetDurationMs(w.start_ms, word->mutable_start_time());
      SetDurationMs(w.end_ms, word->mutable_end_time());
    }
  }
}

void FillStreamingResult(const decoder::DecodeResult& result, const ParsedConfig& config,
                         double audio_processed_s, asr::v1::StreamingRecognitionResult* out) {
  FillAlternatives(result, config, out->mutable_alternatives());
  out->set_is_final(result.is_final);
  // The decoder does not estimate how settled a partial is; finals are.
  out->set_stability(result.is_final ? 1.0f : 0.0f);
  SetDurationMs(result.end_ms, out->mutable_result_end_time());
  out->set_segment(result.segment);
  out->set_audio_processed(static_cast<float>(audio_processed_s));
}

}  // namespace oasr::server
