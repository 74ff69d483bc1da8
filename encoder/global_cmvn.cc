#include "encoder/global_cmvn.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace oasr::encoder {

absl::StatusOr<GlobalCmvn> GlobalCmvn::FromMeanIstd(std::vector<float> mean,
                                                    std::vector<float> istd) {
  if (mean.empty() || mean.size() != istd.size()) {
    return absl::InvalidArgumentError(absl::StrCat("global CMVN: mean has ", mean.size(),
                                                   " entries and istd ", istd.size()));
  }
  for (size_t i = 0; i < mean.size(); ++i) {
    if (!std::isfinite(mean[i]) || !std::isfinite(istd[i])) {
      return absl::InvalidArgumentError(absl::StrCat("global CMVN: entry ", i, " is not finite"));
    }
  }
  GlobalCmvn c;
  c.mean_ = std::move(mean);
  c.istd_ = std::move(istd);
  return c;
}

absl::StatusOr<GlobalCmvn> GlobalCmvn::FromWenetJson(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("global_cmvn: not a JSON object");
  }
  for (const char* key : {"mean_stat", "var_stat", "frame_num"}) {
    if (!j.contains(key)) {
      return absl::InvalidArgumentError(absl::StrCat("global_cmvn: missing field '", key, "'"));
    }
  }
  const auto& ms = j["mean_stat"];
  const auto& vs = j["var_stat"];
  if (!ms.is_array() || !vs.is_array() || ms.size() != vs.size() || ms.empty()) {
    return absl::InvalidArgumentError(
        "global_cmvn: mean_stat and var_stat must be non-empty arrays of equal length");
  }
  if (!j["frame_num"].is_number() || j["frame_num"].get<double>() <= 0) {
    return absl::InvalidArgumentError("global_cmvn: frame_num must be a positive number");
  }
  const double n = j["frame_num"].get<double>();
  std::vector<float> mean(ms.size()), istd(ms.size());
  for (size_t i = 0; i < ms.size(); ++i) {
    if (!ms[i].is_number() || !vs[i].is_number()) {
      return absl::InvalidArgumentError(absl::StrCat("global_cmvn: entry ", i, " is not a number"));
    }
    const double m = ms[i].get<double>() / n;
    const double var = std::max(vs[i].get<double>() / n - m * m, 1.0e-20);
    mean[i] = static_cast<float>(m);
    istd[i] = static_cast<float>(1.0 / std::sqrt(var));
  }
  return FromMeanIstd(std::move(mean), std::move(istd));
}

void GlobalCmvn::Apply(float* feats, int64_t frames) const {
  const size_t d = mean_.size();
  for (int64_t t = 0; t < frames; ++t) {
    float* row = feats + t * static_cast<int64_t>(d);
    for (size_t i = 0; i < d; ++i) row[i] = (row[i] - mean_[i]) * istd_[i];
  }
}

}  // namespace oasr::encoder
