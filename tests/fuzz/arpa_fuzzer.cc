// ARPA n-gram files (decoder/ngram_lm.h, decoder/word_lm.h): the unit model
// over a small BPE vocabulary, and the word model with its lexicon, each
// loaded and then scored along the units. Input: a file's bytes (plain or
// gzip).
#include <cmath>
#include <cstdlib>

#include "decoder/ngram_lm.h"
#include "decoder/symbol_table.h"
#include "decoder/word_lm.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

const oasr::decoder::SymbolTable& Units() {
  static const oasr::decoder::SymbolTable* units = [] {
    const std::string start = oasr::decoder::kWordStartMarker;  // "▁"
    absl::StatusOr<oasr::decoder::SymbolTable> table = oasr::decoder::SymbolTable::FromUnits(
        {"<blank>", "<unk>", start + "the", start + "a", start + "cat", start, "s", "c", "a", "t",
         "<sos/eos>"});
    if (!table.ok()) std::abort();
    return new oasr::decoder::SymbolTable(std::move(*table));
  }();
  return *units;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = oasr::fuzz::WriteScratch(
      "lm.arpa", std::string_view(reinterpret_cast<const char*>(data), size));
  const oasr::decoder::SymbolTable& units = Units();
  const int n = units.size();

  absl::StatusOr<std::shared_ptr<const oasr::decoder::NgramLm>> lm =
      oasr::decoder::NgramLm::LoadArpa(path, units);
  if (lm.ok()) {
    // Every unit after every unit, and the end of the sentence.
    for (int a = 0; a < n; ++a) {
      oasr::decoder::NgramLm::State state;
      float score = (*lm)->Score((*lm)->StartState(), a, &state);
      for (int b = 0; b < n; ++b) {
        oasr::decoder::NgramLm::State next;
        score += (*lm)->Score(state, b, &next) + (*lm)->FinalScore(next);
      }
      if (std::isnan(score)) std::abort();
      (void)(*lm)->UnigramScore(a);
    }
  }

  absl::StatusOr<std::shared_ptr<const oasr::decoder::WordLm>> words =
      oasr::decoder::WordLm::Load(path, units);
  if (words.ok()) {
    // Spell "▁a cat s" and a word outside the lexicon, unit by unit.
    for (const int unit : {3, 5, 7, 8, 9, 6, 2, 1, 4}) {
      oasr::decoder::WordLm::State state = (*words)->StartState(), next;
      (void)(*words)->Extend(state, unit, &next);
      for (int u = 0; u < n; ++u) {
        oasr::decoder::WordLm::State after;
        (void)(*words)->Extend(next, u, &after);
        (void)(*words)->Finish(after);
      }
    }
  }
  return 0;
}
