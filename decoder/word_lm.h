// A word-level language model for shallow fusion over subword units: a word
// n-gram model (ARPA, its own vocabulary) and a lexicon of its words, spelled
// in characters, that follows a prefix's units into words.
//
// A BPE prefix spells words: a unit that starts with "▁" starts a word, any
// other unit continues it. Per prefix the model keeps the word history (an
// NgramLm state) and where the partial word stands in the lexicon: a trie node,
// or outside when no word starts with those characters. Scores:
//   - a completed word w scores ln P(w | history); a word the lexicon does not
//     hold (or a partial word that is only a prefix of words) scores
//     ln P(<unk> | history) and counts as an unknown word;
//   - the partial word scores its look-ahead: the best unigram ln P among the
//     words it can still become ("smearing"), or ln P(<unk>) plus one unknown
//     word when it can become none. The look-ahead is replaced by the real
//     score when the word completes.
// So a prefix pays for misspelt words as soon as it leaves the lexicon, not
// only at the next word boundary, and a beam search keeps spellings that lead
// to words. The lexicon is over characters, not units, so any segmentation of
// a word into units reaches it.
//
// Scores come back as a WordScore, unweighted; the search weighs them
// (PrefixBeamSearchOptions: word_lm_weight, word_bonus, unknown_word_penalty).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "decoder/ngram_lm.h"
#include "decoder/symbol_table.h"

namespace oasr::decoder {

// A change in a prefix's word-level score. Linear, so changes add up.
struct WordScore {
  float log_prob = 0.0f;  // ln P of completed words, plus the partial word's look-ahead
  int words = 0;          // completed words
  int unknown_words = 0;  // words outside the lexicon (the partial word's expectation included)

  WordScore& operator+=(const WordScore& other) {
    log_prob += other.log_prob;
    words += other.words;
    unknown_words += other.unknown_words;
    return *this;
  }
};

// Immutable once loaded; share it between streams and threads freely.
class WordLm {
 public:
  struct State {
    NgramLm::State history;  // the completed words
    int32_t node;            // the partial word: a lexicon node (kEmpty: none yet) or kOutside
  };
  static constexpr int32_t kEmpty = 0;
  static constexpr int32_t kOutside = -1;

  // Reads the word ARPA file (plain or gzip); its unigrams are the vocabulary
  // and the lexicon. `units` must be a BPE vocabulary (units marking word
  // starts with "▁"). Errors: ReadArpaWords's and NgramLm::LoadArpa's, and
  // INVALID_ARGUMENT for units without word starts or a file with no words.
  static absl::StatusOr<std::shared_ptr<const WordLm>> Load(const std::string& path,
                                                            const SymbolTable& units);

  State StartState() const { return State{lm_->StartState(), kEmpty}; }

  // The change in score when `unit` extends a prefix in `state`; the new state
  // in `*next`. Special units (<unk>, ...) put the partial word outside the
  // lexicon. `unit` must be in [0, num_units()) (CHECK in debug builds).
  WordScore Extend(State state, int32_t unit, State* next) const;

  // The change in score when the prefix ends: its partial word completes and
  // the sentence end </s> follows.
  WordScore Finish(State state) const;

  const NgramLm& ngram() const { return *lm_; }
  int num_units() const { return static_cast<int>(units_.size()); }
  int num_words() const { return num_words_; }
  size_t lexicon_nodes() const { return nodes_.size(); }
  // Approximate heap bytes held, n-gram model included.
  size_t memory_bytes() const;

 private:
  struct Node {
    int32_t first_child;  // children: [first_child, first_child + num_children), by byte
    int32_t num_children;
    int32_t word;     // the word spelled by the path to here, or -1
    float lookahead;  // best unigram ln P of a word at or below this node
  };

  WordLm() = default;
  // Extend without the thread's memory of its answers.
  WordScore ExtendUncached(State state, int32_t unit, State* next) const;
  // Fills nodes_[index] and its subtree from words[lo, hi) (sorted, sharing
  // their first `depth` bytes); returns its look-ahead.
  float Build(const std::vector<std::pair<std::string, int32_t>>& words, size_t lo, size_t hi,
              size_t depth, int32_t index);
  int32_t Child(int32_t node, unsigned char byte) const;
  // The look-ahead score of a partial word at `node`.
  WordScore Lookahead(int32_t node) const;
  // Completes the partial word at `state.node` (if any): its score minus its
  // look-ahead, and the history after it in `*history`.
  WordScore Complete(State state, NgramLm::State* history) const;

  std::shared_ptr<const NgramLm> lm_;
  // Names this model in the threads' memories of Extend (never 0, never reused).
  uint32_t serial_ = 0;
  int32_t unknown_word_ = -1;  // <unk> in the LM's vocabulary, or -1
  float unknown_log_prob_ = 0.0f;
  int num_words_ = 0;
  std::vector<Node> nodes_;                 // [0] is the root, the empty word
  std::vector<unsigned char> child_bytes_;  // child_bytes_[i]: the byte leading to nodes_[i]
  struct UnitSpelling {
    bool starts_word;     // begins with "▁"
    bool leaves_lexicon;  // a special unit (<unk>, ...): spells no word
    std::string body;     // its characters, "▁" removed
  };
  std::vector<UnitSpelling> units_;  // by unit id
};

}  // namespace oasr::decoder
