#include "encoder/model_config.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace oasr::encoder {
namespace {

using Json = nlohmann::json;

constexpr int kMaxDim = 65536;
constexpr int kMaxChunk = 1024;

absl::Status Missing(const std::string& field) {
  return absl::InvalidArgumentError(absl::StrCat("config.json: missing field '", field, "'"));
}

absl::StatusOr<const Json*> Field(const Json& obj, const std::string& prefix,
                                  const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end()) return Missing(prefix + key);
  return &*it;
}

absl::Status GetInt(const Json& obj, const std::string& prefix, const std::string& key, int* out) {
  OASR_ASSIGN_OR_RETURN(const Json* v, Field(obj, prefix, key));
  if (!v->is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: field '", prefix + key, "' must be an integer, got ", v->dump()));
  }
  const int64_t value = v->get<int64_t>();
  if (value < -1 || value > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: field '", prefix + key, "'=", value, " is out of range"));
  }
  *out = static_cast<int>(value);
  return absl::OkStatus();
}

absl::Status GetBool(const Json& obj, const std::string& prefix, const std::string& key,
                     bool* out) {
  OASR_ASSIGN_OR_RETURN(const Json* v, Field(obj, prefix, key));
  if (!v->is_boolean()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: field '", prefix + key, "' must be true or false, got ",
                     v->dump()));
  }
  *out = v->get<bool>();
  return absl::OkStatus();
}

absl::Status GetString(const Json& obj, const std::string& prefix, const std::string& key,
                       std::string* out) {
  OASR_ASSIGN_OR_RETURN(const Json* v, Field(obj, prefix, key));
  if (!v->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: field '", prefix + key, "' must be a string, got ", v->dump()));
  }
  *out = v->get<std::string>();
  return absl::OkStatus();
}

absl::Status Unsupported(const std::string& field, const std::string& value,
                         const std::string& supported) {
  return absl::InvalidArgumentError(absl::StrCat("config.json: unsupported option ", field, "=",
                                                 value, " (supported: ", supported, ")"));
}

// A field whose only implemented value is `want`.
absl::Status RequireString(const Json& obj, const std::string& prefix, const std::string& key,
                           const std::string& want) {
  std::string value;
  OASR_RETURN_IF_ERROR(GetString(obj, prefix, key, &value));
  if (value != want) return Unsupported(prefix + key, value, want);
  return absl::OkStatus();
}

absl::Status RequireTrue(const Json& obj, const std::string& prefix, const std::string& key) {
  bool value = false;
  OASR_RETURN_IF_ERROR(GetBool(obj, prefix, key, &value));
  if (!value) return Unsupported(prefix + key, "false", "true");
  return absl::OkStatus();
}

