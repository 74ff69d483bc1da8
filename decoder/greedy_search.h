// Greedy (best path) CTC decoding: the most likely unit of every frame, with
// repeats merged and blanks removed.
#pragma once

#include <cstdint>
#include <vector>

#include "decoder/ctc_search.h"

namespace oasr::decoder {

// One hypothesis: argmax per frame (ties to the lower id). Its score and
// viterbi_score are the log-probability of that best path; a token's frame is
// the last frame of its run and its confidence the largest posterior in the
// run (the beam search's conventions). Phrase boosting does not apply.
// Thread-safety: none.
class GreedySearch final : public CtcSearch {
 public:
  explicit GreedySearch(int blank_id);

  void Reset() override;
  void SetContextGraph(const ContextGraph* graph) override;
  void Search(const float* log_probs, int num_frames, int vocab_size) override;
  void SearchPruned(const PrunedFrames& frames, int vocab_size) override;
  void Finalize() override {}
  int NumHypotheses() const override { return 1; }
  void GetHypothesis(int rank, Hypothesis* out) const override;
  bool DecodedSomething() const override { return !tokens_.empty(); }
  uint64_t Revision() const override { return revision_; }
  int64_t num_frames() const override { return frame_; }

 private:
  // One frame whose best unit is `best` (outside [0, V): no evidence).
  void Step(int32_t best, float best_lp, int vocab_size);

  int blank_id_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> frames_;
  std::vector<float> log_probs_;    // best log-prob of each token's run
  std::vector<float> confidences_;  // exp of log_probs_, kept as they change
  uint64_t revision_ = 0;
  int32_t previous_ = -1;  // argmax of the previous frame
  double score_ = 0.0;
  int64_t frame_ = 0;
};

}  // namespace oasr::decoder
