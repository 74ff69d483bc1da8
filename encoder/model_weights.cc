#include "encoder/model_weights.h"

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "encoder/tensor_source.h"

namespace oasr::encoder {
namespace {

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
  w->qkv.weight = StackRows({&q.weight, &k.weight, &v.weight});
  w->qkv.bias = StackRows({&q.bias, &k.bias, &v.bias});
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
  OASR_RETURN_IF_ERROR(src.CheckNoLeftovers([](const std::string& name) {
    // The attention decoder is read by LoadAttentionDecoderWeights; the CMVN
    // by ConformerModel; the position buffer is computed.
    return absl::StartsWith(name, "decoder.") || absl::StartsWith(name, "encoder.global_cmvn.") ||
           name == "encoder.embed.pos_enc.pe" || absl::EndsWith(name, ".num_batches_tracked");
  }));
  return w;
}

}  // namespace oasr::encoder
