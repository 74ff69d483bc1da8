// units.txt, read twice by the engine: by the encoder's loader
// (encoder::Vocabulary, which checks it against output_dim) and as the
// decoder's symbol table (decoder::SymbolTable). Input: one byte and the
// next two give output_dim, then the file's text.
#include <cstdlib>

#include "decoder/symbol_table.h"
#include "encoder/vocabulary.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  oasr::fuzz::InputReader in(data, size);
  // Mostly small sizes, sometimes the largest config.json allows (2^20).
  const int first = in.Byte();
  const int low = first | (in.Byte() << 8);
  const int expected = in.Byte() == 0xff ? 1 << 20 : low;
  const std::string text(in.Rest());

  absl::StatusOr<oasr::encoder::Vocabulary> vocab =
      oasr::encoder::Vocabulary::Parse(text, expected);
  Check(!vocab.ok() || (vocab->size() == expected && vocab->Token(0) == "<blank>"));

  absl::StatusOr<oasr::decoder::SymbolTable> table =
      oasr::decoder::SymbolTable::Parse(text, "units.txt");
  if (table.ok()) {
    Check(table->size() > 0);
    // Every unit's id is found by its text.
    for (int id = 0; id < table->size(); ++id) Check(table->Find(table->Token(id)) == id);
  }
  return 0;
}
