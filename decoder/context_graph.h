// Phrase boosting ("hotwords", "speech contexts"): a token-level Aho-Corasick
// automaton over the phrases of one stream. The beam search keeps one
// automaton state per prefix and adds the boost of every token that extends a
// (partial) phrase match; when the match breaks, the partial bonus is taken
// back, so only completed phrases keep their bonus.
//
// Scores, for a prefix x (all in the log domain, added to the CTC score):
//   pending(x)   = node_score of the automaton state (the longest suffix of x
//                  that is a proper prefix of some phrase): the sum over its
//                  tokens of the largest boost among phrases through them.
//   committed(x) = for every position of x and every phrase ending there,
//                  boost * length of that phrase.
//   bonus(x)     = committed(x) + pending(x) during the search;
//                  committed(x) once the stream is finalised.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "decoder/flat_int_map.h"
#include "decoder/symbol_table.h"

namespace oasr::decoder {

// A phrase in the model's units.
struct TokenPhrase {
  std::vector<int32_t> tokens;
  float boost = 3.0f;  // log-score bonus per token (WeNet's context_score)
};

// A phrase as users write it; tokenised with TokenizePhrase.
struct TextPhrase {
  std::string text;
  float boost = 3.0f;  // log-score bonus per token
};

struct ContextGraphConfig {
  int max_phrases = 5000;       // WeNet's max_contexts
  int max_phrase_tokens = 100;  // longer phrases are refused
  float max_boost = 50.0f;      // per token; larger values swamp the acoustics

  // INVALID_ARGUMENT naming the field, its value and its limit.
  absl::Status Validate() const;
};

// Immutable once built; share it between streams (shared_ptr<const>) and
// threads freely.
class ContextGraph {
 public:
  static constexpr int32_t kRoot = 0;

  // Builds the automaton. INVALID_ARGUMENT for more than max_phrases phrases, an
  // empty phrase or one longer than max_phrase_tokens, a token outside
  // [0, vocab_size), or a boost that is not finite or outside (0, max_boost];
  // the message names the phrase index and the limit.
  static absl::StatusOr<std::shared_ptr<const ContextGraph>> Build(
      const std::vector<TokenPhrase>& phrases, int vocab_size,
      const ContextGraphConfig& config = {});

  // Tokenises every phrase with `units` (see TokenizePhrase) and builds the
  // automaton. Failures as Build, plus TokenizePhrase's, prefixed with the
  // phrase index.
  static absl::StatusOr<std::shared_ptr<const ContextGraph>> BuildFromText(
      const std::vector<TextPhrase>& phrases, const SymbolTable& units,
      const ContextGraphConfig& config = {});

  // Follows `token` from `state`: returns the next state and sets `*delta` to
  // the change of bonus(x) (committed bonus of every phrase completed by the
  // token, plus the change of the pending bonus, which is negative when a
  // partial match breaks).
  int32_t Step(int32_t state, int32_t token, float* delta) const;

  // The pending (not yet earned) bonus of `state`; Finalize subtracts it.
  float Pending(int32_t state) const { return node_score_[state]; }

  int num_states() const { return static_cast<int>(node_score_.size()); }
  int vocab_size() const { return vocab_size_; }
  int num_phrases() const { return num_phrases_; }

 private:
  ContextGraph() = default;

  int vocab_size_ = 0;
  int num_phrases_ = 0;
  FlatIntMap children_;            // (state, token) -> child state
  std::vector<float> node_score_;  // pending bonus of each state
  std::vector<float> output_;      // bonus of phrases ending at the state or its suffixes
  std::vector<int32_t> fail_;      // longest proper suffix that is a trie node
  std::vector<int32_t> resume_;    // the state to continue from (skips childless ends)
};

}  // namespace oasr::decoder
