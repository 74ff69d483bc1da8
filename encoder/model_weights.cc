#include "encoder/model_weights.h"

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace oasr::encoder {
namespace {

// Reads tensors by name with shape checks and remembers which names were
// used, so that leftovers can be reported.
class TensorSource {
 public:
  explicit TensorSource(const SafetensorsReader& reader) : reader_(reader) {}

  absl::StatusOr<Tensor> Get(const std::string& name, const Shape& shape) {
    used_.insert(name);
    const SafetensorsReader::Entry* entry = reader_.Find(name);
    if (entry == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(reader_.path(), ": missing tensor '", name, "'"));
    }
    if (!(entry->shape == shape)) {
      return absl::InvalidArgumentError(absl::StrCat(reader_.path(), ": tensor '", name,
                                                     "' has shape ", entry->shape.ToString(),
                                                     ", expected ", shape.ToString()));
    }
    return reader_.ReadFloat32(name);
  }

  absl::StatusOr<LinearWeights> GetLinear(const std::string& prefix, int64_t out, int64_t in) {
    LinearWeights w;
    OASR_ASSIGN_OR_RETURN(w.weight, Get(prefix + ".weight", {out, in}));
    OASR_ASSIGN_OR_RETURN(w.bias, Get(prefix + ".bias", {out}));
    return w;
  }

  // A Conv1d with kernel 1 is a Linear whose weight has a trailing 1.
  absl::StatusOr<LinearWeights> GetPointwise(const std::string& prefix, int64_t out, int64_t in) {
    LinearWeights w;
    OASR_ASSIGN_OR_RETURN(Tensor weight, Get(prefix + ".weight", {out, in, 1}));
    w.weight = Reshaped(std::move(weight), {out, in});
    OASR_ASSIGN_OR_RETURN(w.bias, Get(prefix + ".bias", {out}));
    return w;
  }

  absl::StatusOr<NormWeights> GetLayerNorm(const std::string& prefix, int64_t d) {
    NormWeights n;
    OASR_ASSIGN_OR_RETURN(n.scale, Get(prefix + ".weight", {d}));
    OASR_ASSIGN_OR_RETURN(n.shift, Get(prefix + ".bias", {d}));
    return n;
  }

  // Inference BatchNorm folded into one affine map (eps 1e-5, as WeNet's
  // BatchNorm1d default).
  absl::StatusOr<NormWeights> GetBatchNorm(const std::string& prefix, int64_t d) {
    OASR_ASSIGN_OR_RETURN(Tensor gamma, Get(prefix + ".weight", {d}));
    OASR_ASSIGN_OR_RETURN(Tensor beta, Get(prefix + ".bias", {d}));
    OASR_ASSIGN_OR_RETURN(Tensor mean, Get(prefix + ".running_mean", {d}));
    OASR_ASSIGN_OR_RETURN(Tensor var, Get(prefix + ".running_var", {d}));
    for (int64_t i = 0; i < d; ++i) {
      const float v = var.data<float>()[i];
      if (!(v >= 0.0f)) {
        return absl::InvalidArgumentError(absl::StrCat(reader_.path(), ": tensor '", prefix,
                                                       ".running_var' has a negative or NaN "
                                                       "entry at ", i));
      }
      const double scale = gamma.data<float>()[i] / std::sqrt(static_cast<double>(v) + 1e-5);
      gamma.data<float>()[i] = static_cast<float>(scale);
      beta.data<float>()[i] =
          static_cast<float>(beta.data<float>()[i] - mean.data<float>()[i] * scale);
    }
    return NormWeights{std::move(gamma), std::move(beta)};
  }

  // Names present in the file that nothing used, except ignorable ones.
  absl::Status CheckNoLeftovers() const {
    for (const std::string& name : reader_.Names()) {
      if (used_.count(name) || absl::StartsWith(name, "decoder.") ||
          absl::StartsWith(name, "encoder.global_cmvn.") ||
          name == "encoder.embed.pos_enc.pe" || absl::EndsWith(name, ".num_batches_tracked")) {
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          reader_.path(), ": unexpected tensor '", name, "' (not part of this model's config)"));
    }
    return absl::OkStatus();
  }

  static Tensor Reshaped(Tensor t, const Shape& shape) {
    auto out = Tensor::Empty(shape, DType::kFloat32);
    OASR_CHECK(out.ok() && out->numel() == t.numel());
    std::memcpy(out->data(), t.data(), t.nbytes());
    return std::move(*out);
  }

 private:
  const SafetensorsReader& reader_;
  std::set<std::string> used_;
};

