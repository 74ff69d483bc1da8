// Endpointing: rules that decide, after each chunk, that the speaker has
// finished (WeNet's CtcEndpoint). A frame is silence when P(blank) exceeds a
// threshold; a rule fires on the trailing silence and the segment length.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace oasr::decoder {

// Fires when (something was decoded, or the rule does not require it) and the
// trailing silence and the segment length both reach their minimums.
struct EndpointRule {
  bool must_decode_something = true;
  int min_trailing_silence_ms = 1000;
  int min_utterance_length_ms = 0;
};

struct EndpointConfig {
  bool enabled = true;
  float blank_threshold = 0.8f;  // P(blank) above this is silence
  // WeNet's defaults: 5 s of silence even when nothing was decoded; 1 s of
  // trailing silence after speech; a 20 s segment whatever it holds. The
  // first rule that fires ends the segment.
  std::vector<EndpointRule> rules = {
      {false, 5000, 0},
      {true, 1000, 0},
      {false, 0, 20000},
  };

  // INVALID_ARGUMENT naming the field, its value and the limit:
  // blank_threshold in [0, 1), at most 16 rules, non-negative times, and no
  // rule that fires on an empty segment (all minimums 0).
  absl::Status Validate() const;
};

// Counts frames and trailing silence of the current segment.
// Thread-safety: none.
class Endpointer {
 public:
  // `config` must be valid; `frame_shift_ms` > 0 (CHECK).
  Endpointer(const EndpointConfig& config, int blank_id, float frame_shift_ms);

  // Replaces the rules (keeps the counters). `config` must be valid.
  void Configure(const EndpointConfig& config);

  // Starts a new segment.
  void Reset();

  // Accounts for `num_frames` rows of log-probabilities [num_frames,
  // vocab_size] (only the blank column is read), then evaluates the rules.
  // Returns the index of the first rule that fires, or -1 (always -1 when
  // endpointing is disabled).
  int Update(const float* log_probs, int num_frames, int vocab_size, bool decoded_something);
  // The same from the frames' blank log-probs alone, [num_frames].
  int UpdateBlank(const float* blank, int num_frames, bool decoded_something);

  int64_t segment_frames() const { return frames_; }
  int64_t trailing_silence_frames() const { return trailing_silence_; }

 private:
  // Evaluates the rules after frames_ and trailing_silence_ were advanced.
  int Evaluate(bool decoded_something) const;
  void CountFrame(float blank_log_prob) {
    trailing_silence_ = blank_log_prob > log_blank_threshold_ ? trailing_silence_ + 1 : 0;
    ++frames_;
  }

  EndpointConfig config_;
  int blank_id_;
  float frame_shift_ms_;
  float log_blank_threshold_;
  int64_t frames_ = 0;
  int64_t trailing_silence_ = 0;
};

}  // namespace oasr::decoder
