// The tools' and benchmarks' WAV reader (scheduler/wav_file.h).
#include "scheduler/wav_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace oasr::scheduler {
namespace {

void AppendU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void AppendU16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v & 0xff));
  out->push_back(static_cast<char>(v >> 8));
}

// A 32-bit float WAV file of `samples` with `channels` interleaved channels.
std::string FloatWav(const std::vector<float>& samples, int channels, int rate) {
  const uint32_t data_bytes = static_cast<uint32_t>(samples.size() * 4);
  std::string out = "RIFF";
  AppendU32(&out, 36 + data_bytes);
  out += "WAVEfmt ";
  AppendU32(&out, 16);
  AppendU16(&out, 3);  // IEEE float
  AppendU16(&out, static_cast<uint16_t>(channels));
  AppendU32(&out, static_cast<uint32_t>(rate));
  AppendU32(&out, static_cast<uint32_t>(rate * channels * 4));
  AppendU16(&out, static_cast<uint16_t>(channels * 4));
  AppendU16(&out, 32);
  out += "data";
  AppendU32(&out, data_bytes);
  out.append(reinterpret_cast<const char*>(samples.data()), data_bytes);
  return out;
}

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() / ("oasr_wav_" + name)).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(WavFileTest, FloatSamplesAreScaledAndAveraged) {
  const std::string path = WriteTemp("float.wav", FloatWav({0.5f, -0.5f, 0.25f, 0.75f}, 2, 8000));
  absl::StatusOr<WavFile> wav = ReadWav(path);
  ASSERT_TRUE(wav.ok()) << wav.status();
  EXPECT_EQ(wav->sample_rate, 8000);
  EXPECT_EQ(wav->samples, (std::vector<int16_t>{0, 16384}));
  std::filesystem::remove(path);
}

TEST(WavFileTest, NotANumberIsSilenceAndInfinitiesAreClamped) {
  // Found by tests/fuzz (wav_file): a NaN sample was cast to int16_t, which
  // is undefined (UBSan: "nan is outside the range of representable values").
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::string path = WriteTemp("nan.wav", FloatWav({nan, inf, -inf, 0.5f}, 1, 16000));
  absl::StatusOr<WavFile> wav = ReadWav(path);
  ASSERT_TRUE(wav.ok()) << wav.status();
  EXPECT_EQ(wav->samples, (std::vector<int16_t>{0, 32767, -32768, 16384}));
  // inf and -inf in one frame average to NaN.
  const std::string mixed = WriteTemp("mixed.wav", FloatWav({inf, -inf}, 2, 16000));
  wav = ReadWav(mixed);
  ASSERT_TRUE(wav.ok()) << wav.status();
  EXPECT_EQ(wav->samples, (std::vector<int16_t>{0}));
  std::filesystem::remove(path);
  std::filesystem::remove(mixed);
}

}  // namespace
}  // namespace oasr::scheduler
