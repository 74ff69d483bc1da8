// Audio as clients send it, turned into the 16-bit PCM the engine takes:
// LINEAR16 bytes, G.711 mu-law and A-law, and RIFF/WAVE files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace oasr::server {

enum class SampleEncoding { kLinear16, kMulaw, kAlaw };

// Decodes `bytes` of mono audio in `encoding`, appending the samples to
// `out`. INVALID_ARGUMENT naming `field` when LINEAR16 bytes are not a whole
// number of 16-bit samples. Thread-safe (no state).
absl::Status DecodeSamples(SampleEncoding encoding, std::string_view bytes,
                           std::vector<int16_t>* out, const char* field = "audio_content");

// One G.711 sample to linear 16-bit PCM (ITU-T G.711 expansion).
int16_t MulawToLinear(uint8_t code);
int16_t AlawToLinear(uint8_t code);

// A RIFF/WAVE file's audio.
struct WavAudio {
  int sample_rate = 0;
  int channels = 0;
  SampleEncoding encoding = SampleEncoding::kLinear16;
  std::string_view data;  // The "data" chunk; points into the parsed bytes.
};

// True when `bytes` starts with a RIFF/WAVE header.
bool LooksLikeWav(std::string_view bytes);

// Parses a RIFF/WAVE file held in `bytes` (which must outlive the result).
// Accepts PCM 16-bit (format 1, or WAVE_FORMAT_EXTENSIBLE with the PCM
// subformat), mu-law (7) and A-law (6). INVALID_ARGUMENT (field "audio")
// naming what is wrong: no RIFF/WAVE header, no fmt or data chunk, another
// sample format or width.
absl::StatusOr<WavAudio> ParseWav(std::string_view bytes);

// A mono 16-bit PCM WAV file of `samples` at `sample_rate` (for clients and
// tests).
std::string EncodeWav(const std::vector<int16_t>& samples, int sample_rate);

}  // namespace oasr::server
