// The little text handling the decoder needs: splitting at whitespace,
// walking UTF-8 code points (phrase tokenisation) and telling CJK characters
// apart (each one is a word in transcripts and timestamps).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace oasr::decoder {

// The runs of non-whitespace characters of `text` (ASCII whitespace).
std::vector<std::string> SplitOnWhitespace(const std::string& text);

// Decodes the code point starting at byte `*pos` of `text` into `*code_point`
// and advances `*pos` past it. False (and `*pos` unchanged) on a malformed or
// truncated sequence or at the end of the text.
bool NextCodePoint(const std::string& text, size_t* pos, char32_t* code_point);

// True when `text` is well-formed UTF-8.
bool IsValidUtf8(const std::string& text);

// True for ideographs, kana and hangul: scripts written without spaces, where
// every character is a word of its own.
bool IsCjk(char32_t code_point);

// True when the first code point of `text` is CJK.
bool StartsWithCjk(const std::string& text);

}  // namespace oasr::decoder
