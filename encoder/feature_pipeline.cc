#include "encoder/feature_pipeline.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace oasr::encoder {

absl::Status FeaturePipelineOptions::Validate() const {
  if (sample_rate < 8000 || sample_rate > 48000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FeaturePipelineOptions.sample_rate=", sample_rate, " is outside [8000, 48000] Hz"));
  }
  if (tail_padding_samples < 0 || tail_padding_samples > 16000) {
    return absl::InvalidArgumentError(absl::StrCat("FeaturePipelineOptions.tail_padding_samples=",
                                                   tail_padding_samples, " is outside [0, 16000]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<FeaturePipeline>> FeaturePipeline::Create(
    const FeaturePipelineOptions& options, const GlobalCmvn* cmvn) {
  OASR_RETURN_IF_ERROR(options.Validate());
  if (cmvn != nullptr && cmvn->dim() != Fbank::kNumBins) {
    return absl::InvalidArgumentError(absl::StrCat("FeaturePipeline: CMVN has ", cmvn->dim(),
                                                   " entries, expected ", Fbank::kNumBins));
  }
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<Resampler> resampler,
                        Resampler::Create(options.sample_rate, Fbank::kSampleRate));
  return std::unique_ptr<FeaturePipeline>(
      new FeaturePipeline(std::move(resampler), cmvn, options.tail_padding_samples));
}

absl::Status FeaturePipeline::AcceptWaveform(const float* samples, int64_t n) {
  if (finished_) return absl::FailedPreconditionError("FeaturePipeline: audio after InputFinished");
  resampled_.clear();
  OASR_RETURN_IF_ERROR(resampler_->Process(samples, n, &resampled_));
  AddResampled(resampled_);
  return absl::OkStatus();
}

absl::Status FeaturePipeline::AcceptPcm16(const int16_t* samples, int64_t n) {
  pcm_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pcm_[i] = samples[i] / 32768.0f;
  return AcceptWaveform(pcm_.data(), n);
}

absl::Status FeaturePipeline::InputFinished() {
  if (finished_) return absl::OkStatus();
  resampled_.clear();
  OASR_RETURN_IF_ERROR(resampler_->Flush(&resampled_));
  resampled_.resize(resampled_.size() + static_cast<size_t>(tail_padding_samples_), 0.0f);
  AddResampled(resampled_);
  finished_ = true;
  return absl::OkStatus();
}

void FeaturePipeline::AddResampled(const std::vector<float>& samples) {
  for (float s : samples) pending_.push_back(s * 32768.0f);
  size_t start = 0;
  while (pending_.size() - start >= static_cast<size_t>(Fbank::kFrameLength)) {
    float* frame = frames_.Append(1);
    fbank_.ComputeFrame(pending_.data() + start, frame);
    if (cmvn_ != nullptr) cmvn_->Apply(frame, 1);
    start += Fbank::kFrameShift;
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(start));
}

absl::Status FeaturePipeline::GetRows(int64_t start, int64_t count, float* out) const {
  return frames_.Get(start, count, out, "FeaturePipeline");
}

void FeaturePipeline::DiscardRowsBefore(int64_t row) { frames_.DiscardBefore(row); }

}  // namespace oasr::encoder
