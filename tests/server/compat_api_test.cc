// The Riva and Google Cloud Speech adapters without a server: their
// configurations mapped onto oasr.asr.v1's (and refused, naming the field),
// Recognize's audio checks, and oasr.asr.v1's responses mapped back.
// tests/server/compat_api_test.py runs both APIs end to end.
#include "server/compat_api.h"

#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "server/audio_codec.h"
#include "server/google_speech_service.h"
#include "server/riva_service.h"
#include "server/streaming_call.h"

namespace oasr::server {
namespace {

namespace gspeech = ::google::cloud::speech::v1;
namespace riva = ::nvidia::riva;
namespace riva_asr = ::nvidia::riva::asr;

// Expects INVALID_ARGUMENT whose message starts with `prefix`.
template <typename T>
void ExpectInvalid(const absl::StatusOr<T>& got, const std::string& prefix) {
  ASSERT_FALSE(got.ok()) << "expected a refusal starting with '" << prefix << "'";
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
  EXPECT_EQ(got.status().message().substr(0, prefix.size()), prefix) << got.status();
}

// A native response: one result with `transcript` and one word.
asr::v1::StreamingRecognizeResponse NativeResult(const std::string& transcript, bool is_final) {
  asr::v1::StreamingRecognizeResponse response;
  asr::v1::StreamingRecognitionResult* result = response.add_results();
  asr::v1::SpeechRecognitionAlternative* alternative = result->add_alternatives();
  alternative->set_transcript(transcript);
  alternative->set_confidence(0.75f);
  asr::v1::WordInfo* word = alternative->add_words();
  word->set_word(transcript);
  word->set_start_offset_ms(1250);
  word->set_end_offset_ms(1900);
  word->mutable_start_time()->set_seconds(1);
  word->mutable_start_time()->set_nanos(250000000);
  word->mutable_end_time()->set_seconds(1);
  word->mutable_end_time()->set_nanos(900000000);
  word->set_confidence(0.5f);
  result->set_is_final(is_final);
  result->set_stability(is_final ? 1.0f : 0.0f);
  result->mutable_result_end_time()->set_seconds(2);
  result->set_audio_processed(2.0f);
  return response;
}

TEST(RivaToNativeTest, MapsTheSharedFields) {
  riva_asr::RecognitionConfig config;
  config.set_encoding(riva::ALAW);
  config.set_sample_rate_hertz(8000);
  config.set_language_code("en-US");
  config.set_max_alternatives(3);
  config.set_enable_word_time_offsets(true);
  config.set_profanity_filter(true);
  config.set_enable_automatic_punctuation(true);
  config.set_verbatim_transcripts(true);
  config.set_model("m");
  riva_asr::SpeechContext* context = config.add_speech_contexts();
  context->add_phrases("oasr");
  context->set_boost(5.0f);
  config.mutable_endpointing_config()->set_stop_history(700);

  absl::StatusOr<asr::v1::RecognitionConfig> native = RivaToNative(config);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_EQ(native->encoding(), asr::v1::ALAW);
  EXPECT_EQ(native->sample_rate_hertz(), 8000);
  EXPECT_EQ(native->language_code(), "en-US");
  EXPECT_EQ(native->max_alternatives(), 3);
  EXPECT_TRUE(native->enable_word_time_offsets());
  EXPECT_EQ(native->model(), "m");
  ASSERT_EQ(native->speech_contexts_size(), 1);
  EXPECT_EQ(native->speech_contexts(0).phrases(0), "oasr");
  EXPECT_EQ(native->speech_contexts(0).boost(), 5.0f);
  EXPECT_EQ(native->endpointing_config().stop_history_ms(), 700);

  config.set_encoding(riva::LINEAR_PCM);
  EXPECT_EQ(RivaToNative(config)->encoding(), asr::v1::LINEAR16);
  config.set_encoding(riva::MULAW);
  EXPECT_EQ(RivaToNative(config)->encoding(), asr::v1::MULAW);
  // Unspecified stays unspecified: a WAV file's header may decide.
  config.set_encoding(riva::ENCODING_UNSPECIFIED);
  EXPECT_EQ(RivaToNative(config)->encoding(), asr::v1::ENCODING_UNSPECIFIED);
  config.clear_endpointing_config();
  EXPECT_FALSE(RivaToNative(config)->has_endpointing_config());
}

TEST(RivaToNativeTest, RefusesWhatTheEngineCannotDo) {
  riva_asr::RecognitionConfig config;
  config.set_encoding(riva::FLAC);
  ExpectInvalid(RivaToNative(config), "encoding: FLAC is not supported");
  config.set_encoding(riva::OGGOPUS);
  ExpectInvalid(RivaToNative(config), "encoding: OGGOPUS is not supported");
  config.set_encoding(static_cast<riva::AudioEncoding>(77));
  ExpectInvalid(RivaToNative(config), "encoding: 77 is not supported");
  config.set_encoding(riva::LINEAR_PCM);
  config.mutable_diarization_config()->set_enable_speaker_diarization(true);
  ExpectInvalid(RivaToNative(config), "diarization_config.enable_speaker_diarization");
  config.clear_diarization_config();
  config.mutable_endpointing_config()->set_stop_history(-1);
  ExpectInvalid(RivaToNative(config), "endpointing_config.stop_history: -1");
}

TEST(GoogleToNativeTest, MapsTheSharedFieldsAndGoogleRules) {
  gspeech::RecognitionConfig config;
  config.set_encoding(gspeech::RecognitionConfig::MULAW);
  config.set_sample_rate_hertz(8000);
  config.set_language_code("en-us");
  config.set_max_alternatives(30);
  config.set_enable_word_confidence(true);
  config.set_model("latest_long");
  config.add_alternative_language_codes("fr-FR");
  gspeech::SpeechContext* ignored = config.add_speech_contexts();
  ignored->add_phrases("negative");
  ignored->set_boost(-2.0f);
  gspeech::SpeechContext* kept = config.add_speech_contexts();
  kept->add_phrases("oasr");

  absl::StatusOr<asr::v1::RecognitionConfig> native = GoogleToNative(config);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_EQ(native->encoding(), asr::v1::MULAW);
  EXPECT_EQ(native->sample_rate_hertz(), 8000);
  EXPECT_EQ(native->language_code(), "en-us");
  EXPECT_EQ(native->max_alternatives(), 30);
  EXPECT_TRUE(native->enable_word_time_offsets()) << "word confidence needs the words";
  EXPECT_EQ(native->model(), "") << "a generic Google model selects the served one";
  ASSERT_EQ(native->speech_contexts_size(), 1) << "a negative boost is ignored, as Google does";
  EXPECT_EQ(native->speech_contexts(0).phrases(0), "oasr");

  config.set_model("my-model");
  EXPECT_EQ(GoogleToNative(config)->model(), "my-model") << "the native check judges it";
  config.set_encoding(gspeech::RecognitionConfig::LINEAR16);
  EXPECT_EQ(GoogleToNative(config)->encoding(), asr::v1::LINEAR16);
}

TEST(GoogleToNativeTest, RefusesWhatGoogleOrTheEngineRefuses) {
  gspeech::RecognitionConfig config;
  config.set_language_code("en-US");
  for (gspeech::RecognitionConfig::AudioEncoding encoding :
       {gspeech::RecognitionConfig::FLAC, gspeech::RecognitionConfig::AMR,
        gspeech::RecognitionConfig::OGG_OPUS, gspeech::RecognitionConfig::WEBM_OPUS}) {
    config.set_encoding(encoding);
    ExpectInvalid(GoogleToNative(config),
                  "encoding: " + gspeech::RecognitionConfig::AudioEncoding_Name(encoding) +
                      " is not supported");
  }
  config.set_encoding(gspeech::RecognitionConfig::LINEAR16);
  config.set_max_alternatives(31);
  ExpectInvalid(GoogleToNative(config), "max_alternatives: 31 is outside [0, 30]");
  config.set_max_alternatives(1);
  config.mutable_diarization_config()->set_enable_speaker_diarization(true);
  ExpectInvalid(GoogleToNative(config), "diarization_config.enable_speaker_diarization");
  config.clear_diarization_config();
  config.clear_language_code();
  ExpectInvalid(GoogleToNative(config), "language_code: required");
}

TEST(RecognizeInputForTest, ChecksEmptyAudioAndTheWavHeader) {
  asr::v1::RecognitionConfig config;
  ExpectInvalid(compat::RecognizeInputFor(config, "", "audio.content"), "audio.content: empty");
  ExpectInvalid(compat::RecognizeInputFor(absl::InvalidArgumentError("encoding: no"), "x", "audio"),
                "encoding: no");

  const std::string raw("\x01\x00\x02\x00", 4);
  absl::StatusOr<RecognizeInput> samples = compat::RecognizeInputFor(config, raw, "audio");
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ(samples->config.encoding(), asr::v1::ENCODING_UNSPECIFIED);
  EXPECT_EQ(samples->audio, raw);

  const std::string wav = EncodeWav({1, 2, 3, 4}, 8000);
  absl::StatusOr<RecognizeInput> file = compat::RecognizeInputFor(config, wav, "audio");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->config.encoding(), asr::v1::WAV);
  config.set_encoding(asr::v1::LINEAR16);
  config.set_sample_rate_hertz(8000);
  EXPECT_TRUE(compat::RecognizeInputFor(config, wav, "audio").ok()) << "what the header says";
  config.set_sample_rate_hertz(16000);
  ExpectInvalid(compat::RecognizeInputFor(config, wav, "audio"),
                "sample_rate_hertz: 16000 does not match the WAV header's 8000");
  config.set_sample_rate_hertz(0);
  config.set_encoding(asr::v1::MULAW);
  ExpectInvalid(compat::RecognizeInputFor(config, wav, "audio"),
                "encoding: the config's mu-law does not match the WAV header's 16-bit PCM");
}

TEST(RivaStreamingApiTest, ConfiguresAndTranslates) {
  RivaStreamingApi api;
  riva_asr::StreamingRecognizeRequest first;
  first.mutable_streaming_config()->set_interim_results(true);
  first.mutable_streaming_config()->mutable_config()->set_language_code("en-US");
  first.mutable_id()->set_value("call-7");
  absl::StatusOr<asr::v1::StreamingRecognitionConfig> configured = api.Configure(first);
  ASSERT_TRUE(configured.ok()) << configured.status();
  EXPECT_TRUE(configured->interim_results());
  EXPECT_FALSE(configured->single_utterance());
  EXPECT_EQ(configured->config().language_code(), "en-US");

  std::deque<riva_asr::StreamingRecognizeResponse> out;
  asr::v1::StreamingRecognizeResponse native = NativeResult("hello", false);
  *native.add_results() = NativeResult("", false).results(0);  // Nothing recognized: dropped.
  native.add_results()->set_finish_reason("stop");             // The closing result: dropped.
  *native.add_results() = NativeResult("world", true).results(0);
  api.Translate(native, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].id().value(), "call-7");
  ASSERT_EQ(out[0].results_size(), 1);
  const riva_asr::StreamingRecognitionResult& interim = out[0].results(0);
  EXPECT_FALSE(interim.is_final());
  EXPECT_EQ(interim.channel_tag(), 1);
  EXPECT_EQ(interim.audio_processed(), 2.0f);
  ASSERT_EQ(interim.alternatives_size(), 1);
  EXPECT_EQ(interim.alternatives(0).transcript(), "hello");
  EXPECT_EQ(interim.alternatives(0).confidence(), 0.75f);
  ASSERT_EQ(interim.alternatives(0).words_size(), 1);
  EXPECT_EQ(interim.alternatives(0).words(0).start_time(), 1250);
  EXPECT_EQ(interim.alternatives(0).words(0).end_time(), 1900);
  EXPECT_EQ(interim.alternatives(0).words(0).confidence(), 0.5f);
  EXPECT_TRUE(out[1].results(0).is_final());
  EXPECT_EQ(out[1].results(0).stability(), 1.0f);

