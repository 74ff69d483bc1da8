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
// The vocabulary is any SymbolTable: the word model of decoder/word_lm.h
// loads one over the file's own words (ReadArpaWords), where "unit" below
// means word.
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
  // [0, vocab_size()) (CHECK in debug builds). Each thread remembers its
  // recent answers (a direct-mapped table of 32,768, shared by the models
  // and streams it scores for): a prefix beam search asks the same (state,
  // unit) again frame after frame for the extensions it prunes, and the
  // answer is a function of the two, so a remembered one is exactly the
  // walk's.
  float Score(State state, int32_t unit, State* next) const;

  // ln P(</s> | state): the end of the sentence.
  float FinalScore(State state) const;

  // ln P(unit) with no history (the unigram, or <unk>'s for an unlisted one).
  float UnigramScore(int32_t unit) const;

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

  // Names this model in the threads' score memories (never 0, never reused).
  uint32_t serial_ = 0;
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

// The words of an ARPA file's unigram section, <s> and </s> left out, in file
// order: the vocabulary of a word-level model (decoder/word_lm.h). Reads only
// up to the end of that section. NOT_FOUND when the file cannot be opened;
// INVALID_ARGUMENT naming the file for a file without a \1-grams: section, a
// malformed entry, or a duplicate word.
absl::StatusOr<SymbolTable> ReadArpaWords(const std::string& path);

// A model directory's language models: lm.json next to units.txt, e.g.
//   {"file": "lm.arpa.gz", "weight": 1.0, "token_bonus": 2.0,
//    "words": {"file": "words.arpa.gz", "weight": 0.5, "word_bonus": 1.0,
//              "unknown_word_penalty": 4.0}}
// "file" is a unit n-gram model (NgramLm), "words" a word n-gram model with
// its lexicon (WordLm); either may be left out, not both. Files are relative
// to the directory; the numbers are the values the model was tuned with
// (PrefixBeamSearchOptions: lm_weight, lm_token_bonus, word_lm_weight,
// word_bonus, unknown_word_penalty).
struct LanguageModelSpec {
  std::string path;  // the unit ARPA file, directory prepended; empty: none
  float weight = 0.5f;
  float token_bonus = 0.0f;
  std::string word_path;  // the word ARPA file, directory prepended; empty: none
  float word_weight = 0.5f;
  float word_bonus = 0.0f;
  float unknown_word_penalty = 0.0f;
};

// std::nullopt when `model_dir` has no lm.json; INVALID_ARGUMENT naming the
// file for malformed JSON, a "file" that is not a non-empty string, a "words"
// that is not an object with one, neither of the two, or a number field that
// is not a number.
absl::StatusOr<std::optional<LanguageModelSpec>> ReadLanguageModelSpec(
    const std::string& model_dir);

}  // namespace oasr::decoder
