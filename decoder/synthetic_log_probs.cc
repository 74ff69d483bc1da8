#include "decoder/synthetic_log_probs.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "common/check.h"

namespace oasr::decoder {

std::vector<float> SyntheticLogProbs(const SyntheticLogProbsOptions& options) {
  OASR_CHECK(options.vocab_size >= 2 && options.num_frames >= 0);
  OASR_CHECK(options.blank_id >= 0 && options.blank_id < options.vocab_size);
  const int v = options.vocab_size;
  std::mt19937 rng(options.seed);
  std::normal_distribution<float> noise(0.0f, options.noise);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> out(static_cast<size_t>(options.num_frames) * v);
  int previous = options.blank_id;
  for (int t = 0; t < options.num_frames; ++t) {
    float* row = out.data() + static_cast<size_t>(t) * v;
    for (int i = 0; i < v; ++i) row[i] = noise(rng);
    int winner = options.blank_id;
    if (uniform(rng) >= options.blank_frame_ratio) {
      if (previous != options.blank_id && uniform(rng) < options.repeat_ratio) {
        winner = previous;
      } else {
        // Squaring a uniform draw favours low ids, like a frequency-sorted
        // BPE vocabulary.
        const float u = uniform(rng);
        winner = static_cast<int>(u * u * (v - 1));
        if (winner >= options.blank_id) ++winner;
      }
    }
    row[winner] += options.peak;
    previous = winner;
    const float max = *std::max_element(row, row + v);
    double sum = 0.0;
    for (int i = 0; i < v; ++i) sum += std::exp(static_cast<double>(row[i] - max));
    const float log_sum = max + static_cast<float>(std::log(sum));
    for (int i = 0; i < v; ++i) row[i] -= log_sum;
  }
  return out;
}

}  // namespace oasr::decoder
