#include "server/audio_codec.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace oasr::server {
namespace {

uint32_t ReadU32(std::string_view bytes, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(bytes[at + i]);
  return v;
}

uint16_t ReadU16(std::string_view bytes, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(bytes[at]) |
                               (static_cast<uint8_t>(bytes[at + 1]) << 8));
}

void AppendU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void AppendU16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v & 0xff));
  out->push_back(static_cast<char>(v >> 8));
}

constexpr uint16_t kFormatPcm = 1;
constexpr uint16_t kFormatAlaw = 6;
constexpr uint16_t kFormatMulaw = 7;
constexpr uint16_t kFormatExtensible = 0xfffe;

}  // namespace

int16_t MulawToLinear(uint8_t code) {
  code = static_cast<uint8_t>(~code);
  const int exponent = (code >> 4) & 0x07;
  const int mantissa = code & 0x0f;
  const int magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84;
  return static_cast<int16_t>((code & 0x80) ? -magnitude : magnitude);
}

int16_t AlawToLinear(uint8_t code) {
  code ^= 0x55;
  const int exponent = (code >> 4) & 0x07;
  const int mantissa = code & 0x0f;
  int magnitude = exponent == 0 ? (mantissa << 4) + 8 : ((mantissa << 4) + 0x108) << (exponent - 1);
  return static_cast<int16_t>((code & 0x80) ? magnitude : -magnitude);
}

absl::Status DecodeSamples(SampleEncoding encoding, std::string_view bytes,
                           std::vector<int16_t>* out, const char* field) {
  switch (encoding) {
    case SampleEncoding::kLinear16: {
      if (bytes.size() % 2 != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ": ", bytes.size(), " bytes is not a whole number of 16-bit LINEAR16 samples"));
      }
      // memcpy's pointers must not be null, even for no bytes (an empty
      // message into an empty vector).
      if (bytes.empty()) return absl::OkStatus();
      const size_t first = out->size();
      out->resize(first + bytes.size() / 2);
      // Little-endian on the wire; every target this builds for is too.
      std::memcpy(out->data() + first, bytes.data(), bytes.size());
      return absl::OkStatus();
    }
    case SampleEncoding::kMulaw:
      out->reserve(out->size() + bytes.size());
      for (char c : bytes) out->push_back(MulawToLinear(static_cast<uint8_t>(c)));
      return absl::OkStatus();
    case SampleEncoding::kAlaw:
      out->reserve(out->size() + bytes.size());
      for (char c : bytes) out->push_back(AlawToLinear(static_cast<uint8_t>(c)));
      return absl::OkStatus();
  }
  return absl::InternalError("unknown sample encoding");
}

bool LooksLikeWav(std::string_view bytes) {
  return bytes.size() >= 12 && bytes.substr(0, 4) == "RIFF" && bytes.substr(8, 4) == "WAVE";
}

absl::StatusOr<WavAudio> ParseWav(std::string_view bytes) {
  if (!LooksLikeWav(bytes)) {
    return absl::InvalidArgumentError("audio: not a RIFF/WAVE file (no 'RIFF....WAVE' header)");
  }
  WavAudio wav;
  bool have_fmt = false;
  size_t at = 12;
  while (at + 8 <= bytes.size()) {
    const std::string_view id = bytes.substr(at, 4);
    const uint32_t size = ReadU32(bytes, at + 4);
    const size_t body = at + 8;
    if (id == "fmt ") {
      if (size < 16 || body + size > bytes.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("audio: WAV fmt chunk of ", size, " bytes is truncated"));
      }
      uint16_t format = ReadU16(bytes, body);
      wav.channels = ReadU16(bytes, body + 2);
      wav.sample_rate = static_cast<int>(ReadU32(bytes, body + 4));
      const uint16_t bits = ReadU16(bytes, body + 14);
      if (format == kFormatExtensible && size >= 26) format = ReadU16(bytes, body + 24);
      if (format == kFormatPcm && bits == 16) {
        wav.encoding = SampleEncoding::kLinear16;
      } else if (format == kFormatMulaw && bits == 8) {
        wav.encoding = SampleEncoding::kMulaw;
      } else if (format == kFormatAlaw && bits == 8) {
        wav.encoding = SampleEncoding::kAlaw;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("audio: WAV format ", format, " with ", bits,
                         "-bit samples is not supported (16-bit PCM, 8-bit mu-law or A-law only)"));
      }
      have_fmt = true;
    } else if (id == "data") {
      if (!have_fmt) return absl::InvalidArgumentError("audio: WAV data chunk before fmt chunk");
      // Streams written before their length is known carry a size past the
      // end; take what is there.
      wav.data = bytes.substr(body, std::min<size_t>(size, bytes.size() - body));
      return wav;
    }
    at = body + size + (size & 1);  // Chunks are padded to even sizes.
  }
  return absl::InvalidArgumentError(have_fmt ? "audio: WAV file has no data chunk"
                                             : "audio: WAV file has no fmt chunk");
}

std::string EncodeWav(const std::vector<int16_t>& samples, int sample_rate) {
  const uint32_t data_bytes = static_cast<uint32_t>(samples.size() * 2);
  std::string out = "RIFF";
  AppendU32(&out, 36 + data_bytes);
  out += "WAVEfmt ";
  AppendU32(&out, 16);
  AppendU16(&out, kFormatPcm);
  AppendU16(&out, 1);
  AppendU32(&out, static_cast<uint32_t>(sample_rate));
  AppendU32(&out, static_cast<uint32_t>(sample_rate * 2));
  AppendU16(&out, 2);
  AppendU16(&out, 16);
  out += "data";
  AppendU32(&out, data_bytes);
  out.append(reinterpret_cast<const char*>(samples.data()), data_bytes);
  return out;
}

}  // namespace oasr::server
