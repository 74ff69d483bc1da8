#include "common/pcm16.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace oasr {
namespace {

// The PCM rings' 16-bit samples: rounded to the nearest (halves away from
// zero), saturated, and exact back for the 16-bit values a 16 kHz client
// sends.
TEST(Pcm16Test, RoundsToSixteenBitsAndBack) {
  const std::vector<float> in = {0.0f,     0.4f,     0.6f,      -0.6f,     -1.4f, 1234.0f, 2.5f,
                                 32767.4f, 32767.6f, -32768.0f, -32769.5f, 1e9f,  -1e9f,   -2.5f};
  const std::vector<int16_t> want = {0,     0,     1,      -1,     -1,    1234,   3,
                                     32767, 32767, -32768, -32768, 32767, -32768, -3};
  std::vector<int16_t> got(in.size());
  RoundToPcm16(in.data(), static_cast<int64_t>(in.size()), got.data());
  EXPECT_EQ(got, want);
  std::vector<int16_t> all(65536);
  for (int i = 0; i < 65536; ++i) all[i] = static_cast<int16_t>(i - 32768);
  std::vector<float> wide(all.size());
  Pcm16ToFloat(all.data(), static_cast<int64_t>(all.size()), wide.data());
  std::vector<int16_t> back(all.size());
  RoundToPcm16(wide.data(), static_cast<int64_t>(wide.size()), back.data());
  EXPECT_EQ(back, all);
  for (int i = 0; i < 65536; ++i) ASSERT_EQ(wide[i], static_cast<float>(i - 32768));
}

}  // namespace
}  // namespace oasr
