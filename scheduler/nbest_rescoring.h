// A segment's final result rescored with the attention decoder (WeNet's
// attention_rescoring): every hypothesis gets its decoder score, and the
// n-best is ordered by rescoring_weight * decoder score + ctc_weight * the
// CTC search's ranking score (its prefix score with any phrase and language
// model terms, as WeNet's runtime combines them), the first on ties.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "decoder/decode_result.h"
#include "encoder/attention_rescorer.h"

namespace oasr::scheduler {

// Rescores `result` over `memory`, the segment's encoder output [frames, d]
// on the host, then keeps its first `keep` hypotheses. The right-to-left
// decoder runs only when weights.reverse_weight > 0. Errors are the
// rescorer's; `result` is unchanged then.
absl::Status RescoreResult(encoder::AttentionRescorer& rescorer,
                           const encoder::RescoringWeights& weights, const float* memory,
                           int64_t frames, size_t keep, decoder::DecodeResult* result);

// The second half of RescoreResult, for scores computed elsewhere (a batch
// of segments): each hypothesis' decoder score from its left (and, when
// reverse_weight > 0, right) score, the n-best ordered by the total and cut
// to `keep`. An empty n-best is left as it is (not marked rescored).
void ApplyDecoderScores(const encoder::RescoringWeights& weights, std::span<const double> left,
                        std::span<const double> right, size_t keep, decoder::DecodeResult* result);

}  // namespace oasr::scheduler
