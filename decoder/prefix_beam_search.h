// CTC prefix beam search with WeNet's semantics (runtime/core/decoder/
// ctc_prefix_beam_search.cc), streaming frame by frame.
//
// Per kept prefix: the log-probability of all alignments ending in blank (s)
// and in its last token (ns), the best single alignment of each kind (v_s,
// v_ns) and that alignment's token times. Per frame: the first beam expands
// only the top-k tokens (ties to the lower id); the second beam keeps the
// best `beam_size` prefixes by logaddexp(s, ns) + phrase bonus.
//
// Where WeNet leaves an order unspecified (hash-map iteration, std::sort of
// equal scores) this search is deterministic: tokens are expanded best first,
// kept prefixes best first, a Viterbi score must be strictly better to replace
// an earlier one, and equal totals keep the order in which the prefixes were
// first reached. tools/ctc_reference.py follows the same rules.
//
// Memory: prefixes are nodes of a trie and alignments nodes of persistent
// lists, so a frame costs O(beam * k) whatever the prefix length; both arenas
// are compacted when half of them is garbage. Merging a new prefix with an
// existing one is one hash lookup on (parent node, token).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "decoder/ctc_search.h"
#include "decoder/flat_int_map.h"
#include "decoder/ngram_lm.h"
#include "decoder/word_lm.h"

namespace oasr::decoder {

struct PrefixBeamSearchOptions {
  int beam_size = 10;        // second beam: prefixes kept after each frame
  int first_beam_size = 10;  // first beam: tokens expanded per frame (capped at V)
  int blank_id = 0;
  // Frames with P(blank) >= this skip the expansion: every prefix just takes
  // the blank (exactly what the search would do if blank were the only token
  // in the first beam). 0 turns skipping off (the default, WeNet's behaviour);
  // values near 1 (0.999) make it nearly lossless and save most of the work on
  // silence.
  float blank_skip_threshold = 0.0f;
  // A frame's tokens more than this many nats below its best are not
  // expanded (0 turns it off, the default: the first beam alone decides).
  // On peaky CTC output most of the first beam's tokens are far below the
  // best; each would cost its prefixes' language-model lookups for a
  // probability that cannot change the kept beam.
  float token_beam = 0.0f;

  // Shallow fusion with a unit n-gram language model (nullptr: none). Each
  // token of a prefix adds lm_weight * ln P_lm(token | the tokens before it) +
  // lm_token_bonus to its score; Finalize adds lm_weight * ln P_lm(</s> | prefix).
  std::shared_ptr<const NgramLm> lm;
  float lm_weight = 0.5f;
  float lm_token_bonus = 0.0f;

  // Shallow fusion with a word language model and its lexicon (nullptr: none),
  // beside or instead of the unit one. A prefix's WordScore (decoder/word_lm.h)
  // adds word_lm_weight * log_prob + word_bonus * words -
  // unknown_word_penalty * unknown_words to its score.
  std::shared_ptr<const WordLm> word_lm;
  float word_lm_weight = 0.5f;
  float word_bonus = 0.0f;
  float unknown_word_penalty = 0.0f;

  // INVALID_ARGUMENT naming the field, its value and the limit: beam_size and
  // first_beam_size in [1, 1024], blank_id >= 0, blank_skip_threshold in [0, 1],
  // token_beam in [0, 100],
  // lm_weight and word_lm_weight in [0, 10], lm_token_bonus and word_bonus in
  // [-20, 20], unknown_word_penalty in [0, 100].
  absl::Status Validate() const;
};

// Thread-safety: none; one stream is decoded by one thread at a time.
class PrefixBeamSearch final : public CtcSearch {
 public:
  // `options` must be valid (CHECK).
  explicit PrefixBeamSearch(const PrefixBeamSearchOptions& options);

  void Reset() override;
  void SetContextGraph(const ContextGraph* graph) override;
  void Search(const float* log_probs, int num_frames, int vocab_size) override;
  void SearchPruned(const PrunedFrames& frames, int vocab_size) override;
  void Finalize() override;
  int NumHypotheses() const override { return static_cast<int>(hyps_.size()); }
  void GetHypothesis(int rank, Hypothesis* out) const override;
  // Every call that consumes frames (or re-ranks, or resets) counts as a
  // change: the beam's best may move on a blank frame.
  uint64_t Revision() const override { return revision_; }
  bool DecodedSomething() const override;
  int64_t num_frames() const override { return frame_; }