  first.mutable_streaming_config()->mutable_config()->set_encoding(riva::FLAC);
  ExpectInvalid(api.Configure(first), "encoding: FLAC");
}

TEST(GoogleStreamingApiTest, ConfiguresTranslatesAndSignalsTheEndOfAnUtterance) {
  GoogleStreamingApi api;
  gspeech::StreamingRecognizeRequest first;
  gspeech::StreamingRecognitionConfig* streaming = first.mutable_streaming_config();
  streaming->set_single_utterance(true);
  streaming->set_interim_results(true);
  streaming->mutable_config()->set_language_code("en-US");
  streaming->mutable_config()->set_enable_word_time_offsets(true);
  absl::StatusOr<asr::v1::StreamingRecognitionConfig> configured = api.Configure(first);
  ASSERT_TRUE(configured.ok()) << configured.status();
  EXPECT_TRUE(configured->single_utterance());
  EXPECT_TRUE(configured->interim_results());

  std::deque<gspeech::StreamingRecognizeResponse> out;
  api.Translate(NativeResult("hello", false), &out);
  asr::v1::StreamingRecognizeResponse last = NativeResult("hello world", true);
  last.mutable_results(0)->set_finish_reason("endpoint");
  api.Translate(last, &out);
  ASSERT_EQ(out.size(), 3u);
  const gspeech::StreamingRecognitionResult& interim = out[0].results(0);
  EXPECT_FALSE(interim.is_final());
  EXPECT_EQ(interim.language_code(), "en-US");
  EXPECT_EQ(interim.result_end_time().seconds(), 2);
  const gspeech::WordInfo& word = interim.alternatives(0).words(0);
  EXPECT_EQ(word.start_time().seconds(), 1);
  EXPECT_EQ(word.start_time().nanos(), 250000000);
  EXPECT_EQ(word.end_time().nanos(), 900000000);
  EXPECT_EQ(word.confidence(), 0.0f) << "enable_word_confidence was not set";
  // The event first, alone, then the utterance's final result.
  EXPECT_EQ(out[1].speech_event_type(),
            gspeech::StreamingRecognizeResponse::END_OF_SINGLE_UTTERANCE);
  EXPECT_EQ(out[1].results_size(), 0);
  EXPECT_EQ(out[1].speech_event_time().seconds(), 2);
  EXPECT_TRUE(out[2].results(0).is_final());
  EXPECT_EQ(out[2].results(0).alternatives(0).transcript(), "hello world");

  // Confidence without times.
  streaming->mutable_config()->set_enable_word_time_offsets(false);
  streaming->mutable_config()->set_enable_word_confidence(true);
  ASSERT_TRUE(api.Configure(first).ok());
  out.clear();
  api.Translate(NativeResult("hello", true), &out);
  const gspeech::WordInfo& confident = out.at(0).results(0).alternatives(0).words(0);
  EXPECT_FALSE(confident.has_start_time());
  EXPECT_EQ(confident.confidence(), 0.5f);
}

