#include "decoder/endpoint.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace oasr::decoder {
namespace {

constexpr size_t kMaxRules = 16;

}  // namespace

absl::Status EndpointConfig::Validate() const {
  if (!(blank_threshold >= 0.0f && blank_threshold < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint.blank_threshold = ", blank_threshold, " is outside [0, 1)"));
  }
  if (rules.size() > kMaxRules) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint.rules has ", rules.size(), " rules, more than ", kMaxRules));
  }
  for (size_t i = 0; i < rules.size(); ++i) {
    const EndpointRule& rule = rules[i];
    if (rule.min_trailing_silence_ms < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "endpoint.rules[", i, "].min_trailing_silence_ms = ", rule.min_trailing_silence_ms,
          " is negative"));
    }
    if (rule.min_utterance_length_ms < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "endpoint.rules[", i, "].min_utterance_length_ms = ", rule.min_utterance_length_ms,
          " is negative"));
    }
    if (!rule.must_decode_something && rule.min_trailing_silence_ms == 0 &&
        rule.min_utterance_length_ms == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "endpoint.rules[", i,
          "] fires after every chunk: min_trailing_silence_ms and min_utterance_length_ms are 0 "
          "and must_decode_something is false"));
    }
  }
  return absl::OkStatus();
}

Endpointer::Endpointer(const EndpointConfig& config, int blank_id, float frame_shift_ms)
    : blank_id_(blank_id), frame_shift_ms_(frame_shift_ms) {
  OASR_CHECK(frame_shift_ms > 0.0f);
  OASR_CHECK(blank_id >= 0);
  Configure(config);
}

void Endpointer::Configure(const EndpointConfig& config) {
  OASR_DCHECK(config.Validate().ok());
  config_ = config;  // reuses the rules' storage when it is large enough
  log_blank_threshold_ = std::log(config.blank_threshold);
}

void Endpointer::Reset() {
  frames_ = 0;
  trailing_silence_ = 0;
}

int Endpointer::Update(const float* log_probs, int num_frames, int vocab_size,
                       bool decoded_something) {
  // P(blank) > threshold, compared in the log domain.
  for (int t = 0; t < num_frames; ++t) {
    CountFrame(log_probs[static_cast<int64_t>(t) * vocab_size + blank_id_]);
  }
  return Evaluate(decoded_something);
}

int Endpointer::UpdateBlank(const float* blank, int num_frames, bool decoded_something) {
  for (int t = 0; t < num_frames; ++t) CountFrame(blank[t]);
  return Evaluate(decoded_something);
}

int Endpointer::Evaluate(bool decoded_something) const {
  if (!config_.enabled) return -1;
  const double segment_ms = static_cast<double>(frames_) * frame_shift_ms_;
  const double silence_ms = static_cast<double>(trailing_silence_) * frame_shift_ms_;
  for (size_t i = 0; i < config_.rules.size(); ++i) {
    const EndpointRule& rule = config_.rules[i];
    if ((decoded_something || !rule.must_decode_something) &&
        silence_ms >= rule.min_trailing_silence_ms && segment_ms >= rule.min_utterance_length_ms) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

}  // namespace oasr::decoder
