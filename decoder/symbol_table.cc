#include "decoder/symbol_table.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "decoder/utf8.h"

namespace oasr::decoder {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

}  // namespace

SymbolTable::SymbolTable(std::vector<std::string> units) : units_(std::move(units)) {
  special_.resize(units_.size());
  ids_.reserve(units_.size());
  for (size_t id = 0; id < units_.size(); ++id) {
    const std::string& unit = units_[id];
    ids_.emplace(unit, static_cast<int>(id));
    special_[id] = unit.size() >= 2 && unit.front() == '<' && unit.back() == '>';
    if (unit.compare(0, kWordStartMarkerBytes, kWordStartMarker) == 0) is_bpe_ = true;
    max_unit_bytes_ = std::max(max_unit_bytes_, unit.size());
  }
}

absl::StatusOr<SymbolTable> SymbolTable::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("units file ", path, " cannot be opened"));
  std::stringstream contents;
  contents << in.rdbuf();
  return Parse(contents.str(), path);
}

absl::StatusOr<SymbolTable> SymbolTable::Parse(const std::string& text, const std::string& source) {
  std::vector<std::string> units;
  std::vector<int> line_of_id;  // 1-based line that defined each id, 0 if none yet
  std::unordered_map<std::string, int> line_of_token;
  // Ids run from 0 without a gap, one a line, so no id reaches the number of
  // lines: a larger one is refused before anything is sized by it.
  const int64_t num_lines = std::count(text.begin(), text.end(), '\n') + 1;
  std::istringstream lines(text);
  std::string line;
  int line_number = 0;
  while (std::getline(lines, line)) {
    ++line_number;
    const std::vector<std::string> fields = SplitOnWhitespace(line);
    if (fields.empty()) continue;  // blank lines (e.g. a trailing one) carry nothing
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", line_number, ": expected \"token id\", got \"", line, "\""));
    }
    const std::string& id_text = fields[1];
    int64_t id = -1;
    const auto [end, error] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
    if (error != std::errc() || end != id_text.data() + id_text.size() || id < 0 ||
        id > (int64_t{1} << 30)) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", line_number, ": id \"", id_text,
                                                     "\" is not an integer in [0, 2^30]"));
    }
    if (id >= num_lines) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", line_number, ": id ", id,
                                                     " is past the file's ", num_lines,
                                                     " lines (ids must be contiguous from 0)"));
    }
    if (static_cast<size_t>(id) >= line_of_id.size()) {
      line_of_id.resize(id + 1, 0);
      units.resize(id + 1);
    }
    if (line_of_id[id] != 0) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", line_number, ": duplicate id ",
                                                     id, " (first defined on line ", line_of_id[id],
                                                     ")"));
    }
    const auto [it, inserted] = line_of_token.emplace(fields[0], line_number);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", line_number, ": duplicate token \"", fields[0],
                       "\" (first defined on line ", it->second, ")"));
    }
    line_of_id[id] = line_number;
    units[id] = fields[0];
  }
  if (units.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no units"));
  for (size_t id = 0; id < line_of_id.size(); ++id) {
    if (line_of_id[id] == 0) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": ids must be contiguous from 0 to ",
                                                     units.size() - 1, " but id ", id,
                                                     " is missing"));
    }
  }
  return SymbolTable(std::move(units));
}

absl::StatusOr<SymbolTable> SymbolTable::FromUnits(std::vector<std::string> units) {
  if (units.empty()) return absl::InvalidArgumentError("units: the list is empty");
  std::unordered_map<std::string, size_t> seen;
  for (size_t id = 0; id < units.size(); ++id) {
    const std::string& unit = units[id];
    if (unit.empty()) return absl::InvalidArgumentError(absl::StrCat("units[", id, "] is empty"));
    for (char c : unit) {
      if (IsSpace(c)) {
        return absl::InvalidArgumentError(
            absl::StrCat("units[", id, "] = \"", unit, "\" contains whitespace"));
      }
    }
    const auto [it, inserted] = seen.emplace(unit, id);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("units[", id, "] = \"", unit, "\" duplicates units[", it->second, "]"));
    }
  }
  return SymbolTable(std::move(units));
}

const std::string& SymbolTable::Token(int id) const {
  OASR_CHECK(id >= 0 && id < size(), "unit id " + std::to_string(id) + " out of range");
  return units_[id];
}

int SymbolTable::Find(const std::string& token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

bool SymbolTable::IsSpecial(int id) const {
  OASR_CHECK(id >= 0 && id < size(), "unit id " + std::to_string(id) + " out of range");
  return special_[id];
}

}  // namespace oasr::decoder
