#include "encoder/pcm_source.h"

#include <algorithm>

#include "common/status.h"
#include "encoder/fbank.h"

namespace oasr::encoder {

static_assert(PcmSource::WindowSamples(1) == Fbank::kFrameLength);
static_assert(PcmSource::WindowSamples(2) - PcmSource::WindowSamples(1) == Fbank::kFrameShift);

absl::StatusOr<std::unique_ptr<PcmSource>> PcmSource::Create(
    const FeaturePipelineOptions& options) {
  OASR_RETURN_IF_ERROR(options.Validate());
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<Resampler> resampler,
                        Resampler::Create(options.sample_rate, Fbank::kSampleRate));
  return std::unique_ptr<PcmSource>(new PcmSource(std::move(resampler)));
}

absl::Status PcmSource::AcceptPcm16(const int16_t* samples, int64_t n) {
  if (finished_) return absl::FailedPreconditionError("PcmSource: audio after InputFinished");
  // The same arithmetic as FeaturePipeline, so both front ends see the same
  // 16 kHz signal.
  pcm_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pcm_[i] = samples[i] / 32768.0f;
  resampled_.clear();
  OASR_RETURN_IF_ERROR(resampler_->Process(pcm_.data(), n, &resampled_));
  AddResampled();
  return absl::OkStatus();
}

absl::Status PcmSource::InputFinished() {
  if (finished_) return absl::OkStatus();
  resampled_.clear();
  OASR_RETURN_IF_ERROR(resampler_->Flush(&resampled_));
  AddResampled();
  finished_ = true;
  return absl::OkStatus();
}

void PcmSource::AddResampled() {
  for (float s : resampled_) pending_.push_back(s * 32768.0f);
  const int64_t whole = static_cast<int64_t>(pending_.size()) / kLayout.width;
  if (whole == 0) return;
  const size_t used = static_cast<size_t>(whole * kLayout.width);
  std::copy(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(used),
            rows_.Append(whole));
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(used));
}

absl::Status PcmSource::GetRows(int64_t start, int64_t count, float* out) const {
  return rows_.Get(start, count, out, "PcmSource");
}

}  // namespace oasr::encoder
