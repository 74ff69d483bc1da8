#include "encoder/conformer_model.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "encoder/safetensors_reader.h"

namespace oasr::encoder {
namespace {

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<GlobalCmvn> LoadCmvn(const SafetensorsReader& reader, const std::string& dir,
                                    int dim) {
  const std::string json_path = (std::filesystem::path(dir) / "global_cmvn").string();
  const bool in_weights = reader.Find("encoder.global_cmvn.mean") != nullptr ||
                          reader.Find("encoder.global_cmvn.istd") != nullptr;
  const bool as_file = std::filesystem::exists(json_path);
  if (in_weights && as_file) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": both encoder.global_cmvn tensors and a global_cmvn file; keep one"));
  }
  if (!in_weights && !as_file) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": no global CMVN (neither encoder.global_cmvn.{mean,istd} tensors nor a "
             "global_cmvn file)"));
  }
  GlobalCmvn cmvn;
  if (as_file) {
    OASR_ASSIGN_OR_RETURN(std::string text, ReadText(json_path));
    auto parsed = GlobalCmvn::FromWenetJson(text);
    if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat(json_path, ": ", parsed.status().message()));
    cmvn = std::move(*parsed);
  } else {
    std::vector<float> parts[2];
    const char* names[2] = {"encoder.global_cmvn.mean", "encoder.global_cmvn.istd"};
    for (int i = 0; i < 2; ++i) {
      const SafetensorsReader::Entry* e = reader.Find(names[i]);
      if (e == nullptr || !(e->shape == Shape{dim})) {
        return absl::InvalidArgumentError(absl::StrCat(
            reader.path(), ": tensor '", names[i], "' ",
            e == nullptr ? std::string("is missing") : "has shape " + e->shape.ToString(),
            ", expected [", dim, "]"));
      }
      OASR_ASSIGN_OR_RETURN(Tensor t, reader.ReadFloat32(names[i]));
      parts[i].assign(t.data<float>(), t.data<float>() + dim);
    }
    OASR_ASSIGN_OR_RETURN(cmvn, GlobalCmvn::FromMeanIstd(std::move(parts[0]), std::move(parts[1])));
  }
  if (cmvn.dim() != dim) {
    return absl::InvalidArgumentError(
        absl::StrCat(json_path, ": ", cmvn.dim(), " CMVN entries, expected input_dim=", dim));
  }
  return cmvn;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ConformerModel>> ConformerModel::Load(const std::string& dir) {
  const std::filesystem::path root(dir);
  auto model = std::unique_ptr<ConformerModel>(new ConformerModel());
  OASR_ASSIGN_OR_RETURN(std::string config_text, ReadText((root / "config.json").string()));
  OASR_ASSIGN_OR_RETURN(model->config_, ModelConfig::FromJson(config_text));
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsReader> reader,
                        SafetensorsReader::Open((root / "model.safetensors").string()));
  OASR_ASSIGN_OR_RETURN(model->weights_, LoadConformerWeights(*reader, model->config_));
  OASR_ASSIGN_OR_RETURN(model->cmvn_, LoadCmvn(*reader, dir, model->config_.input_dim));
  OASR_ASSIGN_OR_RETURN(model->attention_decoder_,
                        LoadAttentionDecoder(dir, *reader, model->config_));
  OASR_ASSIGN_OR_RETURN(std::string units_text, ReadText((root / "units.txt").string()));
  OASR_ASSIGN_OR_RETURN(model->vocabulary_,
                        Vocabulary::Parse(units_text, model->config_.output_dim));
  return model;
}

}  // namespace oasr::encoder
