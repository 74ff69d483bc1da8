#include "decoder/phrase_tokenizer.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "decoder/utf8.h"

namespace oasr::decoder {
namespace {

// Cost of covering a suffix: fewest units first, then fewest dropped markers.
struct Cost {
  int units = std::numeric_limits<int>::max();
  int dropped = 0;
  bool reachable() const { return units != std::numeric_limits<int>::max(); }
  bool operator<(const Cost& o) const {
    return units != o.units ? units < o.units : dropped < o.dropped;
  }
};

// Splits `piece` into the fewest non-special units (dynamic programming over
// code-point boundaries). With `optional_marker`, a leading "▁" may be dropped.
// Returns false and sets `*uncovered` to the first character no unit starts
// with when there is no split.
bool SplitIntoUnits(const std::string& piece, bool optional_marker, const SymbolTable& units,
                    std::vector<int32_t>* out, std::string* uncovered) {
  const size_t n = piece.size();
  std::vector<bool> boundary(n + 1, false);
  for (size_t pos = 0; pos < n;) {
    boundary[pos] = true;
    char32_t code_point = 0;
    if (!NextCodePoint(piece, &pos, &code_point)) return false;  // validated by the caller
  }
  boundary[n] = true;
  std::vector<Cost> best(n + 1);
  std::vector<size_t> next(n + 1, 0);
  std::vector<int32_t> unit_at(n + 1, -1);
  best[n] = Cost{0, 0};
  const size_t max_len = units.max_unit_bytes();
  for (size_t i = n; i-- > 0;) {
    if (!boundary[i]) continue;
    for (size_t len = 1; len <= max_len && i + len <= n; ++len) {
      const size_t j = i + len;
      if (!boundary[j] || !best[j].reachable()) continue;
      const int id = units.Find(piece.substr(i, len));
      if (id < 0 || units.IsSpecial(id)) continue;
      const Cost cost{best[j].units + 1, best[j].dropped};
      // `<=` so that a longer first unit wins a tie.
      if (!(best[i] < cost)) {
        best[i] = cost;
        next[i] = j;
        unit_at[i] = id;
      }
    }
    if (i == 0 && optional_marker && n >= kWordStartMarkerBytes &&
        piece.compare(0, kWordStartMarkerBytes, kWordStartMarker) == 0 &&
        best[kWordStartMarkerBytes].reachable()) {
      const Cost cost{best[kWordStartMarkerBytes].units, best[kWordStartMarkerBytes].dropped + 1};
      if (cost < best[0]) {
        best[0] = cost;
        next[0] = kWordStartMarkerBytes;
        unit_at[0] = -1;
      }
    }
  }
  if (!best[0].reachable()) {
    // Name the first character that no unit starts with; that is what the
    // user has to change.
    for (size_t i = optional_marker ? kWordStartMarkerBytes : 0; i < n; ++i) {
      if (!boundary[i]) continue;
      bool covered = false;
      for (size_t len = 1; len <= max_len && i + len <= n && !covered; ++len) {
        const int id = boundary[i + len] ? units.Find(piece.substr(i, len)) : -1;
        covered = id >= 0 && !units.IsSpecial(id);
      }
      if (!covered) {
        size_t end = i;
        char32_t code_point = 0;
        NextCodePoint(piece, &end, &code_point);
        *uncovered = piece.substr(i, end - i);
        return false;
      }
    }
    *uncovered = piece;
    return false;
  }
  for (size_t i = 0; i < n; i = next[i]) {
    if (unit_at[i] >= 0) out->push_back(unit_at[i]);
  }
  return true;
}

// Tokenises one spelling of the phrase. On failure sets the uncovered
// character and how many words were tokenised before it.
bool TokenizeSpelling(const std::string& text, const SymbolTable& units,
                      std::vector<int32_t>* tokens, std::string* uncovered, size_t* words_done) {
  tokens->clear();
  *words_done = 0;
  const std::vector<std::string> words = SplitOnWhitespace(text);
  if (!units.is_bpe()) {
    std::string joined;
    for (const std::string& word : words) joined += word;
    return SplitIntoUnits(joined, /*optional_marker=*/false, units, tokens, uncovered);
  }
  for (const std::string& word : words) {
    if (!SplitIntoUnits(kWordStartMarker + word, /*optional_marker=*/true, units, tokens,
                        uncovered)) {
      return false;
    }
    ++*words_done;
  }
  return true;
}

std::string AsciiCase(std::string text, bool upper) {
  for (char& c : text) {
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> TokenizePhrase(const std::string& text,
                                                    const SymbolTable& units) {
  if (SplitOnWhitespace(text).empty()) return absl::InvalidArgumentError("phrase is empty");
  if (!IsValidUtf8(text)) {
    return absl::InvalidArgumentError(absl::StrCat("phrase \"", text, "\" is not valid UTF-8"));
  }
  // The error reported is that of the spelling that got furthest.
  std::string best_uncovered;
  size_t best_words = 0;
  bool first = true;
  for (const std::string& spelling : {text, AsciiCase(text, true), AsciiCase(text, false)}) {
    if (!first && spelling == text) continue;
    std::vector<int32_t> tokens;
    std::string uncovered;
    size_t words_done = 0;
    if (TokenizeSpelling(spelling, units, &tokens, &uncovered, &words_done)) return tokens;
    if (first || words_done > best_words) {
      best_uncovered = uncovered;
      best_words = words_done;
    }
    first = false;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("phrase \"", text, "\": no unit covers \"", best_uncovered, "\""));
}

}  // namespace oasr::decoder
