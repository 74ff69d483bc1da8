// Turns a boosting phrase ("speech context") into the model's units, so the
// phrase can be matched token by token during the beam search.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "decoder/symbol_table.h"

namespace oasr::decoder {

// Tokenises `text` with `units`.
//
// BPE vocabularies (units with "▁"): each whitespace-separated word becomes
// "▁word" and is split into the fewest units; among equally short splits the
// one with the longest first piece wins (what BPE merges tend to produce). A
// word-start marker with no unit carrying it is dropped, which is how CJK
// characters inside a BPE vocabulary are spelled. Character vocabularies:
// whitespace is removed and the text is split into the fewest units.
// Special units (<blank>, <unk>, ...) are never used. When the text as given
// cannot be split, its ASCII upper-case and then lower-case forms are tried
// (LibriSpeech units are upper-case).
//
// INVALID_ARGUMENT for empty or malformed UTF-8 text, or text containing a
// character no unit covers (the message names the phrase and the character).
absl::StatusOr<std::vector<int32_t>> TokenizePhrase(const std::string& text,
                                                    const SymbolTable& units);

}  // namespace oasr::decoder
