// A minimal RIFF/WAVE reader for the tools and benchmarks: 16-bit PCM or
// 32-bit float, any channel count (averaged to mono), any rate (the engine
// checks the range). The server has its own reader (server/audio_codec.h);
// the scheduler may not depend on it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace oasr::scheduler {

struct WavFile {
  int sample_rate = 0;
  std::vector<int16_t> samples;  // Mono (channels averaged).
};

// NOT_FOUND when `path` cannot be opened; INVALID_ARGUMENT naming the file
// for anything but RIFF/WAVE with a 16-bit PCM or 32-bit float data chunk.
absl::StatusOr<WavFile> ReadWav(const std::string& path);

}  // namespace oasr::scheduler
