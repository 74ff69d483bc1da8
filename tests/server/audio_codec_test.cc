// G.711 expansion, LINEAR16 byte checks and the WAV reader/writer.
#include "server/audio_codec.h"

#include <gtest/gtest.h>

namespace oasr::server {
namespace {

TEST(AudioCodecTest, MulawMatchesG711) {
  // Reference values of the ITU-T G.711 mu-law expansion table.
  EXPECT_EQ(MulawToLinear(0xff), 0);
  EXPECT_EQ(MulawToLinear(0x7f), 0);
  EXPECT_EQ(MulawToLinear(0x00), -32124);
  EXPECT_EQ(MulawToLinear(0x80), 32124);
  EXPECT_EQ(MulawToLinear(0xf0), 120);
  EXPECT_EQ(MulawToLinear(0x70), -120);
  // Monotonic over each half.
  for (int c = 0x80; c < 0xff; ++c) {
    EXPECT_GT(MulawToLinear(static_cast<uint8_t>(c)), MulawToLinear(static_cast<uint8_t>(c + 1)));
  }
}

TEST(AudioCodecTest, AlawMatchesG711) {
  EXPECT_EQ(AlawToLinear(0xd5), 8);
  EXPECT_EQ(AlawToLinear(0x55), -8);
  EXPECT_EQ(AlawToLinear(0xaa), 32256);
  EXPECT_EQ(AlawToLinear(0x2a), -32256);
}

TEST(AudioCodecTest, Linear16NeedsWholeSamples) {
  std::vector<int16_t> out;
  const std::string bytes("\x01\x00\xff\x7f", 4);
  ASSERT_TRUE(DecodeSamples(SampleEncoding::kLinear16, bytes, &out).ok());
  EXPECT_EQ(out, (std::vector<int16_t>{1, 32767}));
  absl::Status odd = DecodeSamples(SampleEncoding::kLinear16, bytes.substr(0, 3), &out);
  EXPECT_EQ(odd.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(odd.message().find("audio_content: 3 bytes"), std::string::npos) << odd;
  EXPECT_EQ(out.size(), 2u) << "a refused message must not append anything";
}

TEST(AudioCodecTest, EmptyMessagesDecodeToNothing) {
  // Found by tests/fuzz (audio_codec): no LINEAR16 bytes into an empty
  // vector passed memcpy a null pointer (undefined even for zero bytes).
  for (SampleEncoding encoding :
       {SampleEncoding::kLinear16, SampleEncoding::kMulaw, SampleEncoding::kAlaw}) {
    std::vector<int16_t> out;
    EXPECT_TRUE(DecodeSamples(encoding, std::string_view(), &out).ok());
    EXPECT_TRUE(DecodeSamples(encoding, "", &out).ok());
    EXPECT_TRUE(out.empty());
  }
}

TEST(AudioCodecTest, WavRoundTripAndErrors) {
  const std::vector<int16_t> samples = {0, 1, -1, 1000, -32768, 32767, 7};
  const std::string file = EncodeWav(samples, 8000);
  ASSERT_TRUE(LooksLikeWav(file));
  absl::StatusOr<WavAudio> wav = ParseWav(file);
  ASSERT_TRUE(wav.ok()) << wav.status();
  EXPECT_EQ(wav->sample_rate, 8000);
  EXPECT_EQ(wav->channels, 1);
  std::vector<int16_t> decoded;
  ASSERT_TRUE(DecodeSamples(wav->encoding, wav->data, &decoded).ok());
  EXPECT_EQ(decoded, samples);

  EXPECT_FALSE(ParseWav("not a wav file").ok());
  std::string eight_bit = file;
  eight_bit[34] = 8;  // bits per sample
  absl::StatusOr<WavAudio> refused = ParseWav(eight_bit);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("8-bit"), std::string::npos) << refused.status();
  EXPECT_FALSE(ParseWav(file.substr(0, 36)).ok()) << "no data chunk";
}

}  // namespace
}  // namespace oasr::server
