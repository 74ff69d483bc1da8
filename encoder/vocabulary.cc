#include "encoder/vocabulary.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace oasr::encoder {

absl::StatusOr<Vocabulary> Vocabulary::Parse(const std::string& text, int expected_size) {
  std::vector<std::string> tokens;
  std::vector<bool> seen;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (parts.empty()) continue;
    int id = -1;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &id) || id < 0 || id > (1 << 24)) {
      return absl::InvalidArgumentError(
          absl::StrCat("units.txt:", line_no, ": expected 'token id'"));
    }
    // Before anything is sized by it: an id the model cannot have (the
    // fuzzer's "o 11111111" sized 16 M entries before the count was checked).
    if (id >= expected_size) {
      return absl::InvalidArgumentError(absl::StrCat("units.txt:", line_no, ": id ", id,
                                                     " but output_dim is ", expected_size));
    }
    if (id >= static_cast<int>(tokens.size())) {
      tokens.resize(id + 1);
      seen.resize(id + 1, false);
    }
    if (seen[id]) {
      return absl::InvalidArgumentError(absl::StrCat("units.txt:", line_no, ": id ", id, " appears twice"));
    }
    seen[id] = true;
    tokens[id] = std::string(parts[0]);
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) return absl::InvalidArgumentError(absl::StrCat("units.txt: id ", i, " is missing"));
  }
  if (static_cast<int>(tokens.size()) != expected_size) {
    return absl::InvalidArgumentError(absl::StrCat("units.txt: ", tokens.size(),
                                                   " units but output_dim is ", expected_size));
  }
  // Only a caller's expected_size of 0 gets here without units.
  if (tokens.empty()) return absl::InvalidArgumentError("units.txt: no units");
  if (tokens[0] != "<blank>") {
    return absl::InvalidArgumentError(absl::StrCat("units.txt: id 0 must be <blank>, got ", tokens[0]));
  }
  Vocabulary v;
  v.tokens_ = std::move(tokens);
  return v;
}

}  // namespace oasr::encoder