// Concatenates tensors along dimension 0 (same trailing shape).
Tensor Stack0(const std::vector<const Tensor*>& parts) {
  int64_t rows = 0;
  for (const Tensor* p : parts) rows += p->dim(0);
  Shape shape = parts[0]->shape();
  shape[0] = rows;
  auto out = Tensor::Empty(shape, DType::kFloat32);
  OASR_CHECK(out.ok());
  char* dst = static_cast<char*>(out->data());
  for (const Tensor* p : parts) {
    std::memcpy(dst, p->data(), p->nbytes());
    dst += p->nbytes();
  }
  return std::move(*out);
}

absl::Status LoadLayer(TensorSource& src, const ModelConfig& c, int i,
                       ConformerLayerWeights* w) {
  const int64_t d = c.output_size, h = c.attention_heads, dk = c.head_dim();
  const std::string p = absl::StrCat("encoder.encoders.", i, ".");
  OASR_ASSIGN_OR_RETURN(w->ff_macaron_w1, src.GetLinear(p + "feed_forward_macaron.w_1", c.linear_units, d));
  OASR_ASSIGN_OR_RETURN(w->ff_macaron_w2, src.GetLinear(p + "feed_forward_macaron.w_2", d, c.linear_units));
  OASR_ASSIGN_OR_RETURN(w->ff_w1, src.GetLinear(p + "feed_forward.w_1", c.linear_units, d));
  OASR_ASSIGN_OR_RETURN(w->ff_w2, src.GetLinear(p + "feed_forward.w_2", d, c.linear_units));
  OASR_ASSIGN_OR_RETURN(LinearWeights q, src.GetLinear(p + "self_attn.linear_q", d, d));
  OASR_ASSIGN_OR_RETURN(LinearWeights k, src.GetLinear(p + "self_attn.linear_k", d, d));
  OASR_ASSIGN_OR_RETURN(LinearWeights v, src.GetLinear(p + "self_attn.linear_v", d, d));
  w->qkv.weight = Stack0({&q.weight, &k.weight, &v.weight});
  w->qkv.bias = Stack0({&q.bias, &k.bias, &v.bias});
  OASR_ASSIGN_OR_RETURN(w->attn_out, src.GetLinear(p + "self_attn.linear_out", d, d));
  OASR_ASSIGN_OR_RETURN(w->linear_pos, src.Get(p + "self_attn.linear_pos.weight", {d, d}));
  OASR_ASSIGN_OR_RETURN(w->pos_bias_u, src.Get(p + "self_attn.pos_bias_u", {h, dk}));
  OASR_ASSIGN_OR_RETURN(w->pos_bias_v, src.Get(p + "self_attn.pos_bias_v", {h, dk}));
  OASR_ASSIGN_OR_RETURN(w->pointwise_conv1, src.GetPointwise(p + "conv_module.pointwise_conv1", 2 * d, d));
  OASR_ASSIGN_OR_RETURN(Tensor dw, src.Get(p + "conv_module.depthwise_conv.weight", {d, 1, c.cnn_module_kernel}));
  w->depthwise_weight = TensorSource::Reshaped(std::move(dw), {d, c.cnn_module_kernel});
  OASR_ASSIGN_OR_RETURN(w->depthwise_bias, src.Get(p + "conv_module.depthwise_conv.bias", {d}));
  if (c.cnn_module_norm == ConvNorm::kLayerNorm) {
    OASR_ASSIGN_OR_RETURN(w->conv_norm, src.GetLayerNorm(p + "conv_module.norm", d));
  } else {
    OASR_ASSIGN_OR_RETURN(w->conv_norm, src.GetBatchNorm(p + "conv_module.norm", d));
  }
  OASR_ASSIGN_OR_RETURN(w->pointwise_conv2, src.GetPointwise(p + "conv_module.pointwise_conv2", d, d));
  OASR_ASSIGN_OR_RETURN(w->norm_ff, src.GetLayerNorm(p + "norm_ff", d));
  OASR_ASSIGN_OR_RETURN(w->norm_mha, src.GetLayerNorm(p + "norm_mha", d));
  OASR_ASSIGN_OR_RETURN(w->norm_ff_macaron, src.GetLayerNorm(p + "norm_ff_macaron", d));
  OASR_ASSIGN_OR_RETURN(w->norm_conv, src.GetLayerNorm(p + "norm_conv", d));
  OASR_ASSIGN_OR_RETURN(w->norm_final, src.GetLayerNorm(p + "norm_final", d));
  return absl::OkStatus();
}

