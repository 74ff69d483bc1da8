#include "decoder/greedy_search.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace oasr::decoder {

GreedySearch::GreedySearch(int blank_id) : blank_id_(blank_id) { Reset(); }

void GreedySearch::Reset() {
  tokens_.clear();
  frames_.clear();
  log_probs_.clear();
  confidences_.clear();
  ++revision_;
  previous_ = -1;
  score_ = 0.0;
  frame_ = 0;
}

void GreedySearch::SetContextGraph(const ContextGraph* /*graph*/) {
  OASR_CHECK(frame_ == 0, "the context graph can only change before the first frame");
}

void GreedySearch::Search(const float* log_probs, int num_frames, int vocab_size) {
  for (int t = 0; t < num_frames; ++t) {
    int32_t best = -1;
    float best_lp = kLogZero;
    TopK(log_probs + static_cast<int64_t>(t) * vocab_size, vocab_size, 1, &best, &best_lp);
    Step(best, best_lp, vocab_size);
  }
}

void GreedySearch::SearchPruned(const PrunedFrames& frames, int vocab_size) {
  for (int t = 0; t < frames.num_frames; ++t) {
    const int64_t at = static_cast<int64_t>(t) * frames.k;
    Step(frames.k > 0 ? frames.ids[at] : -1, frames.k > 0 ? frames.log_probs[at] : kLogZero,
         vocab_size);
  }
}

void GreedySearch::Step(int32_t best, float best_lp, int vocab_size) {
  const int64_t frame = frame_++;
  if (best < 0 || best >= vocab_size) {  // a row of NaN carries no evidence; treat it as silence
    previous_ = blank_id_;
    return;
  }
  score_ += best_lp;
  if (best == blank_id_) {
    previous_ = best;
    return;
  }
  if (best == previous_) {
    frames_.back() = static_cast<int32_t>(frame);
    if (best_lp > log_probs_.back()) {
      log_probs_.back() = best_lp;
      confidences_.back() = std::exp(best_lp);
      ++revision_;
    }
  } else {
    tokens_.push_back(best);
    frames_.push_back(static_cast<int32_t>(frame));
    log_probs_.push_back(best_lp);
    confidences_.push_back(std::exp(best_lp));
    ++revision_;
  }
  previous_ = best;
}

void GreedySearch::GetHypothesis(int rank, Hypothesis* out) const {
  OASR_CHECK_EQ(rank, 0);
  out->tokens.assign(tokens_.begin(), tokens_.end());
  out->token_frames.assign(frames_.begin(), frames_.end());
  // Each token's exp was taken when its log-prob last changed, not again
  // for every partial result of the segment.
  out->token_confidences.assign(confidences_.begin(), confidences_.end());
  out->score = static_cast<float>(score_);
  out->ctc_score = static_cast<float>(score_);
  out->context_score = 0.0f;
  out->viterbi_score = static_cast<float>(score_);
}

}  // namespace oasr::decoder
