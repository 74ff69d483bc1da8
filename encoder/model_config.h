// The geometry and serving settings of a Conformer CTC model directory
// (config.json; see docs/model-format.md). Names follow WeNet's train.yaml.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace oasr::encoder {

enum class ConvNorm { kLayerNorm, kBatchNorm };
enum class SubsamplingType { kConv2d4, kConv2d6, kConv2d8 };

struct ModelConfig {
  // Top level.
  int input_dim = 0;   // Mel bins; must be 80.
  int output_dim = 0;  // Vocabulary size V (CTC outputs, blank = 0).
  // encoder_conf.
  int output_size = 0;      // d
  int attention_heads = 0;  // h
  int linear_units = 0;     // FFN width
  int num_blocks = 0;       // layers
  SubsamplingType input_layer = SubsamplingType::kConv2d4;
  int cnn_module_kernel = 0;  // K
  ConvNorm cnn_module_norm = ConvNorm::kLayerNorm;
  int static_chunk_size = 0;
  bool use_dynamic_chunk = false;
  // serving.
  int chunk_size = 0;        // Encoder frames per chunk.
  int num_left_chunks = -1;  // -1 keeps all history.
  // The decoder's word confidence floor (CtcDecoderConfig), optional; 0
  // keeps every word.
  double min_word_confidence = 0.0;

  // Parses config.json text. Every required field must be present with the
  // right JSON type; options the engine does not implement are refused by
  // name ("unsupported option encoder_conf.causal=false"), as are unknown
  // keys. Then runs Validate().
  static absl::StatusOr<ModelConfig> FromJson(const std::string& text);

  // Checks ranges and consistency; messages name the field, value and limit.
  absl::Status Validate() const;

  int head_dim() const { return output_size / attention_heads; }
  // Subsampling rate (4, 6 or 8) and the extra feature frames an output
  // frame needs beyond the rate (6, 10 or 14).
  int subsampling_rate() const;
  int right_context() const;
  // Feature frames a chunk of `frames` encoder frames needs.
  int WindowFrames(int frames) const {
    return (frames - 1) * subsampling_rate() + right_context() + 1;
  }
  // Attention history kept per stream (-1: unlimited).
  int RequiredCacheSize() const { return num_left_chunks < 0 ? -1 : chunk_size * num_left_chunks; }
};

const char* SubsamplingName(SubsamplingType type);

}  // namespace oasr::encoder
