// A loaded model directory: config.json, model.safetensors, units.txt and
// the global CMVN (see docs/model-format.md). Immutable after Load, so one
// instance is shared by every encoder and stream.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "encoder/attention_decoder.h"
#include "encoder/global_cmvn.h"
#include "encoder/model_config.h"
#include "encoder/model_weights.h"
#include "encoder/vocabulary.h"

namespace oasr::encoder {

class ConformerModel {
 public:
  // Loads and validates everything in `dir`. The CMVN comes from the
  // encoder.global_cmvn.{mean,istd} tensors or, when the weights have none,
  // from a WeNet `global_cmvn` JSON file in `dir`; having both or neither is
  // an error. The attention decoder, when the directory has one, is loaded
  // too (LoadAttentionDecoder). Every failure is a Status naming the file and the tensor or
  // field at fault; nothing is defaulted.
  static absl::StatusOr<std::unique_ptr<ConformerModel>> Load(const std::string& dir);

  const ModelConfig& config() const { return config_; }
  const ConformerWeights& weights() const { return weights_; }
  const GlobalCmvn& cmvn() const { return cmvn_; }
  const Vocabulary& vocabulary() const { return vocabulary_; }
  // The attention decoder (decoder.json and the decoder.* tensors), or
  // nullptr for a CTC-only model.
  const AttentionDecoderModel* attention_decoder() const { return attention_decoder_.get(); }

 private:
  ConformerModel() = default;

  ModelConfig config_;
  ConformerWeights weights_;
  GlobalCmvn cmvn_;
  Vocabulary vocabulary_;
  std::unique_ptr<AttentionDecoderModel> attention_decoder_;
};

}  // namespace oasr::encoder
