// The model's output units (units.txt: one "token id" per line).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace oasr::encoder {

class Vocabulary {
 public:
  // Parses units.txt text. Ids must be 0..N-1, each once; N must equal
  // `expected_size` (the model's output_dim) and id 0 must be <blank>.
  // Errors give the line number or the mismatching sizes.
  static absl::StatusOr<Vocabulary> Parse(const std::string& text, int expected_size);

  int size() const { return static_cast<int>(tokens_.size()); }
  // The token of `id` (0 <= id < size()).
  const std::string& Token(int id) const { return tokens_[id]; }

 private:
  std::vector<std::string> tokens_;
};

}  // namespace oasr::encoder
