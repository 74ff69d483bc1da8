#include "encoder/attention_decoder.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "encoder/tensor_source.h"
#include "nlohmann/json.hpp"

namespace oasr::encoder {
namespace {

using Json = nlohmann::json;
constexpr char kFile[] = "decoder.json";

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(kFile, ": ", what));
}

// Exactly `keys`, no more and no fewer.
absl::Status ExactKeys(const Json& obj, const std::string& prefix,
                       const std::set<std::string>& keys) {
  if (!obj.is_object()) return Invalid(absl::StrCat("'", prefix, "' must be an object"));
  for (const auto& [key, value] : obj.items()) {
    if (!keys.count(key)) return Invalid(absl::StrCat("unknown field '", prefix, key, "'"));
  }
  for (const std::string& key : keys) {
    if (!obj.contains(key)) return Invalid(absl::StrCat("missing field '", prefix, key, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Int(const Json& obj, const std::string& prefix, const std::string& key,
                        int lo, int hi) {
  const Json& v = obj.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
    return Invalid(absl::StrCat(prefix, key, "=", v.dump(), " is not an integer in [", lo, ", ",
                                hi, "]"));
  }
  return static_cast<int>(v.get<int64_t>());
}

absl::StatusOr<float> Number(const Json& obj, const std::string& key, double lo, double hi) {
  const Json& v = obj.at(key);
  if (!v.is_number() || v.get<double>() < lo || v.get<double>() > hi) {
    return Invalid(absl::StrCat("rescoring.", key, "=", v.dump(), " is not a number in [", lo,
                                ", ", hi, "]"));
  }
  return static_cast<float>(v.get<double>());
}

absl::Status LoadDirection(TensorSource& src, const std::string& prefix, int blocks,
                           const AttentionDecoderConfig& c, int64_t vocab, int64_t d,
                           DecoderDirectionWeights* w) {
  OASR_ASSIGN_OR_RETURN(w->embed, src.Get(prefix + "embed.0.weight", {vocab, d}));
  w->layers.resize(blocks);
  for (int i = 0; i < blocks; ++i) {
    DecoderLayerWeights& L = w->layers[i];
    const std::string p = absl::StrCat(prefix, "decoders.", i, ".");
    LinearWeights q, k, v;
    OASR_ASSIGN_OR_RETURN(q, src.GetLinear(p + "self_attn.linear_q", d, d));
    OASR_ASSIGN_OR_RETURN(k, src.GetLinear(p + "self_attn.linear_k", d, d));
    OASR_ASSIGN_OR_RETURN(v, src.GetLinear(p + "self_attn.linear_v", d, d));
    L.self_qkv.weight = StackRows({&q.weight, &k.weight, &v.weight});
    L.self_qkv.bias = StackRows({&q.bias, &k.bias, &v.bias});
    OASR_ASSIGN_OR_RETURN(L.self_out, src.GetLinear(p + "self_attn.linear_out", d, d));
    OASR_ASSIGN_OR_RETURN(L.src_q, src.GetLinear(p + "src_attn.linear_q", d, d));
    OASR_ASSIGN_OR_RETURN(k, src.GetLinear(p + "src_attn.linear_k", d, d));
    OASR_ASSIGN_OR_RETURN(v, src.GetLinear(p + "src_attn.linear_v", d, d));
    L.src_kv.weight = StackRows({&k.weight, &v.weight});
    L.src_kv.bias = StackRows({&k.bias, &v.bias});
    OASR_ASSIGN_OR_RETURN(L.src_out, src.GetLinear(p + "src_attn.linear_out", d, d));
    OASR_ASSIGN_OR_RETURN(L.w1, src.GetLinear(p + "feed_forward.w_1", c.linear_units, d));
    OASR_ASSIGN_OR_RETURN(L.w2, src.GetLinear(p + "feed_forward.w_2", d, c.linear_units));
    OASR_ASSIGN_OR_RETURN(L.norm1, src.GetLayerNorm(p + "norm1", d));
    OASR_ASSIGN_OR_RETURN(L.norm2, src.GetLayerNorm(p + "norm2", d));
    OASR_ASSIGN_OR_RETURN(L.norm3, src.GetLayerNorm(p + "norm3", d));
  }
  OASR_ASSIGN_OR_RETURN(w->after_norm, src.GetLayerNorm(prefix + "after_norm", d));
  OASR_ASSIGN_OR_RETURN(w->output, src.GetLinear(prefix + "output_layer", vocab, d));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AttentionDecoderConfig> AttentionDecoderConfig::FromJson(const std::string& text,
                                                                        int vocab, int d) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Invalid("not valid JSON");
  OASR_RETURN_IF_ERROR(ExactKeys(
      j, "", {"format", "format_version", "decoder", "decoder_conf", "sos", "eos", "rescoring"}));
  if (j["format"] != "oasr-attention-decoder" || j["format_version"] != 1) {
    return Invalid(absl::StrCat("format ", j["format"].dump(), " version ",
                                j["format_version"].dump(),
                                " (supported: \"oasr-attention-decoder\" 1)"));
  }
  AttentionDecoderConfig c;
  const Json& type = j["decoder"];
  if (type == "bitransformer") {
    c.bidirectional = true;
  } else if (type != "transformer") {
    return Invalid(absl::StrCat("decoder=", type.dump(), " (supported: transformer, bitransformer)"));
  }
  const Json& dc = j["decoder_conf"];
  OASR_RETURN_IF_ERROR(ExactKeys(dc, "decoder_conf.",
                                 {"attention_heads", "linear_units", "num_blocks", "r_num_blocks"}));
  const std::string p = "decoder_conf.";
  OASR_ASSIGN_OR_RETURN(c.attention_heads, Int(dc, p, "attention_heads", 1, d));
  if (d % c.attention_heads != 0) {
    return Invalid(absl::StrCat("decoder_conf.attention_heads=", c.attention_heads,
                                " does not divide the encoder width ", d));
  }
  OASR_ASSIGN_OR_RETURN(c.linear_units, Int(dc, p, "linear_units", 1, 1 << 16));
  OASR_ASSIGN_OR_RETURN(c.num_blocks, Int(dc, p, "num_blocks", 1, 256));
  OASR_ASSIGN_OR_RETURN(c.r_num_blocks, Int(dc, p, "r_num_blocks", c.bidirectional ? 1 : 0,
                                            c.bidirectional ? 256 : 0));
  OASR_ASSIGN_OR_RETURN(c.sos, Int(j, "", "sos", 0, vocab - 1));
  OASR_ASSIGN_OR_RETURN(c.eos, Int(j, "", "eos", 0, vocab - 1));
  const Json& r = j["rescoring"];
  OASR_RETURN_IF_ERROR(
      ExactKeys(r, "rescoring.", {"ctc_weight", "reverse_weight", "rescoring_weight"}));
  OASR_ASSIGN_OR_RETURN(c.rescoring.ctc_weight, Number(r, "ctc_weight", 0.0, 1e6));
  OASR_ASSIGN_OR_RETURN(c.rescoring.reverse_weight, Number(r, "reverse_weight", 0.0, 1.0));
  OASR_ASSIGN_OR_RETURN(c.rescoring.rescoring_weight, Number(r, "rescoring_weight", 0.0, 1e6));
  if (!c.bidirectional && c.rescoring.reverse_weight != 0.0f) {
    return Invalid(absl::StrCat("rescoring.reverse_weight=", c.rescoring.reverse_weight,
                                " needs a bitransformer decoder (decoder=transformer; use 0)"));
  }
  return c;
}

absl::StatusOr<std::unique_ptr<AttentionDecoderModel>> LoadAttentionDecoder(
    const std::string& dir, const SafetensorsReader& reader, const ModelConfig& model) {
  const std::string path = (std::filesystem::path(dir) / kFile).string();
  bool has_tensors = false;
  for (const std::string& name : reader.Names()) {
    has_tensors = has_tensors || absl::StartsWith(name, "decoder.");
  }
  if (!std::filesystem::exists(path)) {
    if (has_tensors) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": decoder.* tensors but no ", kFile,
                       " (convert with tools/convert_wenet.py, or leave the decoder out)"));
    }
    return nullptr;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream text;
  text << in.rdbuf();
  auto model_out = std::make_unique<AttentionDecoderModel>();
  OASR_ASSIGN_OR_RETURN(model_out->config, AttentionDecoderConfig::FromJson(
                                               text.str(), model.output_dim, model.output_size));
  const AttentionDecoderConfig& c = model_out->config;
  TensorSource src(reader);
  const int64_t vocab = model.output_dim, d = model.output_size;
  if (c.bidirectional) {
    OASR_RETURN_IF_ERROR(LoadDirection(src, "decoder.left_decoder.", c.num_blocks, c, vocab, d,
                                       &model_out->left));
    OASR_RETURN_IF_ERROR(LoadDirection(src, "decoder.right_decoder.", c.r_num_blocks, c, vocab, d,
                                       &model_out->right));
  } else {
    OASR_RETURN_IF_ERROR(
        LoadDirection(src, "decoder.", c.num_blocks, c, vocab, d, &model_out->left));
  }
  // Every decoder tensor must have been read; the encoder's are its loader's.
  OASR_RETURN_IF_ERROR(src.CheckNoLeftovers(
      [](const std::string& name) { return !absl::StartsWith(name, "decoder."); }));
  return model_out;
}

}  // namespace oasr::encoder
