#include "decoder/prefix_beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace oasr::decoder {
namespace {

// Arenas smaller than this are never compacted: compaction would cost more
// than the memory it frees.
constexpr size_t kMinCompactNodes = 1024;
constexpr int kMaxBeam = 1024;

// Appends to `active`, growing `spare` alongside it. Compaction copies into
// the spare and swaps the two, so keeping their capacities equal is what lets
// a reused search stop allocating once it has seen its largest input.
template <typename T>
void PushBackTwinned(std::vector<T>& active, std::vector<T>& spare, const T& value) {
  if (active.size() == active.capacity()) {
    const size_t capacity = std::max<size_t>(2 * active.capacity(), kMinCompactNodes);
    active.reserve(capacity);
    spare.reserve(capacity);
  }
  active.push_back(value);
}

}  // namespace

absl::Status PrefixBeamSearchOptions::Validate() const {
  if (beam_size < 1 || beam_size > kMaxBeam) {
    return absl::InvalidArgumentError(
        absl::StrCat("beam_size = ", beam_size, " is outside [1, ", kMaxBeam, "]"));
  }
  if (first_beam_size < 1 || first_beam_size > kMaxBeam) {
    return absl::InvalidArgumentError(
        absl::StrCat("first_beam_size = ", first_beam_size, " is outside [1, ", kMaxBeam, "]"));
  }
  if (blank_id < 0) {
    return absl::InvalidArgumentError(absl::StrCat("blank_id = ", blank_id, " is negative"));
  }
  struct Range {
    const char* name;
    float value, lo, hi;
    const char* note;
  };
  for (const Range& r :
       {Range{"blank_skip_threshold", blank_skip_threshold, 0, 1, " (0 turns it off)"},
        Range{"token_beam", token_beam, 0, 100, " (0 turns it off)"},
        Range{"lm_weight", lm_weight, 0, 10, ""},
        Range{"lm_token_bonus", lm_token_bonus, -20, 20, ""},
        Range{"word_lm_weight", word_lm_weight, 0, 10, ""},
        Range{"word_bonus", word_bonus, -20, 20, ""},
        Range{"unknown_word_penalty", unknown_word_penalty, 0, 100, ""}}) {
    if (!(r.value >= r.lo && r.value <= r.hi)) {  // NaN fails too
      return absl::InvalidArgumentError(
          absl::StrCat(r.name, " = ", r.value, " is outside [", r.lo, ", ", r.hi, "]", r.note));
    }
  }
  return absl::OkStatus();
}

PrefixBeamSearch::PrefixBeamSearch(const PrefixBeamSearchOptions& options) : options_(options) {
  const absl::Status status = options.Validate();
  OASR_CHECK(status.ok(), std::string(status.message()));
  skip_log_threshold_ = options.blank_skip_threshold > 0.0f
                            ? std::log(options.blank_skip_threshold)
                            : std::numeric_limits<float>::infinity();
  const size_t beam = options.beam_size;
  const size_t max_candidates = beam * (options.first_beam_size + 1);
  hyps_.reserve(beam);
  next_hyps_.reserve(beam);
  candidates_.reserve(max_candidates);
  order_.reserve(max_candidates);
  top_ids_.resize(options.first_beam_size);
  top_log_probs_.resize(options.first_beam_size);
  trie_.reserve(kMinCompactNodes);
  trie_spare_.reserve(kMinCompactNodes);
  paths_.reserve(kMinCompactNodes);
  paths_spare_.reserve(kMinCompactNodes);
  remap_.reserve(kMinCompactNodes);
  children_.Reserve(kMinCompactNodes);
  Reset();
}

