// Reads a model's float32 tensors from a safetensors file by name, checking
// each shape, and remembers which names were read so that the tensors nobody
// used can be reported. Shared by the encoder's and the attention decoder's
// weight loaders.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "encoder/model_weights.h"
#include "encoder/safetensors_reader.h"

namespace oasr::encoder {

class TensorSource {
 public:
  explicit TensorSource(const SafetensorsReader& reader) : reader_(reader) {}

  // The tensor `name` as float32; INVALID_ARGUMENT naming it when it is
  // missing or not of `shape`.
  absl::StatusOr<Tensor> Get(const std::string& name, const Shape& shape);
  // prefix.weight [out, in] and prefix.bias [out].
  absl::StatusOr<LinearWeights> GetLinear(const std::string& prefix, int64_t out, int64_t in);
  // A Conv1d with kernel 1: prefix.weight [out, in, 1] read as [out, in].
  absl::StatusOr<LinearWeights> GetPointwise(const std::string& prefix, int64_t out, int64_t in);
  // prefix.weight and prefix.bias [d].
  absl::StatusOr<NormWeights> GetLayerNorm(const std::string& prefix, int64_t d);
  // An inference BatchNorm (eps 1e-5) folded into one affine map.
  absl::StatusOr<NormWeights> GetBatchNorm(const std::string& prefix, int64_t d);

  // INVALID_ARGUMENT naming the first tensor of the file that nothing read
  // and `ignored` does not excuse.
  absl::Status CheckNoLeftovers(const std::function<bool(const std::string&)>& ignored) const;

  const std::string& path() const { return reader_.path(); }

  // `t`'s data under another shape of the same size.
  static Tensor Reshaped(Tensor t, const Shape& shape);

 private:
  const SafetensorsReader& reader_;
  std::set<std::string> used_;
};

// Tensors concatenated along dimension 0 (the same trailing shape).
Tensor StackRows(const std::vector<const Tensor*>& parts);

}  // namespace oasr::encoder
