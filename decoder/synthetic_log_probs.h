// Deterministic, realistically peaky CTC log-probabilities for tests and
// benchmarks: most frames are dominated by blank, the others by one token
// (often repeated over a few frames), with Gaussian noise on every logit and
// a Zipf-like token distribution, then log-softmax.
#pragma once

#include <cstdint>
#include <vector>

namespace oasr::decoder {

struct SyntheticLogProbsOptions {
  int num_frames = 100;
  int vocab_size = 30;
  int blank_id = 0;
  float blank_frame_ratio = 0.6f;  // frames whose winner is blank
  float repeat_ratio = 0.3f;       // token frames that repeat the previous token
  float peak = 8.0f;               // logit margin given to the frame's winner
  float noise = 1.0f;              // standard deviation of every logit
  uint32_t seed = 1;
};

// Returns [num_frames, vocab_size] row-major log-probabilities (each row
// log-sums to 0). With peak 0 the rows are plain random distributions.
std::vector<float> SyntheticLogProbs(const SyntheticLogProbsOptions& options);

}  // namespace oasr::decoder