void PrefixBeamSearch::Reset() {
  ++revision_;
  trie_.clear();
  trie_.push_back(TrieNode{kNone, kNone, ContextGraph::kRoot, 0.0f,
                           options_.lm != nullptr ? options_.lm->StartState() : 0,
                           options_.word_lm != nullptr ? options_.word_lm->StartState()
                                                       : WordLm::State{0, WordLm::kEmpty},
                           0.0f, 0, kNone});
  children_.Clear();
  paths_.clear();
  trie_compact_at_ = kMinCompactNodes;
  paths_compact_at_ = kMinCompactNodes;
  hyps_.clear();
  // The empty prefix: every alignment so far ends in blank (there is none).
  hyps_.push_back(Hyp{0, 0.0f, kLogZero, 0.0f, kLogZero, kNone, kNone, 0.0f, 0.0f, 0.0f});
  frame_ = 0;
  finalized_ = false;
}

void PrefixBeamSearch::SetContextGraph(const ContextGraph* graph) {
  OASR_CHECK(frame_ == 0 && !finalized_,
             "the context graph can only change before the first frame");
  graph_ = graph;
}

void PrefixBeamSearch::Search(const float* log_probs, int num_frames, int vocab_size) {
  OASR_CHECK(!finalized_, "Search after Finalize needs a Reset");
  ++revision_;
  OASR_CHECK(options_.blank_id < vocab_size);
  for (int t = 0; t < num_frames; ++t, ++frame_) {
    const float* row = log_probs + static_cast<int64_t>(t) * vocab_size;
    if (row[options_.blank_id] >= skip_log_threshold_) {
      SkipBlankFrame(row[options_.blank_id]);
    } else {
      ExpandFrame(row, vocab_size);
    }
    AfterFrame();
  }
}

void PrefixBeamSearch::SearchPruned(const PrunedFrames& frames, int vocab_size) {
  OASR_CHECK(!finalized_, "Search after Finalize needs a Reset");
  ++revision_;
  OASR_CHECK(options_.blank_id < vocab_size);
  const int wanted = std::min({options_.first_beam_size, vocab_size, frames.k});
  for (int t = 0; t < frames.num_frames; ++t, ++frame_) {
    if (frames.blank[t] >= skip_log_threshold_) {
      SkipBlankFrame(frames.blank[t]);
    } else {
      const int32_t* ids = frames.ids + static_cast<int64_t>(t) * frames.k;
      const float* lps = frames.log_probs + static_cast<int64_t>(t) * frames.k;
      int k = 0;  // The list ends at the first id that names no unit (a row of NaN).
      while (k < wanted && ids[k] >= 0 && ids[k] < vocab_size) ++k;
      ExpandCandidates(ids, lps, k);
    }
    AfterFrame();
  }
}

void PrefixBeamSearch::AfterFrame() {
  if (trie_.size() >= trie_compact_at_) CompactTrie();
  if (paths_.size() >= paths_compact_at_) CompactPaths();
}

void PrefixBeamSearch::SkipBlankFrame(float blank_log_prob) {
  // Exactly the expansion with blank as the only token: every prefix maps to
  // itself, ends in blank, and the ranking is unchanged (all totals shift by
  // the same amount).
  for (Hyp& h : hyps_) {
    const float viterbi = Viterbi(h);
    const int32_t times = Times(h);
    h.s = LogAdd(h.s, h.ns) + blank_log_prob;
    h.ns = kLogZero;
    h.v_s = viterbi + blank_log_prob;
    h.v_ns = kLogZero;
    h.times_s = times;
    h.times_ns = kNone;
    h.total = h.s + h.context + h.lm;
  }
}

float PrefixBeamSearch::Weighted(const WordScore& score) const {
  return options_.word_lm_weight * score.log_prob + options_.word_bonus * score.words -
         options_.unknown_word_penalty * score.unknown_words;
}

int32_t PrefixBeamSearch::CandidateForNode(int32_t node) {
  TrieNode& n = trie_[node];
  if (n.stamp == stamp_) return n.candidate;
  n.stamp = stamp_;
  n.candidate = static_cast<int32_t>(candidates_.size());
  candidates_.push_back(Candidate{node, kNone, kNone, n.context_state, n.context_score, n.lm_state,
                                  n.word_state, n.lm_score, kLogZero, kLogZero, kLogZero, kLogZero,
                                  kNone, kNone, 0.0f, false, kLogZero});
  return n.candidate;
}

