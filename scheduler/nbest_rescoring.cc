#include "scheduler/nbest_rescoring.h"

#include <algorithm>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "common/status.h"

namespace oasr::scheduler {

absl::Status RescoreResult(encoder::AttentionRescorer& rescorer,
                           const encoder::RescoringWeights& weights, const float* memory,
                           int64_t frames, size_t keep, decoder::DecodeResult* result) {
  std::vector<decoder::Hypothesis>& nbest = result->nbest;
  const size_t n = nbest.size();
  if (n == 0) return absl::OkStatus();
  std::vector<std::span<const int32_t>> hyps(n);
  for (size_t i = 0; i < n; ++i) hyps[i] = nbest[i].tokens;
  std::vector<double> left(n), right;
  const bool both = weights.reverse_weight > 0.0f;
  if (both) right.resize(n);
  OASR_RETURN_IF_ERROR(rescorer.Score(memory, frames, hyps, left, right));
  ApplyDecoderScores(weights, left, right, keep, result);
  return absl::OkStatus();
}

void ApplyDecoderScores(const encoder::RescoringWeights& weights, std::span<const double> left,
                        std::span<const double> right, size_t keep, decoder::DecodeResult* result) {
  std::vector<decoder::Hypothesis>& nbest = result->nbest;
  const size_t n = nbest.size();
  if (n == 0) return;
  const bool both = weights.reverse_weight > 0.0f;
  std::vector<double> total(n);
  for (size_t i = 0; i < n; ++i) {
    const double dec =
        both ? (1.0 - weights.reverse_weight) * left[i] + weights.reverse_weight * right[i]
             : left[i];
    nbest[i].attention_score = static_cast<float>(dec);
    total[i] = weights.rescoring_weight * dec + weights.ctc_weight * nbest[i].score;
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return total[a] > total[b]; });
  std::vector<decoder::Hypothesis> sorted;
  sorted.reserve(std::min(keep, n));
  for (size_t i = 0; i < n && i < keep; ++i) sorted.push_back(std::move(nbest[order[i]]));
  nbest = std::move(sorted);
  result->rescored = true;
}

}  // namespace oasr::scheduler