// A slow reader's queue: each interim-only response that a later one
// replaces goes, finals, results-less events and the order stay; the same
// rule for every API's responses.
template <typename Response>
Response Result(bool is_final, const std::string& text) {
  Response response;
  auto* result = response.add_results();
  result->set_is_final(is_final);
  result->add_alternatives()->set_transcript(text);
  return response;
}

template <typename Response>
std::vector<std::string> Texts(const std::deque<Response>& pending) {
  std::vector<std::string> out;
  for (const Response& r : pending) {
    out.push_back(r.results_size() == 0 ? "-" : r.results(0).alternatives(0).transcript());
  }
  return out;
}

template <typename Response>
void CheckCoalescing() {
  std::deque<Response> pending;
  int dropped = 0;
  auto add = [&](Response r) {
    pending.push_back(std::move(r));
    dropped += server::CoalesceInterims(&pending);
  };
  add(Result<Response>(false, "a"));
  EXPECT_EQ(dropped, 0) << "a lone interim stays";
  add(Result<Response>(false, "a b"));
  add(Result<Response>(false, "a b c"));
  EXPECT_EQ(Texts(pending), (std::vector<std::string>{"a b c"}));
  add(Result<Response>(true, "a b c d"));
  add(Result<Response>(false, "e"));
  add(Response());  // An event without results (Google's end of utterance).
  add(Result<Response>(false, "e f"));
  add(Result<Response>(false, "e f g"));
  add(Result<Response>(true, "e f g h"));
  EXPECT_EQ(Texts(pending),
            (std::vector<std::string>{"a b c", "a b c d", "e", "-", "e f g", "e f g h"}));
  EXPECT_EQ(dropped, 3);
  // A response mixing a final with the next interim is not interim-only.
  Response mixed = Result<Response>(true, "x");
  mixed.add_results()->set_is_final(false);
  EXPECT_FALSE(server::InterimOnly(mixed));
  EXPECT_FALSE(server::InterimOnly(Response()));
}

TEST(CoalesceInterimsTest, KeepsTheNewestInterimEveryFinalAndTheOrder) {
  CheckCoalescing<asr::v1::StreamingRecognizeResponse>();
  CheckCoalescing<nvidia::riva::asr::StreamingRecognizeResponse>();
  CheckCoalescing<google::cloud::speech::v1::StreamingRecognizeResponse>();
}

}  // namespace
}  // namespace oasr::server
