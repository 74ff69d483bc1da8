// The tools' and benchmarks' WAV reader (scheduler/wav_file.h: 16-bit PCM or
// 32-bit float, channels averaged to mono). Input: a file's bytes.
#include <cstdlib>

#include "scheduler/wav_file.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = oasr::fuzz::WriteScratch(
      "input.wav", std::string_view(reinterpret_cast<const char*>(data), size));
  absl::StatusOr<oasr::scheduler::WavFile> wav = oasr::scheduler::ReadWav(path);
  // Every sample comes out of the file's bytes (at least two each).
  if (wav.ok() && wav->samples.size() * 2 > size) std::abort();
  return 0;
}