int32_t PrefixBeamSearch::CandidateForExtension(int32_t hyp, int32_t token) {
  const int32_t parent = hyps_[hyp].node;
  const int32_t child = children_.Find(FlatIntMap::Key(parent, token));
  if (child >= 0) return CandidateForNode(child);
  // Not in the trie: no other candidate can be this prefix (its only parent is
  // `parent`, and (hyp, token) is visited once per frame).
  int32_t context_state = trie_[parent].context_state;
  float context = trie_[parent].context_score;
  if (graph_ != nullptr) {
    float delta = 0.0f;
    context_state = graph_->Step(context_state, token, &delta);
    context += delta;
  }
  int32_t lm_state = trie_[parent].lm_state;
  float lm = trie_[parent].lm_score;
  if (options_.lm != nullptr) {
    lm += options_.lm_weight * options_.lm->Score(lm_state, token, &lm_state) +
          options_.lm_token_bonus;
  }
  WordLm::State word_state = trie_[parent].word_state;
  if (options_.word_lm != nullptr) {
    lm += Weighted(options_.word_lm->Extend(word_state, token, &word_state));
  }
  candidates_.push_back(Candidate{kNone, hyp, token, context_state, context, lm_state, word_state,
                                  lm, kLogZero, kLogZero, kLogZero, kLogZero, kNone, kNone, 0.0f,
                                  false, kLogZero});
  return static_cast<int32_t>(candidates_.size() - 1);
}

void PrefixBeamSearch::AddTokenEnding(Candidate& c, float log_prob, float viterbi, int32_t times,
                                      float token_log_prob, bool continues) {
  c.ns = LogAdd(c.ns, log_prob + token_log_prob);
  if (viterbi + token_log_prob > c.v_ns) {
    c.v_ns = viterbi + token_log_prob;
    c.ns_base = times;
    c.ns_log_prob = token_log_prob;
    c.ns_continues = continues;
  }
}

void PrefixBeamSearch::ExpandFrame(const float* log_probs, int vocab_size) {
  const int k = TopK(log_probs, vocab_size, std::min(options_.first_beam_size, vocab_size),
                     top_ids_.data(), top_log_probs_.data());
  ExpandCandidates(top_ids_.data(), top_log_probs_.data(), k);
}

void PrefixBeamSearch::ExpandCandidates(const int32_t* ids, const float* log_probs, int k) {
  if (++stamp_ == 0) {  // wrapped: no stale stamp may equal the new one
    for (TrieNode& node : trie_) node.stamp = 0;
    stamp_ = 1;
  }
  candidates_.clear();
  const int32_t blank = options_.blank_id;
  const int32_t num_hyps = static_cast<int32_t>(hyps_.size());
  float floor = -std::numeric_limits<float>::infinity();
  if (options_.token_beam > 0.0f && k > 0) {
    floor = *std::max_element(log_probs, log_probs + k) - options_.token_beam;
  }
  for (int j = 0; j < k; ++j) {
    const int32_t token = ids[j];
    const float lp = log_probs[j];
    if (lp < floor) continue;
    for (int32_t i = 0; i < num_hyps; ++i) {
      const Hyp& h = hyps_[i];
      if (token == blank) {
        // *a + blank -> *a. The only way to reach *a ending in blank, so the
        // Viterbi fields are assigned, not compared.
        Candidate& c = candidates_[CandidateForNode(h.node)];
        c.s = LogAdd(c.s, LogAdd(h.s, h.ns) + lp);
        c.v_s = Viterbi(h) + lp;
        c.times_s = Times(h);
      } else if (h.node != 0 && trie_[h.node].token == token) {
        // *a + a -> *a: the token's run goes on.
        AddTokenEnding(candidates_[CandidateForNode(h.node)], h.ns, h.v_ns, h.times_ns, lp,
                       /*continues=*/true);
        // *a blank + a -> *aa: a new occurrence needs the blank in between.
        AddTokenEnding(candidates_[CandidateForExtension(i, token)], h.s, h.v_s, h.times_s, lp,
                       /*continues=*/false);
      } else {
        // *a + b -> *ab.
        AddTokenEnding(candidates_[CandidateForExtension(i, token)], LogAdd(h.s, h.ns), Viterbi(h),
                       Times(h), lp, /*continues=*/false);
      }
    }
  }
  PruneAndCommit();
}

