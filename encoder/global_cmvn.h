// Global cepstral mean and variance normalisation: x' = (x - mean) * istd
// per mel bin, with WeNet's statistics.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace oasr::encoder {

class GlobalCmvn {
 public:
  // From mean and inverse standard deviation vectors of equal, non-zero size.
  static absl::StatusOr<GlobalCmvn> FromMeanIstd(std::vector<float> mean, std::vector<float> istd);

  // From the text of WeNet's global_cmvn JSON {"mean_stat", "var_stat",
  // "frame_num"}: mean = mean_stat / N, var = var_stat / N - mean^2 floored
  // at 1e-20, istd = 1 / sqrt(var), in float64. Errors name the field.
  static absl::StatusOr<GlobalCmvn> FromWenetJson(const std::string& text);

  int dim() const { return static_cast<int>(mean_.size()); }
  const std::vector<float>& mean() const { return mean_; }
  const std::vector<float>& istd() const { return istd_; }

  // Normalises `frames` rows of dim() values in place. Thread-safe.
  void Apply(float* feats, int64_t frames) const;

 private:
  std::vector<float> mean_;
  std::vector<float> istd_;
};

}  // namespace oasr::encoder
