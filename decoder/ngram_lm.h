// A backoff n-gram language model over the model's own units (ARPA format),
// for shallow fusion in the CTC prefix beam search: a prefix extended by unit
// u gains weight * ln P(u | the units before it), and the final ranking adds
// ln P(</s> | the last units).
//
// The words of the ARPA file are the spellings of units.txt (BPE pieces such
// as "▁the", or characters), plus <s> and </s>; the file's <unk> is the unit
// <unk> and also scores any unit the file does not list. tools/train/lm.py
// builds one from the training text; any ARPA writer (KenLM's lmplz, SRILM)
// over the same units works too. Plain or gzip-compressed files are read.
//
// States: the longest suffix of the history that the model can extend (KenLM's
// right-state minimisation), so prefixes that differ only in older units share
// a state. Probabilities use the standard backoff rule:
//   P(w | h) = P*(h w)             when the n-gram "h w" is listed,
//            = b(h) * P(w | h')    otherwise, h' = h without its oldest unit.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "decoder/symbol_table.h"

namespace oasr::decoder {

// Immutable once loaded; share it between streams and threads freely.
class NgramLm {
 public:
  using State = int32_t;

  // Reads an ARPA file (plain or gzip). NOT_FOUND when it cannot be opened;
  // INVALID_ARGUMENT naming the file and line for a malformed header or
  // entry, counts that do not match the header, an n-gram whose history
  // (first n-1 words) or suffix (last n-1 words) is not listed, or a file
  // without <s> and </s> unigrams. Words that are not units are skipped (with
  // every n-gram holding them); their number is kept in skipped_words().
  static absl::StatusOr<std::shared_ptr<const NgramLm>> LoadArpa(const std::string& path,
                                                                 const SymbolTable& units);

  // The state after the sentence start <s>.
  State StartState() const { return start_state_; }

  // ln P(unit | state), and the state after it in `*next`. `unit` must be in
  // [0, vocab_size()) (CHECK in debug builds).
  float Score(State state, int32_t unit, State* next) const;

  // ln P(</s> | state): the end of the sentence.
  float FinalScore(State state) const;

  int order() const { return order_; }
  int vocab_size() const { return vocab_size_; }
  // Listed n-grams of order n (1-based), after skipping.
  int64_t num_ngrams(int n) const { return counts_[n - 1]; }
  int64_t num_ngrams_total() const;
  int64_t skipped_words() const { return skipped_words_; }
  // Approximate heap bytes held.
  size_t memory_bytes() const;

 private:
  static constexpr int32_t kRoot = 0;
  struct Node {
    int32_t word;          // last word of the n-gram (unit id, or vocab_size for </s>, +1 for <s>)
    float log_prob;        // ln P*(n-gram)
    float backoff;         // ln b(n-gram), 0 when the n-gram extends nothing
    int32_t first_child;   // children: nodes [first_child, first_child + num_children),
    int32_t num_children;  //   sorted by word
    int32_t suffix;        // node of the n-gram without its first word (root for unigrams)
  };

  NgramLm() = default;
  int32_t FindChild(int32_t node, int32_t word) const;
  float ScoreWord(State state, int32_t word, State* next) const;
  // The shortest-history equivalent of `node` (drops older words while the
  // node extends nothing and has no backoff).
  int32_t Minimize(int32_t node) const;

  int order_ = 0;
  int vocab_size_ = 0;
  int32_t eos_word_ = 0;
  State start_state_ = kRoot;
  float unknown_log_prob_ = 0.0f;  // ln P(<unk>), for units the file does not list
  std::vector<Node> nodes_;        // [0] is the root (the empty history)
  std::vector<int32_t> unigram_;   // word -> its unigram node, or -1
  std::vector<int64_t> counts_;
  int64_t skipped_words_ = 0;
};

// A model directory's language model: lm.json next to units.txt, e.g.
//   {"file": "lm.arpa.gz", "weight": 0.5, "token_bonus": 1.0}
// `file` is relative to the directory; weight and token_bonus are the values
// the model was tuned with (PrefixBeamSearchOptions::lm_weight, lm_token_bonus).
struct LanguageModelSpec {
  std::string path;  // the ARPA file, directory prepended
  float weight = 0.5f;
  float token_bonus = 0.0f;
};

// std::nullopt when `model_dir` has no lm.json; INVALID_ARGUMENT naming the
// file for malformed JSON, a missing or non-string "file", or a "weight" or
// "token_bonus" that is not a number.
absl::StatusOr<std::optional<LanguageModelSpec>> ReadLanguageModelSpec(
    const std::string& model_dir);

}  // namespace oasr::decoder