void PrefixBeamSearch::PruneAndCommit() {
  order_.clear();
  for (int32_t c = 0; c < static_cast<int32_t>(candidates_.size()); ++c) {
    Candidate& candidate = candidates_[c];
    candidate.total = LogAdd(candidate.s, candidate.ns) + candidate.context + candidate.lm;
    // Impossible prefixes (and NaN from malformed input) are not kept.
    if (candidate.total > kLogZero) order_.push_back(c);
  }
  // A frame in which every expanded token has probability 0 is not a
  // distribution; it leaves the search as it was.
  if (order_.empty()) return;
  const size_t keep = std::min(order_.size(), static_cast<size_t>(options_.beam_size));
  std::partial_sort(order_.begin(), order_.begin() + keep, order_.end(),
                    [this](int32_t a, int32_t b) {
                      const float ta = candidates_[a].total;
                      const float tb = candidates_[b].total;
                      return ta > tb || (ta == tb && a < b);
                    });
  next_hyps_.clear();
  for (size_t r = 0; r < keep; ++r) {
    const Candidate& c = candidates_[order_[r]];
    int32_t node = c.node;
    if (node == kNone) node = AddTrieNode(c);
    int32_t times_ns = kNone;
    if (c.v_ns > kLogZero) {
      if (c.ns_continues) {
        // The run's time moves to this frame (WeNet's token time is the last
        // frame of the run); its confidence keeps the run's best posterior.
        OASR_DCHECK(c.ns_base != kNone);
        const PathNode last = paths_[c.ns_base];
        times_ns = AddPathNode(last.prev, frame_, std::max(last.log_prob, c.ns_log_prob));
      } else {
        times_ns = AddPathNode(c.ns_base, frame_, c.ns_log_prob);
      }
    }
    next_hyps_.push_back(
        Hyp{node, c.s, c.ns, c.v_s, c.v_ns, c.times_s, times_ns, c.context, c.lm, c.total});
  }
  hyps_.swap(next_hyps_);
}

int32_t PrefixBeamSearch::AddTrieNode(const Candidate& c) {
  const int32_t id = static_cast<int32_t>(trie_.size());
  const int32_t parent = hyps_[c.source].node;
  PushBackTwinned(trie_, trie_spare_,
                  TrieNode{parent, c.token, c.context_state, c.context, c.lm_state, c.word_state,
                           c.lm, 0, kNone});
  children_.Insert(FlatIntMap::Key(parent, c.token), id);
  return id;
}

int32_t PrefixBeamSearch::AddPathNode(int32_t prev, int32_t frame, float log_prob) {
  PushBackTwinned(paths_, paths_spare_, PathNode{prev, frame, log_prob});
  return static_cast<int32_t>(paths_.size() - 1);
}

void PrefixBeamSearch::CompactTrie() {
  // Mark the kept prefixes and their ancestors, renumber them in order (a
  // parent is always older, so ids stay ordered parent < child), and rebuild
  // the child map.
  remap_.assign(trie_.size(), kNone);
  remap_[0] = 0;
  for (const Hyp& h : hyps_) {
    for (int32_t n = h.node; n != kNone && remap_[n] == kNone; n = trie_[n].parent) remap_[n] = 0;
  }
  trie_spare_.clear();
  children_.Clear();
  for (size_t i = 0; i < trie_.size(); ++i) {
    if (remap_[i] == kNone) continue;
    remap_[i] = static_cast<int32_t>(trie_spare_.size());
    TrieNode node = trie_[i];
    node.stamp = 0;
    node.candidate = kNone;
    if (node.parent != kNone) {
      node.parent = remap_[node.parent];
      children_.Insert(FlatIntMap::Key(node.parent, node.token), remap_[i]);
    }
    trie_spare_.push_back(node);
  }
  trie_.swap(trie_spare_);
  for (Hyp& h : hyps_) h.node = remap_[h.node];
  trie_compact_at_ = std::max(kMinCompactNodes, 2 * trie_.size());
}

