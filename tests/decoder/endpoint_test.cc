#include "decoder/endpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace oasr::decoder {
namespace {

using ::testing::HasSubstr;

// `frames` rows over V = 2 with P(blank) = p.
std::vector<float> Rows(int frames, float p_blank) {
  std::vector<float> out;
  for (int t = 0; t < frames; ++t) {
    out.push_back(std::log(p_blank));
    out.push_back(std::log(1.0f - p_blank));
  }
  return out;
}

// Feeds `chunks` chunks of `chunk` frames; returns the 1-based chunk at which
// a rule fired (and which), or 0.
int ChunksUntilEndpoint(Endpointer& e, int chunks, int chunk, float p_blank, bool decoded,
                        int* rule) {
  const std::vector<float> rows = Rows(chunk, p_blank);
  for (int c = 1; c <= chunks; ++c) {
    *rule = e.Update(rows.data(), chunk, 2, decoded);
    if (*rule >= 0) return c;
  }
  return 0;
}

TEST(EndpointTest, FiveSecondsOfSilenceWithNothingDecoded) {
  Endpointer e(EndpointConfig{}, 0, 40.0f);
  int rule = -1;
  // 5000 ms / 40 ms = 125 frames = chunk 25 of 5 frames, not earlier.
  EXPECT_EQ(ChunksUntilEndpoint(e, 100, 5, 0.9f, false, &rule), 25);
  EXPECT_EQ(rule, 0);
}

TEST(EndpointTest, OneSecondOfTrailingSilenceAfterSpeech) {
  Endpointer e(EndpointConfig{}, 0, 40.0f);
  int rule = -1;
  // Speech resets the trailing silence.
  EXPECT_EQ(ChunksUntilEndpoint(e, 10, 4, 0.1f, true, &rule), 0);
  EXPECT_EQ(e.trailing_silence_frames(), 0);
  // 1000 ms = 25 frames: after 7 chunks of 4 (28 frames), checked per chunk.
  EXPECT_EQ(ChunksUntilEndpoint(e, 100, 4, 0.85f, true, &rule), 7);
  EXPECT_EQ(rule, 1);
  // P(blank) must exceed the threshold: 0.8 is not silence.
  Endpointer strict(EndpointConfig{}, 0, 40.0f);
  EXPECT_EQ(ChunksUntilEndpoint(strict, 100, 4, 0.8f, true, &rule), 0);
}

TEST(EndpointTest, TwentySecondSegment) {
  Endpointer e(EndpointConfig{}, 0, 40.0f);
  int rule = -1;
  // 20000 ms = 500 frames of speech = 50 chunks of 10.
  EXPECT_EQ(ChunksUntilEndpoint(e, 100, 10, 0.1f, true, &rule), 50);
  EXPECT_EQ(rule, 2);
  EXPECT_EQ(e.segment_frames(), 500);
  e.Reset();
  EXPECT_EQ(e.segment_frames(), 0);
  EXPECT_EQ(ChunksUntilEndpoint(e, 49, 10, 0.1f, true, &rule), 0);
}

TEST(EndpointTest, RulesAreConfigurable) {
  EndpointConfig config;
  config.rules = {{true, 200, 1000}};  // 200 ms silence, only after 1 s of segment
  config.blank_threshold = 0.5f;
  Endpointer e(config, 1, 40.0f);  // blank is column 1 here: P = 1 - p
  int rule = -1;
  EXPECT_EQ(ChunksUntilEndpoint(e, 100, 5, 0.2f, true, &rule), 5);  // 25 frames = 1000 ms
  EXPECT_EQ(rule, 0);
  config.enabled = false;
  e.Configure(config);
  e.Reset();
  EXPECT_EQ(ChunksUntilEndpoint(e, 100, 5, 0.2f, true, &rule), 0);
  EXPECT_EQ(e.segment_frames(), 500);  // still counted
}

TEST(EndpointTest, ValidatesConfig) {
  EndpointConfig config;
  config.blank_threshold = 1.0f;
  EXPECT_EQ(config.Validate().message(), "endpoint.blank_threshold = 1 is outside [0, 1)");
  config = {};
  config.rules[1].min_trailing_silence_ms = -5;
  EXPECT_EQ(config.Validate().message(),
            "endpoint.rules[1].min_trailing_silence_ms = -5 is negative");
  config = {};
  config.rules.push_back({false, 0, 0});
  EXPECT_THAT(std::string(config.Validate().message()),
              HasSubstr("rules[3] fires after every chunk"));
  config.rules.assign(17, EndpointRule{});
  EXPECT_THAT(std::string(config.Validate().message()), HasSubstr("more than 16"));
  EXPECT_TRUE(EndpointConfig{}.Validate().ok());
}

}  // namespace
}  // namespace oasr::decoder
