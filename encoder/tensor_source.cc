#include "encoder/tensor_source.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status.h"

namespace oasr::encoder {

absl::StatusOr<Tensor> TensorSource::Get(const std::string& name, const Shape& shape) {
  used_.insert(name);
  const SafetensorsReader::Entry* entry = reader_.Find(name);
  if (entry == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(reader_.path(), ": missing tensor '", name, "'"));
  }
  if (!(entry->shape == shape)) {
    return absl::InvalidArgumentError(absl::StrCat(reader_.path(), ": tensor '", name,
                                                   "' has shape ", entry->shape.ToString(),
                                                   ", expected ", shape.ToString()));
  }
  return reader_.ReadFloat32(name);
}

absl::StatusOr<LinearWeights> TensorSource::GetLinear(const std::string& prefix, int64_t out,
                                                      int64_t in) {
  LinearWeights w;
  OASR_ASSIGN_OR_RETURN(w.weight, Get(prefix + ".weight", {out, in}));
  OASR_ASSIGN_OR_RETURN(w.bias, Get(prefix + ".bias", {out}));
  return w;
}

absl::StatusOr<LinearWeights> TensorSource::GetPointwise(const std::string& prefix, int64_t out,
                                                         int64_t in) {
  LinearWeights w;
  OASR_ASSIGN_OR_RETURN(Tensor weight, Get(prefix + ".weight", {out, in, 1}));
  w.weight = Reshaped(std::move(weight), {out, in});
  OASR_ASSIGN_OR_RETURN(w.bias, Get(prefix + ".bias", {out}));
  return w;
}

absl::StatusOr<NormWeights> TensorSource::GetLayerNorm(const std::string& prefix, int64_t d) {
  NormWeights n;
  OASR_ASSIGN_OR_RETURN(n.scale, Get(prefix + ".weight", {d}));
  OASR_ASSIGN_OR_RETURN(n.shift, Get(prefix + ".bias", {d}));
  return n;
}

absl::StatusOr<NormWeights> TensorSource::GetBatchNorm(const std::string& prefix, int64_t d) {
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

absl::Status TensorSource::CheckNoLeftovers(
    const std::function<bool(const std::string&)>& ignored) const {
  for (const std::string& name : reader_.Names()) {
    if (used_.count(name) || ignored(name)) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        reader_.path(), ": unexpected tensor '", name, "' (not part of this model's config)"));
  }
  return absl::OkStatus();
}

Tensor TensorSource::Reshaped(Tensor t, const Shape& shape) {
  auto out = Tensor::Empty(shape, DType::kFloat32);
  OASR_CHECK(out.ok() && out->numel() == t.numel());
  std::memcpy(out->data(), t.data(), t.nbytes());
  return std::move(*out);
}

Tensor StackRows(const std::vector<const Tensor*>& parts) {
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

}  // namespace oasr::encoder
