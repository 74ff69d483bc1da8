#include "scheduler/wav_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace oasr::scheduler {

namespace {

uint32_t Le(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

absl::StatusOr<WavFile> ReadWav(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 12 || bytes.compare(0, 4, "RIFF") != 0 || bytes.compare(8, 4, "WAVE") != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a RIFF/WAVE file"));
  }
  int format = 0, channels = 0, bits = 0;
  WavFile wav;
  for (size_t pos = 12; pos + 8 <= bytes.size();) {
    const std::string id = bytes.substr(pos, 4);
    const size_t size = Le(b + pos + 4, 4);
    const size_t body = pos + 8;
    if (body + size > bytes.size() && id != "data") break;
    if (id == "fmt " && size >= 16) {
      format = static_cast<int>(Le(b + body, 2));
      channels = static_cast<int>(Le(b + body + 2, 2));
      wav.sample_rate = static_cast<int>(Le(b + body + 4, 4));
      bits = static_cast<int>(Le(b + body + 14, 2));
      // WAVE_FORMAT_EXTENSIBLE: the sub-format's first two bytes are the tag.
      if (format == 0xFFFE && size >= 26) format = static_cast<int>(Le(b + body + 24, 2));
    } else if (id == "data") {
      const bool pcm16 = format == 1 && bits == 16, float32 = format == 3 && bits == 32;
      if (channels < 1 || !(pcm16 || float32)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": format ", format, ", ", bits, " bits, ", channels,
                         " channels; only 16-bit PCM or 32-bit float (missing or bad fmt chunk?)"));
      }
      const size_t frame_bytes = static_cast<size_t>(channels) * (bits / 8);
      // A truncated last chunk (streamed writers leave size 0 or too large)
      // keeps what is there.
      const size_t available = std::min(size, bytes.size() - body) / frame_bytes;
      wav.samples.resize(available);
      for (size_t i = 0; i < available; ++i) {
        double sum = 0;
        for (int ch = 0; ch < channels; ++ch) {
          const unsigned char* s = b + body + i * frame_bytes + ch * (bits / 8);
          if (pcm16) {
            sum += static_cast<int16_t>(Le(s, 2));
          } else {
            float f;
            std::memcpy(&f, s, sizeof(f));
            sum += static_cast<double>(f) * 32768.0;
          }
        }
        // A NaN sample (or +inf and -inf averaged) is silence: casting NaN
        // to an integer is undefined.
        const double mean = sum / channels;
        wav.samples[i] =
            std::isnan(mean) ? 0 : static_cast<int16_t>(std::clamp(mean, -32768.0, 32767.0));
      }
      return wav;
    }
    pos = body + size + (size & 1);  // Chunks are padded to even sizes.
  }
  return absl::InvalidArgumentError(absl::StrCat(path, ": no data chunk"));
}

}  // namespace oasr::scheduler
