#include "encoder/pcm_source.h"

#include <algorithm>

#include "common/pcm16.h"
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
  return std::unique_ptr<PcmSource>(
      new PcmSource(std::move(resampler), options.tail_padding_samples));
}

absl::Status PcmSource::AcceptPcm16(const int16_t* samples, int64_t n) {
  if (finished_) return absl::FailedPreconditionError("PcmSource: audio after InputFinished");
  if (exact_) {
    // The client's samples are the rows: a copy.
    AddSamples(
        n, [samples](int64_t i) { return samples[i]; }, pending16_, rows16_);
    return absl::OkStatus();
  }
  // The same arithmetic as FeaturePipeline, so both front ends see the same
  // 16 kHz signal.
  pcm_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pcm_[i] = samples[i] / 32768.0f;
  resampled_.clear();
  OASR_RETURN_IF_ERROR(resampler_->Process(pcm_.data(), n, &resampled_));
  AddSamples(
      static_cast<int64_t>(resampled_.size()),
      [this](int64_t i) { return resampled_[i] * 32768.0f; }, pending_, rows_);
  return absl::OkStatus();
}

absl::Status PcmSource::InputFinished() {
  if (finished_) return absl::OkStatus();
  if (exact_) {
    AddSamples(
        tail_padding_samples_, [](int64_t) { return int16_t{0}; }, pending16_, rows16_);
  } else {
    resampled_.clear();
    OASR_RETURN_IF_ERROR(resampler_->Flush(&resampled_));
    AddSamples(
        static_cast<int64_t>(resampled_.size()),
        [this](int64_t i) { return resampled_[i] * 32768.0f; }, pending_, rows_);
    AddSamples(
        tail_padding_samples_, [](int64_t) { return 0.0f; }, pending_, rows_);
  }
  finished_ = true;
  return absl::OkStatus();
}

template <typename T, typename Sample>
void PcmSource::AddSamples(int64_t n, const Sample& sample, std::vector<T>& pending,
                           BasicFrameBuffer<T>& rows) {
  const int64_t width = kLayout.width;
  int64_t i = 0;
  if (!pending.empty()) {
    // Complete the row begun last time.
    const int64_t take = std::min<int64_t>(n, width - static_cast<int64_t>(pending.size()));
    for (; i < take; ++i) pending.push_back(sample(i));
    if (static_cast<int64_t>(pending.size()) < width) return;
    std::copy(pending.begin(), pending.end(), rows.Append(1));
    pending.clear();
  }
  const int64_t whole = (n - i) / width;
  if (whole > 0) {
    T* out = rows.Append(whole);
    for (int64_t j = 0; j < whole * width; ++j) out[j] = sample(i + j);
    i += whole * width;
  }
  for (; i < n; ++i) pending.push_back(sample(i));
}

absl::Status PcmSource::GetRows(int64_t start, int64_t count, float* out) const {
  if (!exact_) return rows_.Get(start, count, out, "PcmSource");
  OASR_ASSIGN_OR_RETURN(const int16_t* held, rows16_.Held(start, count, "PcmSource"));
  Pcm16ToFloat(held, count * kLayout.width, out);
  return absl::OkStatus();
}

absl::Status PcmSource::GetRowsPcm16(int64_t start, int64_t count, int16_t* out) const {
  if (exact_) return rows16_.Get(start, count, out, "PcmSource");
  OASR_ASSIGN_OR_RETURN(const float* held, rows_.Held(start, count, "PcmSource"));
  RoundToPcm16(held, count * kLayout.width, out);
  return absl::OkStatus();
}

}  // namespace oasr::encoder
