// The float32 weights of a Conformer CTC model, checked against its config
// and rearranged once at load time for the CPU encoder's GEMMs.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "encoder/model_config.h"
#include "encoder/safetensors_reader.h"

namespace oasr::encoder {

// y = x W^T + b with W stored [out, in] as in PyTorch.
struct LinearWeights {
  Tensor weight;  // [out, in]
  Tensor bias;    // [out]; empty when the layer has none.
};

// Per-channel affine y = x * scale + shift after normalisation (LayerNorm),
// or the whole of an inference BatchNorm folded into scale and shift.
struct NormWeights {
  Tensor scale;  // [d]
  Tensor shift;  // [d]
};

struct ConformerLayerWeights {
  LinearWeights ff_macaron_w1, ff_macaron_w2, ff_w1, ff_w2;
  LinearWeights qkv;         // linear_q, linear_k, linear_v stacked: [3d, d], [3d].
  LinearWeights attn_out;    // [d, d]
  Tensor linear_pos;         // [d, d], no bias.
  Tensor pos_bias_u;         // [h, d_k]
  Tensor pos_bias_v;         // [h, d_k]
  LinearWeights pointwise_conv1;  // [2d, d]
  Tensor depthwise_weight;        // [d, K]
  Tensor depthwise_bias;          // [d]
  NormWeights conv_norm;          // LayerNorm affine, or folded BatchNorm.
  LinearWeights pointwise_conv2;  // [d, d]
  NormWeights norm_ff, norm_mha, norm_ff_macaron, norm_conv, norm_final;
};

struct ConformerWeights {
  // Subsampling convs. The first has one input channel: [d, k*k] with
  // patches in (row, col) order. Later ones are stored [d, k, k, d_in]
  // (input channel fastest) so that patches of a time-frequency-channel
  // activation are contiguous.
  std::vector<Tensor> conv_weight;
  std::vector<Tensor> conv_bias;
  std::vector<int> conv_kernel;
  std::vector<int> conv_stride;
  int conv_out_freq = 0;  // F' after the last conv.
  // Subsampling output Linear(d * F', d), columns reordered from WeNet's
  // channel-major (c * F' + f) to (f * d + c) to match that activation.
  LinearWeights embed_out;
  std::vector<ConformerLayerWeights> layers;
  NormWeights after_norm;
  LinearWeights ctc;  // [V, d]
};

// Loads and checks every tensor a model of `config` needs from `reader`:
// a missing tensor, one of the wrong shape or dtype, or a tensor the model
// does not use (other than the attention decoder, the position buffer and
// BatchNorm counters, which are ignored) is an INVALID_ARGUMENT naming it.
// The global CMVN tensors are not read here (see ConformerModel).
absl::StatusOr<ConformerWeights> LoadConformerWeights(const SafetensorsReader& reader,
                                                      const ModelConfig& config);

}  // namespace oasr::encoder
