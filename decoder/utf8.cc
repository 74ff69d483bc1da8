#include "decoder/utf8.h"

#include "absl/strings/str_split.h"

namespace oasr::decoder {

std::vector<std::string> SplitOnWhitespace(const std::string& text) {
  return absl::StrSplit(text, absl::ByAnyChar(" \t\r\n\v\f"), absl::SkipEmpty());
}

bool NextCodePoint(const std::string& text, size_t* pos, char32_t* code_point) {
  const size_t i = *pos;
  if (i >= text.size()) return false;
  const unsigned char lead = static_cast<unsigned char>(text[i]);
  int extra = 0;
  char32_t value = 0;
  if (lead < 0x80) {
    value = lead;
  } else if ((lead & 0xE0) == 0xC0) {
    extra = 1;
    value = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    extra = 2;
    value = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    extra = 3;
    value = lead & 0x07;
  } else {
    return false;  // a continuation byte or an invalid lead byte
  }
  if (i + extra >= text.size()) return false;  // truncated sequence
  for (int k = 1; k <= extra; ++k) {
    const unsigned char next = static_cast<unsigned char>(text[i + k]);
    if ((next & 0xC0) != 0x80) return false;
    value = (value << 6) | (next & 0x3F);
  }
  // Overlong forms and values beyond Unicode are malformed.
  static constexpr char32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};
  if (value < kMinForLength[extra] || value > 0x10FFFF) return false;
  *pos = i + 1 + extra;
  *code_point = value;
  return true;
}

bool IsValidUtf8(const std::string& text) {
  size_t pos = 0;
  char32_t code_point = 0;
  while (pos < text.size()) {
    if (!NextCodePoint(text, &pos, &code_point)) return false;
  }
  return true;
}

bool IsCjk(char32_t c) {
  return (c >= 0x3040 && c <= 0x30FF) ||  // hiragana, katakana
         (c >= 0x3400 && c <= 0x4DBF) ||  // CJK extension A
         (c >= 0x4E00 && c <= 0x9FFF) ||  // CJK unified ideographs
         (c >= 0xAC00 && c <= 0xD7AF) ||  // hangul syllables
         (c >= 0xF900 && c <= 0xFAFF) ||  // CJK compatibility ideographs
         (c >= 0x20000 && c <= 0x2FFFF);  // CJK extensions B-F
}

bool StartsWithCjk(const std::string& text) {
  size_t pos = 0;
  char32_t code_point = 0;
  return NextCodePoint(text, &pos, &code_point) && IsCjk(code_point);
}

}  // namespace oasr::decoder