void PrefixBeamSearch::CompactPaths() {
  remap_.assign(paths_.size(), kNone);
  for (const Hyp& h : hyps_) {
    for (const int32_t start : {h.times_s, h.times_ns}) {
      for (int32_t p = start; p != kNone && remap_[p] == kNone; p = paths_[p].prev) remap_[p] = 0;
    }
  }
  paths_spare_.clear();
  for (size_t i = 0; i < paths_.size(); ++i) {
    if (remap_[i] == kNone) continue;
    remap_[i] = static_cast<int32_t>(paths_spare_.size());
    PathNode node = paths_[i];
    if (node.prev != kNone) node.prev = remap_[node.prev];
    paths_spare_.push_back(node);
  }
  paths_.swap(paths_spare_);
  for (Hyp& h : hyps_) {
    if (h.times_s != kNone) h.times_s = remap_[h.times_s];
    if (h.times_ns != kNone) h.times_ns = remap_[h.times_ns];
  }
  paths_compact_at_ = std::max(kMinCompactNodes, 2 * paths_.size());
}

void PrefixBeamSearch::Finalize() {
  OASR_CHECK(!finalized_, "Finalize called twice without a Reset");
  finalized_ = true;
  ++revision_;
  if (graph_ == nullptr && options_.lm == nullptr && options_.word_lm == nullptr) return;
  for (Hyp& h : hyps_) {
    const TrieNode& node = trie_[h.node];
    if (graph_ != nullptr) h.context -= graph_->Pending(node.context_state);
    if (options_.lm != nullptr) h.lm += options_.lm_weight * options_.lm->FinalScore(node.lm_state);
    if (options_.word_lm != nullptr) h.lm += Weighted(options_.word_lm->Finish(node.word_state));
    h.total = LogAdd(h.s, h.ns) + h.context + h.lm;
  }
  // Stable insertion sort: the beam is small and equal totals keep their rank.
  for (size_t i = 1; i < hyps_.size(); ++i) {
    const Hyp h = hyps_[i];
    size_t j = i;
    for (; j > 0 && hyps_[j - 1].total < h.total; --j) hyps_[j] = hyps_[j - 1];
    hyps_[j] = h;
  }
}

bool PrefixBeamSearch::DecodedSomething() const { return hyps_.front().node != 0; }

void PrefixBeamSearch::GetHypothesis(int rank, Hypothesis* out) const {
  OASR_CHECK(rank >= 0 && rank < NumHypotheses());
  const Hyp& h = hyps_[rank];
  out->tokens.clear();
  for (int32_t n = h.node; n != 0; n = trie_[n].parent) out->tokens.push_back(trie_[n].token);
  std::reverse(out->tokens.begin(), out->tokens.end());
  out->token_frames.clear();
  out->token_confidences.clear();
  for (int32_t p = Times(h); p != kNone; p = paths_[p].prev) {
    out->token_frames.push_back(paths_[p].frame);
    out->token_confidences.push_back(std::exp(paths_[p].log_prob));
  }
  std::reverse(out->token_frames.begin(), out->token_frames.end());
  std::reverse(out->token_confidences.begin(), out->token_confidences.end());
  // Every kept prefix has a finite score, hence a best alignment with one
  // time per token.
  OASR_CHECK_EQ(out->tokens.size(), out->token_frames.size());
  out->ctc_score = LogAdd(h.s, h.ns);
  out->context_score = h.context;
  out->lm_score = h.lm;
  out->score = h.total;
  out->viterbi_score = Viterbi(h);
}

}  // namespace oasr::decoder
