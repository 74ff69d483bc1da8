// The model's output units (WeNet's units.txt): the text of every CTC output
// id. Lines are "token id"; `<blank> 0`, `<unk> 1` and `<sos/eos>` last by
// convention. BPE pieces mark a word start with "▁" (U+2581); character
// vocabularies (e.g. Chinese) have no "▁".
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

namespace oasr::decoder {

// "▁", the SentencePiece word-start marker, UTF-8 encoded.
inline constexpr char kWordStartMarker[] = "\xe2\x96\x81";
inline constexpr size_t kWordStartMarkerBytes = 3;

// Immutable after construction; safe to share between threads.
class SymbolTable {
 public:
  // Reads units.txt. NOT_FOUND when the file cannot be opened; INVALID_ARGUMENT
  // naming the file and line for a line that is not "token id", a negative or
  // non-numeric id, a duplicate id or token, an empty file, or ids that are not
  // exactly 0..N-1 (the first missing id is named).
  static absl::StatusOr<SymbolTable> Load(const std::string& path);

  // Parses the contents of a units file; `source` names it in error messages.
  // Same failures as Load apart from NOT_FOUND.
  static absl::StatusOr<SymbolTable> Parse(const std::string& text, const std::string& source);

  // A table whose id i is `units[i]`. INVALID_ARGUMENT for an empty list, an
  // empty or duplicate unit, or a unit containing whitespace.
  static absl::StatusOr<SymbolTable> FromUnits(std::vector<std::string> units);

  // Number of units, the CTC output dimension V.
  int size() const { return static_cast<int>(units_.size()); }

  // Text of unit `id`; CHECK-fails outside [0, size()).
  const std::string& Token(int id) const;

  // Id of the unit spelled `token`, or -1.
  int Find(const std::string& token) const;

  // True when some unit starts with "▁" (a SentencePiece/BPE vocabulary).
  bool is_bpe() const { return is_bpe_; }

  // True for units spelled "<...>" (<blank>, <unk>, <sos/eos>, ...): they have
  // no text in transcripts and are never produced by phrase tokenisation.
  bool IsSpecial(int id) const;

  // Longest unit, in bytes (bounds phrase tokenisation's search).
  size_t max_unit_bytes() const { return max_unit_bytes_; }

 private:
  explicit SymbolTable(std::vector<std::string> units);

  std::vector<std::string> units_;
  std::unordered_map<std::string, int> ids_;
  std::vector<bool> special_;
  bool is_bpe_ = false;
  size_t max_unit_bytes_ = 0;
};

}  // namespace oasr::decoder
