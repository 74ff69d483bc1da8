// The server's audio formats (server/audio_codec.h): LINEAR16, mu-law and
// A-law samples as clients stream them, and RIFF/WAVE files as Recognize and
// the clients take them. Input: one byte choosing the streamed encoding,
// then the bytes, which are also parsed as a WAV file.
#include <cstdlib>
#include <cstring>

#include "server/audio_codec.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using oasr::server::SampleEncoding;

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  oasr::fuzz::InputReader in(data, size);
  const SampleEncoding encoding = static_cast<SampleEncoding>(in.Byte() % 3);
  const std::string_view bytes = in.Rest();

  // Streamed samples: one per byte (G.711) or per two (LINEAR16, whole
  // samples only), appended after what is already there.
  std::vector<int16_t> samples = {123};
  const absl::Status decoded = oasr::server::DecodeSamples(encoding, bytes, &samples);
  const bool linear = encoding == SampleEncoding::kLinear16;
  Check(decoded.ok() == (!linear || bytes.size() % 2 == 0));
  Check(samples.size() == 1 + (decoded.ok() ? (linear ? bytes.size() / 2 : bytes.size()) : 0));

  // The same bytes as a WAV file: a data chunk that lies inside them.
  absl::StatusOr<oasr::server::WavAudio> wav = oasr::server::ParseWav(bytes);
  Check(!wav.ok() || oasr::server::LooksLikeWav(bytes));
  if (wav.ok()) {
    Check(wav->data.data() >= bytes.data() &&
          wav->data.data() + wav->data.size() <= bytes.data() + bytes.size());
    std::vector<int16_t> from_wav;
    (void)oasr::server::DecodeSamples(wav->encoding, wav->data, &from_wav);
  }

  // What EncodeWav writes, ParseWav reads back unchanged.
  if (linear && decoded.ok()) {
    samples.erase(samples.begin());
    const int rate = 8000 + static_cast<int>(bytes.size() % 40001);
    const std::string file = oasr::server::EncodeWav(samples, rate);
    absl::StatusOr<oasr::server::WavAudio> back = oasr::server::ParseWav(file);
    Check(back.ok() && back->sample_rate == rate && back->channels == 1 &&
          back->encoding == SampleEncoding::kLinear16 && back->data.size() == bytes.size() &&
          std::memcmp(back->data.data(), bytes.data(), bytes.size()) == 0);
  }
  return 0;
}