  // Arena sizes, for tests of compaction and memory reuse.
  size_t trie_nodes() const { return trie_.size(); }
  size_t path_nodes() const { return paths_.size(); }

 private:
  static constexpr int32_t kNone = -1;

  // A prefix: the node of its last token. The phrase-boosting and language
  // model states depend on the prefix alone, so they live here.
  struct TrieNode {
    int32_t parent;
    int32_t token;
    int32_t context_state;
    float context_score;
    int32_t lm_state;
    WordLm::State word_state;
    float lm_score;  // weighted LM scores plus bonuses of the prefix (unit and word LMs)
    uint32_t stamp;  // frame in which `candidate` is valid
    int32_t candidate;
  };
  // One token of an alignment: persistent list linked towards the start.
  struct PathNode {
    int32_t prev;
    int32_t frame;
    float log_prob;  // best posterior of the token's run along the alignment
  };
  struct Hyp {
    int32_t node;
    float s, ns;                // blank- and token-ending log-probabilities
    float v_s, v_ns;            // their best single alignments
    int32_t times_s, times_ns;  // those alignments' token lists
    float context;              // phrase bonus (pending part removed by Finalize)
    float lm;                   // LM score (the sentence end added by Finalize)
    float total;                // LogAdd(s, ns) + context + lm
  };
  // A prefix reached in the current frame.
  struct Candidate {
    int32_t node;    // trie node, or kNone for an extension not in the trie yet
    int32_t source;  // for a new extension: the hyp it extends ...
    int32_t token;   // ... and the token
    int32_t context_state;
    float context;
    int32_t lm_state;
    WordLm::State word_state;
    float lm;
    float s, ns, v_s, v_ns;
    int32_t times_s;
    int32_t ns_base;    // alignment the best token-ending alignment extends
    float ns_log_prob;  // log-prob of the token in this frame
    bool ns_continues;  // the token's run goes on (replace) or starts (append)
    float total;
  };

  // The weighted score of a word LM change.
  float Weighted(const WordScore& score) const;

  static float Viterbi(const Hyp& h) { return h.v_s > h.v_ns ? h.v_s : h.v_ns; }
  static int32_t Times(const Hyp& h) { return h.v_s > h.v_ns ? h.times_s : h.times_ns; }

  void ExpandFrame(const float* log_probs, int vocab_size);
  // Expands every hypothesis by the frame's `k` candidate units (best first).
  void ExpandCandidates(const int32_t* ids, const float* log_probs, int k);
  // After each frame: the trie and path stores compacted when they grew.
  void AfterFrame();
  void SkipBlankFrame(float blank_log_prob);
  int32_t CandidateForNode(int32_t node);
  int32_t CandidateForExtension(int32_t hyp, int32_t token);
  // Adds the paths from a source hyp that end in the candidate's last token:
  // their total `log_prob`, best `viterbi` with its `times`, extended by a
  // token of `token_log_prob` that continues its run or starts a new one.
  static void AddTokenEnding(Candidate& c, float log_prob, float viterbi, int32_t times,
                             float token_log_prob, bool continues);
  void PruneAndCommit();
  int32_t AddTrieNode(const Candidate& c);
  int32_t AddPathNode(int32_t prev, int32_t frame, float log_prob);
  void CompactTrie();
  void CompactPaths();

  PrefixBeamSearchOptions options_;
  float skip_log_threshold_;
  const ContextGraph* graph_ = nullptr;

  std::vector<TrieNode> trie_, trie_spare_;
  FlatIntMap children_;  // (parent node, token) -> node
  std::vector<PathNode> paths_, paths_spare_;
  std::vector<int32_t> remap_;
  size_t trie_compact_at_ = 0;
  size_t paths_compact_at_ = 0;

  std::vector<Hyp> hyps_, next_hyps_;
  std::vector<Candidate> candidates_;
  std::vector<int32_t> order_;
  std::vector<int32_t> top_ids_;
  std::vector<float> top_log_probs_;

  uint32_t stamp_ = 0;
  int32_t frame_ = 0;
  uint64_t revision_ = 0;
  bool finalized_ = false;
};

}  // namespace oasr::decoder