absl::Status RejectUnknownKeys(const Json& obj, const std::string& prefix,
                               const std::set<std::string>& known) {
  for (const auto& [key, value] : obj.items()) {
    if (known.count(key) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json: unknown option '", prefix + key, "'=", value.dump()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// Each subsampling front: its train.yaml name, rate and right context
// (extra feature frames an output frame needs beyond the rate).
struct SubsamplingInfo {
  SubsamplingType type;
  const char* name;
  int rate;
  int right_context;
};
constexpr SubsamplingInfo kSubsampling[] = {
    {SubsamplingType::kConv2d4, "conv2d", 4, 6},
    {SubsamplingType::kConv2d6, "conv2d6", 6, 10},
    {SubsamplingType::kConv2d8, "conv2d8", 8, 14},
};

const SubsamplingInfo& Info(SubsamplingType type) {
  for (const SubsamplingInfo& info : kSubsampling) {
    if (info.type == type) return info;
  }
  OASR_CHECK(false, "unknown subsampling type");
  return kSubsampling[0];
}

}  // namespace

const char* SubsamplingName(SubsamplingType type) { return Info(type).name; }
int ModelConfig::subsampling_rate() const { return Info(input_layer).rate; }
int ModelConfig::right_context() const { return Info(input_layer).right_context; }

absl::StatusOr<ModelConfig> ModelConfig::FromJson(const std::string& text) {
  const Json root = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return absl::InvalidArgumentError("config.json: not a JSON object");
  }
  OASR_RETURN_IF_ERROR(RejectUnknownKeys(
      root, "", {"format", "format_version", "input_dim", "output_dim", "encoder",
                 "encoder_conf", "serving"}));
  OASR_RETURN_IF_ERROR(RequireString(root, "", "format", "oasr-conformer-ctc"));
  int version = 0;
  OASR_RETURN_IF_ERROR(GetInt(root, "", "format_version", &version));
  if (version != 1) return Unsupported("format_version", std::to_string(version), "1");
  ModelConfig c;
  OASR_RETURN_IF_ERROR(GetInt(root, "", "input_dim", &c.input_dim));
  OASR_RETURN_IF_ERROR(GetInt(root, "", "output_dim", &c.output_dim));
  OASR_RETURN_IF_ERROR(RequireString(root, "", "encoder", "conformer"));

  OASR_ASSIGN_OR_RETURN(const Json* enc, Field(root, "", "encoder_conf"));
  if (!enc->is_object()) return absl::InvalidArgumentError("config.json: encoder_conf is not an object");
  const std::string p = "encoder_conf.";
  // Dropout rates only matter in training; anything else unknown may change
  // the maths, so it is refused rather than ignored.
  OASR_RETURN_IF_ERROR(RejectUnknownKeys(
      *enc, p,
      {"output_size", "attention_heads", "linear_units", "num_blocks", "input_layer",
       "pos_enc_layer_type", "selfattention_layer_type", "normalize_before", "macaron_style",
       "activation_type", "use_cnn_module", "cnn_module_kernel", "causal", "cnn_module_norm",
       "static_chunk_size", "use_dynamic_chunk", "dropout_rate", "positional_dropout_rate",
       "attention_dropout_rate", "use_dynamic_left_chunk"}));
  OASR_RETURN_IF_ERROR(GetInt(*enc, p, "output_size", &c.output_size));
  OASR_RETURN_IF_ERROR(GetInt(*enc, p, "attention_heads", &c.attention_heads));
  OASR_RETURN_IF_ERROR(GetInt(*enc, p, "linear_units", &c.linear_units));
  OASR_RETURN_IF_ERROR(GetInt(*enc, p, "num_blocks", &c.num_blocks));
  std::string input_layer;
  OASR_RETURN_IF_ERROR(GetString(*enc, p, "input_layer", &input_layer));
  const SubsamplingInfo* subsampling = nullptr;
  for (const SubsamplingInfo& info : kSubsampling) {
    if (input_layer == info.name) subsampling = &info;
  }
  if (subsampling == nullptr) {
    return Unsupported(p + "input_layer", input_layer, "conv2d, conv2d6, conv2d8");
  }
  c.input_layer = subsampling->type;
  OASR_RETURN_IF_ERROR(RequireString(*enc, p, "pos_enc_layer_type", "rel_pos"));
  OASR_RETURN_IF_ERROR(RequireString(*enc, p, "selfattention_layer_type", "rel_selfattn"));
  OASR_RETURN_IF_ERROR(RequireTrue(*enc, p, "normalize_before"));
  OASR_RETURN_IF_ERROR(RequireTrue(*enc, p, "macaron_style"));
  OASR_RETURN_IF_ERROR(RequireString(*enc, p, "activation_type", "swish"));
  OASR_RETURN_IF_ERROR(RequireTrue(*enc, p, "use_cnn_module"));
  OASR_RETURN_IF_ERROR(GetInt(*enc, p, "cnn_module_kernel", &c.cnn_module_kernel));
  OASR_RETURN_IF_ERROR(RequireTrue(*enc, p, "causal"));
  std::string norm;
  OASR_RETURN_IF_ERROR(GetString(*enc, p, "cnn_module_norm", &norm));
  if (norm == "layer_norm") {
    c.cnn_module_norm = ConvNorm::kLayerNorm;
  } else if (norm == "batch_norm") {
    c.cnn_module_norm = ConvNorm::kBatchNorm;
  } else {
    return Unsupported(p + "cnn_module_norm", norm, "layer_norm, batch_norm");
  }
  OASR_RETURN_IF_ERROR(GetInt(*enc, p, "static_chunk_size", &c.static_chunk_size));
  OASR_RETURN_IF_ERROR(GetBool(*enc, p, "use_dynamic_chunk", &c.use_dynamic_chunk));

  OASR_ASSIGN_OR_RETURN(const Json* serving, Field(root, "", "serving"));
  if (!serving->is_object()) return absl::InvalidArgumentError("config.json: serving is not an object");
  OASR_RETURN_IF_ERROR(RejectUnknownKeys(*serving, "serving.",
                                         {"chunk_size", "num_left_chunks", "min_word_confidence"}));
  OASR_RETURN_IF_ERROR(GetInt(*serving, "serving.", "chunk_size", &c.chunk_size));
  OASR_RETURN_IF_ERROR(GetInt(*serving, "serving.", "num_left_chunks", &c.num_left_chunks));
  if (auto it = serving->find("min_word_confidence"); it != serving->end()) {
    if (!it->is_number()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config.json: field 'serving.min_word_confidence' must be a number, got ", it->dump()));
    }
    c.min_word_confidence = it->get<double>();
  }
  OASR_RETURN_IF_ERROR(c.Validate());
  return c;
}

absl::Status ModelConfig::Validate() const {
  auto range = [](const char* field, int value, int lo, int hi) -> absl::Status {
    if (value < lo || value > hi) {
      return absl::InvalidArgumentError(absl::StrCat("config: ", field, "=", value,
                                                     " is outside [", lo, ", ", hi, "]"));
    }
    return absl::OkStatus();
  };
  if (input_dim != 80) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config: unsupported option input_dim=", input_dim, " (the front end makes 80 mel bins)"));
  }
  OASR_RETURN_IF_ERROR(range("output_dim", output_dim, 2, 1 << 20));
  OASR_RETURN_IF_ERROR(range("encoder_conf.output_size", output_size, 1, kMaxDim));
  OASR_RETURN_IF_ERROR(range("encoder_conf.attention_heads", attention_heads, 1, output_size));
  if (output_size % attention_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: encoder_conf.output_size=", output_size,
                     " is not a multiple of encoder_conf.attention_heads=", attention_heads));
  }
  OASR_RETURN_IF_ERROR(range("encoder_conf.linear_units", linear_units, 1, kMaxDim));
  OASR_RETURN_IF_ERROR(range("encoder_conf.num_blocks", num_blocks, 1, 256));
  // A causal kernel of 1 has no left context and no cache; WeNet never uses it.
  OASR_RETURN_IF_ERROR(range("encoder_conf.cnn_module_kernel", cnn_module_kernel, 2, 1024));
  OASR_RETURN_IF_ERROR(range("encoder_conf.static_chunk_size", static_chunk_size, 0, 1 << 20));
  if (static_chunk_size == 0 && !use_dynamic_chunk) {
    return absl::InvalidArgumentError(
        "config: encoder_conf.static_chunk_size=0 with use_dynamic_chunk=false is a "
        "full-context model, which cannot be served chunk by chunk");
  }
  OASR_RETURN_IF_ERROR(range("serving.chunk_size", chunk_size, 1, kMaxChunk));
  OASR_RETURN_IF_ERROR(range("serving.num_left_chunks", num_left_chunks, -1, 1 << 16));
  if (!(min_word_confidence >= 0.0 && min_word_confidence <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("config: serving.min_word_confidence=",
                                                   min_word_confidence, " is outside [0, 1]"));
  }
  return absl::OkStatus();
}

}  // namespace oasr::encoder
