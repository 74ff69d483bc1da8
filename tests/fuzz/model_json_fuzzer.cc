// The JSON files of a model directory (docs/model-format.md), each read by
// its own loader: config.json (encoder::ModelConfig), decoder.json
// (encoder::AttentionDecoderConfig), global_cmvn (encoder::GlobalCmvn) and
// lm.json (decoder::ReadLanguageModelSpec, from a directory). Input: the
// text, given to all four (the seeds are one of each).
#include <cmath>
#include <cstdlib>

#include "decoder/ngram_lm.h"
#include "encoder/attention_decoder.h"
#include "encoder/global_cmvn.h"
#include "encoder/model_config.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  // A config that parses is one Validate accepts.
  absl::StatusOr<oasr::encoder::ModelConfig> config = oasr::encoder::ModelConfig::FromJson(text);
  Check(!config.ok() || config->Validate().ok());

  // Against the bundled model's vocabulary and width.
  (void)oasr::encoder::AttentionDecoderConfig::FromJson(text, /*vocab=*/5002, /*d=*/256);

  absl::StatusOr<oasr::encoder::GlobalCmvn> cmvn = oasr::encoder::GlobalCmvn::FromWenetJson(text);
  Check(!cmvn.ok() || (cmvn->dim() > 0 && cmvn->mean().size() == cmvn->istd().size()));

  oasr::fuzz::WriteScratch("lm.json", text);
  absl::StatusOr<std::optional<oasr::decoder::LanguageModelSpec>> spec =
      oasr::decoder::ReadLanguageModelSpec(oasr::fuzz::ScratchDir().string());
  // The file is there, so the answer is a spec or an error, never "none".
  Check(!spec.ok() ||
        (spec->has_value() && (!(*spec)->path.empty() || !(*spec)->word_path.empty())));
  return 0;
}