// The subsampling convs of each input layer type: (kernel, stride).
std::vector<std::pair<int, int>> SubsamplingConvs(SubsamplingType type) {
  switch (type) {
    case SubsamplingType::kConv2d4:
      return {{3, 2}, {3, 2}};
    case SubsamplingType::kConv2d6:
      return {{3, 2}, {5, 3}};
    case SubsamplingType::kConv2d8:
      return {{3, 2}, {3, 2}, {3, 2}};
  }
  return {};
}

absl::Status LoadSubsampling(TensorSource& src, const ModelConfig& c, ConformerWeights* w) {
  const int64_t d = c.output_size;
  int64_t freq = c.input_dim, in_ch = 1;
  int index = 0;
  for (const auto& [kernel, stride] : SubsamplingConvs(c.input_layer)) {
    const std::string p = absl::StrCat("encoder.embed.conv.", 2 * index, ".");
    OASR_ASSIGN_OR_RETURN(Tensor weight, src.Get(p + "weight", {d, in_ch, kernel, kernel}));
    OASR_ASSIGN_OR_RETURN(Tensor bias, src.Get(p + "bias", {d}));
    // [d, c, i, j] -> [d, i, j, c].
    OASR_ASSIGN_OR_RETURN(Tensor reordered, Tensor::Empty({d, kernel * kernel * in_ch}, DType::kFloat32));
    const float* s = weight.data<float>();
    float* t = reordered.data<float>();
    for (int64_t o = 0; o < d; ++o)
      for (int64_t ch = 0; ch < in_ch; ++ch)
        for (int64_t ij = 0; ij < kernel * kernel; ++ij)
          t[(o * kernel * kernel + ij) * in_ch + ch] = s[(o * in_ch + ch) * kernel * kernel + ij];
    w->conv_weight.push_back(std::move(reordered));
    w->conv_bias.push_back(std::move(bias));
    w->conv_kernel.push_back(kernel);
    w->conv_stride.push_back(stride);
    freq = (freq - kernel) / stride + 1;
    in_ch = d;
    ++index;
  }
  w->conv_out_freq = static_cast<int>(freq);
  const std::string out_name = c.input_layer == SubsamplingType::kConv2d4 ? "encoder.embed.out.0"
                                                                          : "encoder.embed.linear";
  OASR_ASSIGN_OR_RETURN(LinearWeights out, src.GetLinear(out_name, d, d * freq));
  OASR_ASSIGN_OR_RETURN(Tensor cols, Tensor::Empty({d, d * freq}, DType::kFloat32));
  for (int64_t n = 0; n < d; ++n)
    for (int64_t ch = 0; ch < d; ++ch)
      for (int64_t f = 0; f < freq; ++f)
        cols.data<float>()[n * d * freq + f * d + ch] = out.weight.data<float>()[n * d * freq + ch * freq + f];
  w->embed_out.weight = std::move(cols);
  w->embed_out.bias = std::move(out.bias);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ConformerWeights> LoadConformerWeights(const SafetensorsReader& reader,
                                                      const ModelConfig& config) {
  OASR_RETURN_IF_ERROR(config.Validate());
  TensorSource src(reader);
  ConformerWeights w;
  OASR_RETURN_IF_ERROR(LoadSubsampling(src, config, &w));
  w.layers.resize(config.num_blocks);
  for (int i = 0; i < config.num_blocks; ++i) {
    OASR_RETURN_IF_ERROR(LoadLayer(src, config, i, &w.layers[i]));
  }
  OASR_ASSIGN_OR_RETURN(w.after_norm, src.GetLayerNorm("encoder.after_norm", config.output_size));
  OASR_ASSIGN_OR_RETURN(w.ctc, src.GetLinear("ctc.ctc_lo", config.output_dim, config.output_size));
  OASR_RETURN_IF_ERROR(src.CheckNoLeftovers());
  return w;
}

}  // namespace oasr::encoder
