#include "server/compat_api.h"

#include "common/status.h"
#include "server/audio_codec.h"

namespace oasr::server::compat {
namespace {

// How a sample format reads in a message to a client of any of the APIs
// (their enums name the formats differently).
const char* FormatName(asr::v1::AudioEncoding encoding) {
  switch (encoding) {
    case asr::v1::MULAW:
      return "mu-law";
    case asr::v1::ALAW:
      return "A-law";
    default:
      return "16-bit PCM";
  }
}

asr::v1::AudioEncoding EncodingOf(SampleEncoding encoding) {
  switch (encoding) {
    case SampleEncoding::kMulaw:
      return asr::v1::MULAW;
    case SampleEncoding::kAlaw:
      return asr::v1::ALAW;
    case SampleEncoding::kLinear16:
      break;
  }
  return asr::v1::LINEAR16;
}

}  // namespace

absl::StatusOr<RecognizeInput> RecognizeInputFor(absl::StatusOr<asr::v1::RecognitionConfig> config,
                                                 std::string_view audio, const char* field) {
  if (!config.ok()) return config.status();
  if (audio.empty()) return Invalid(field, ": empty; send the recording's bytes");
  if (LooksLikeWav(audio)) {
    OASR_ASSIGN_OR_RETURN(WavAudio wav, ParseWav(audio));
    const asr::v1::AudioEncoding header = EncodingOf(wav.encoding);
    if (config->encoding() != asr::v1::ENCODING_UNSPECIFIED && config->encoding() != header) {
      return Invalid("encoding: the config's ", FormatName(config->encoding()),
                     " does not match the WAV header's ", FormatName(header),
                     " (leave the encoding unspecified for a WAV file)");
    }
    if (config->sample_rate_hertz() != 0 && config->sample_rate_hertz() != wav.sample_rate) {
      return Invalid("sample_rate_hertz: ", config->sample_rate_hertz(),
                     " does not match the WAV header's ", wav.sample_rate,
                     " (omit it for a WAV file, or give the header's)");
    }
    config->set_encoding(asr::v1::WAV);
  }
  return RecognizeInput{*std::move(config), audio};
}

}  // namespace oasr::server::compat
