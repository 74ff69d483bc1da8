// WeNet's attention decoder of a U2 (transformer) or U2++ (bitransformer)
// model, as a model directory keeps it: decoder.json and the `decoder.*`
// tensors of model.safetensors (docs/model-format.md, "Attention decoder").
// Loaded with the model; AttentionRescorer (attention_rescorer.h) computes
// with it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "encoder/model_config.h"
#include "encoder/model_weights.h"
#include "encoder/safetensors_reader.h"

namespace oasr::encoder {

// The decode-time rescoring weights: total = rescoring_weight * decoder
// score + ctc_weight * CTC score, the decoder score being (1 -
// reverse_weight) * left-to-right + reverse_weight * right-to-left.
struct RescoringWeights {
  float ctc_weight = 0.5f;
  float reverse_weight = 0.0f;
  float rescoring_weight = 1.0f;
};

struct AttentionDecoderConfig {
  bool bidirectional = false;  // "bitransformer" (U2++), else "transformer" (U2)
  int attention_heads = 4;
  int linear_units = 2048;
  int num_blocks = 6;    // left-to-right layers
  int r_num_blocks = 0;  // right-to-left layers (bitransformer only)
  int sos = 0;
  int eos = 0;
  RescoringWeights rescoring;

  // decoder.json's text, checked against the encoder width d and the
  // vocabulary V. INVALID_ARGUMENT naming "decoder.json" and the field:
  // unknown or missing keys, a format other than oasr-attention-decoder 1,
  // a decoder type other than transformer / bitransformer, heads not
  // dividing d, sos / eos outside [0, V), weights out of range (reverse_weight
  // in [0, 1] and 0 for a transformer).
  static absl::StatusOr<AttentionDecoderConfig> FromJson(const std::string& text, int vocab,
                                                         int d);
};

struct DecoderLayerWeights {
  LinearWeights self_qkv;  // linear_q, linear_k, linear_v stacked: [3d, d], [3d]
  LinearWeights self_out;  // [d, d]
  LinearWeights src_q;     // [d, d]
  LinearWeights src_kv;    // linear_k, linear_v stacked: [2d, d], [2d]
  LinearWeights src_out;   // [d, d]
  LinearWeights w1, w2;    // [U, d], [d, U]
  NormWeights norm1, norm2, norm3;
};

// One direction's TransformerDecoder.
struct DecoderDirectionWeights {
  Tensor embed;  // [V, d]
  std::vector<DecoderLayerWeights> layers;
  NormWeights after_norm;
  LinearWeights output;  // [V, d], [V]
};

struct AttentionDecoderModel {
  AttentionDecoderConfig config;
  DecoderDirectionWeights left;
  DecoderDirectionWeights right;  // bidirectional only
};

// The attention decoder of the model directory `dir`, or nullptr when it has
// none (no decoder.json and no decoder.* tensors). `reader` is the
// directory's model.safetensors. INVALID_ARGUMENT naming the file and the
// field or tensor: decoder.* tensors without decoder.json (or the reverse),
// a tensor missing, of the wrong shape, or not part of the decoder.
absl::StatusOr<std::unique_ptr<AttentionDecoderModel>> LoadAttentionDecoder(
    const std::string& dir, const SafetensorsReader& reader, const ModelConfig& model);

}  // namespace oasr::encoder
