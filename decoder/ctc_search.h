// The search algorithms behind the CTC decoder (greedy, prefix beam search),
// behind one small interface so a stream can hold either, plus the numeric
// helpers they share.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "decoder/context_graph.h"
#include "decoder/decode_result.h"

namespace oasr::decoder {

inline constexpr float kLogZero = -std::numeric_limits<float>::infinity();

// log(exp(x) + exp(y)), exact for -inf operands.
inline float LogAdd(float x, float y) {
  if (x < y) std::swap(x, y);
  if (y == kLogZero) return x;
  return x + std::log1p(std::exp(y - x));
}

// The `k` largest of `values[0, n)`, best first, ties to the lower index; NaN
// values are never chosen. Writes ids and values; returns how many it wrote
// (min(k, number of non-NaN values)).
int TopK(const float* values, int n, int k, int32_t* ids, float* out_values);

// A chunk's frames pruned to what a search reads of them: frame t's k best
// units (ids[t * k + j] with log_probs[t * k + j], best first, ties to the
// lower id; an id outside [0, V) ends the frame's list early, as NaN rows do)
// and its blank log-prob blank[t]. Searches that read at most k units per
// frame (the greedy search 1, the prefix beam search first_beam_size) and the
// blank column decode exactly as from the full rows. Non-owning, host.
struct PrunedFrames {
  const int32_t* ids = nullptr;      // [num_frames, k]
  const float* log_probs = nullptr;  // [num_frames, k]
  const float* blank = nullptr;      // [num_frames]
  int k = 0;
  int num_frames = 0;
};

// Per-stream search state. Implementations reuse their memory across Reset().
// Thread-safety: none; one stream is decoded by one thread at a time.
class CtcSearch {
 public:
  virtual ~CtcSearch() = default;

  // Back to the state before the first frame (frame counter 0, one empty
  // hypothesis), keeping allocated memory and the context graph.
  virtual void Reset() = 0;

  // Phrase boosting for the frames that follow; `graph` is not owned and must
  // outlive the search or the next call (nullptr disables boosting). Only
  // before the first frame after a Reset (CHECK).
  virtual void SetContextGraph(const ContextGraph* graph) = 0;

  // Consumes `num_frames` frames of log-probabilities, row-major
  // [num_frames, vocab_size] on the host.
  virtual void Search(const float* log_probs, int num_frames, int vocab_size) = 0;

  // The same from pruned frames: identical to Search over the rows they were
  // selected from when frames.k covers what the search reads per frame (the
  // greedy search 1, the prefix beam search min(first_beam_size, V)); with
  // fewer, the search expands only the units it is given.
  virtual void SearchPruned(const PrunedFrames& frames, int vocab_size) = 0;

  // The input ends: unfinished phrase matches lose their bonus and the
  // hypotheses are re-ranked. Only Reset may follow.
  virtual void Finalize() = 0;

  // Hypotheses currently held, at least 1.
  virtual int NumHypotheses() const = 0;

  // Changes whenever what GetHypothesis writes for a transcript may have
  // changed (tokens, their confidences; a Reset), and only then may it stay
  // the same across calls that consume frames: equal revisions mean the
  // same tokens and confidences, so a partial result's text need not be
  // built again. Never reset, so a value is not met again by the same
  // search (a search may report a change that changed nothing).
  virtual uint64_t Revision() const = 0;

  // Writes hypothesis `rank` (0 = best) into `out`: tokens, token_frames
  // (relative to the last Reset), token_confidences and the scores. Leaves the
  // text fields alone. Reuses `out`'s vectors.
  virtual void GetHypothesis(int rank, Hypothesis* out) const = 0;

  // True when the best hypothesis holds at least one token (for endpointing).
  virtual bool DecodedSomething() const = 0;

  // Frames consumed since the last Reset.
  virtual int64_t num_frames() const = 0;
};

}  // namespace oasr::decoder
