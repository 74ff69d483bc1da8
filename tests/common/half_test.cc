// The host float conversions of common/half.h: float8 e4m3.
#include "common/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace oasr {
namespace {

bool IsNan8(uint8_t b) { return (b & 0x7fu) == 0x7fu; }

TEST(Float8E4M3Test, EveryEncodingDecodesAndEncodesBack) {
  for (int b = 0; b < 256; ++b) {
    const uint8_t e = static_cast<uint8_t>(b);
    const float f = Float8E4M3ToFloat(e);
    if (IsNan8(e)) {
      EXPECT_TRUE(std::isnan(f)) << b;
      EXPECT_TRUE(IsNan8(FloatToFloat8E4M3(f))) << b;
      continue;
    }
    EXPECT_EQ(FloatToFloat8E4M3(f), e) << b << " = " << f;
  }
}

TEST(Float8E4M3Test, KnownValuesSaturationAndTies) {
  EXPECT_EQ(Float8E4M3ToFloat(0x38), 1.0f);
  EXPECT_EQ(Float8E4M3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(Float8E4M3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(Float8E4M3ToFloat(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(Float8E4M3ToFloat(0xb8), -1.0f);
  EXPECT_EQ(FloatToFloat8E4M3(448.0f), 0x7e);
  EXPECT_EQ(FloatToFloat8E4M3(1e6f), 0x7e);
  EXPECT_EQ(FloatToFloat8E4M3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(FloatToFloat8E4M3(1.0625f), 0x38);                // Tie between 1 and 1.125: even.
  EXPECT_EQ(FloatToFloat8E4M3(1.1875f), 0x3a);                // Tie between 1.125 and 1.25: even.
  EXPECT_EQ(FloatToFloat8E4M3(std::ldexp(1.0f, -10)), 0x00);  // Half the least subnormal.
  EXPECT_EQ(FloatToFloat8E4M3(std::ldexp(3.0f, -10)), 0x02);  // 1.5 units: even.
  EXPECT_EQ(FloatToFloat8E4M3(-0.0f), 0x80);
}

// Every finite float goes to the nearest encoding, ties to the even one.
TEST(Float8E4M3Test, RoundsToNearestEven) {
  std::vector<float> values;
  for (int b = 0; b < 0x7f; ++b) values.push_back(Float8E4M3ToFloat(static_cast<uint8_t>(b)));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> exponent(-12.0f, 9.5f);
  for (int i = 0; i < 200000; ++i) {
    const float f = std::exp2(exponent(rng)) * (rng() & 1 ? -1.0f : 1.0f);
    const float a = std::fabs(f);
    int best = 0;
    for (int b = 1; b < 0x7f; ++b) {
      const float d = std::fabs(values[b] - a), db = std::fabs(values[best] - a);
      if (d < db || (d == db && (b & 1) == 0)) best = b;
    }
    const uint8_t want = static_cast<uint8_t>((f < 0 ? 0x80 : 0) | best);
    ASSERT_EQ(FloatToFloat8E4M3(f), want) << f;
  }
}

TEST(Float8E4M3Test, ConvertsArraysBothWays) {
  const std::vector<float> in = {0.0f, 1.0f, -2.5f, 300.0f, 1000.0f, 0.01f};
  std::vector<uint8_t> bytes(in.size());
  ConvertFromFloat(in.data(), static_cast<int64_t>(in.size()), DType::kFloat8E4M3, bytes.data());
  std::vector<float> out(in.size());
  ConvertToFloat(bytes.data(), static_cast<int64_t>(in.size()), DType::kFloat8E4M3, out.data());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i], RoundTo(DType::kFloat8E4M3, in[i])) << in[i];
  }
  EXPECT_EQ(out[4], 448.0f);
  EXPECT_EQ(DTypeSize(DType::kFloat8E4M3), 1u);
  EXPECT_STREQ(DTypeName(DType::kFloat8E4M3), "float8_e4m3");
}

}  // namespace
}  // namespace oasr
