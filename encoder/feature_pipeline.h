// One stream's front end, incremental: audio at any supported rate goes in
// as it arrives; resampled to 16 kHz (libsoxr), framed, turned into Kaldi
// fbank and normalised with the model's global CMVN; each frame is
// available as soon as its 400 samples are.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "encoder/fbank.h"
#include "encoder/feature_source.h"
#include "encoder/frame_buffer.h"
#include "encoder/global_cmvn.h"
#include "encoder/resampler.h"

namespace oasr::encoder {

struct FeaturePipelineOptions {
  int sample_rate = 16000;  // Input rate in Hz, [8000, 48000].
  // Zeros (16 kHz samples, [0, 16000]) appended at InputFinished so that the
  // last real samples complete an fbank window and reach an encoder frame
  // instead of being dropped (what WindowSamples of the model's right
  // context says; 0: none, the audio's tail shorter than that is lost).
  int tail_padding_samples = 0;
  absl::Status Validate() const;
};

// The production FeatureSource: 80-bin fbank at 16 kHz, 10 ms shift.
class FeaturePipeline final : public FeatureSource {
 public:
  // `cmvn` (not owned, may be null for raw fbank) must outlive the
  // pipeline and have Fbank::kNumBins entries.
  static absl::StatusOr<std::unique_ptr<FeaturePipeline>> Create(
      const FeaturePipelineOptions& options, const GlobalCmvn* cmvn);

  // Feeds n samples in [-1, 1) (floats) or 16-bit PCM at the input rate.
  // FAILED_PRECONDITION after InputFinished. Not thread-safe: one owner.
  absl::Status AcceptWaveform(const float* samples, int64_t n);
  absl::Status AcceptPcm16(const int16_t* samples, int64_t n) override;

  // No more audio: flushes the resampler's tail and the tail padding into
  // frames.
  absl::Status InputFinished() override;
  bool input_finished() const { return finished_; }

  // Its rows are its feature frames ([80] floats each; the default
  // layout), so the frame methods of FeatureSource read them directly.
  // Discarding gives memory back as FrameBuffer says.
  int64_t NumRowsReady() const override { return frames_.end(); }
  absl::Status GetRows(int64_t start, int64_t count, float* out) const override;
  void DiscardRowsBefore(int64_t row) override;

 private:
  FeaturePipeline(std::unique_ptr<Resampler> resampler, const GlobalCmvn* cmvn,
                  int tail_padding_samples)
      : resampler_(std::move(resampler)),
        cmvn_(cmvn),
        tail_padding_samples_(tail_padding_samples) {}

  // Appends 16 kHz samples (int16 range) and computes every complete frame.
  void AddResampled(const std::vector<float>& samples);

  std::unique_ptr<Resampler> resampler_;
  const GlobalCmvn* cmvn_;
  int tail_padding_samples_;
  Fbank fbank_;
  std::vector<float> pending_;    // 16 kHz samples from the next frame's start on.
  std::vector<float> resampled_;  // Scratch.
  std::vector<float> pcm_;        // Scratch of AcceptPcm16.
  FrameBuffer frames_{Fbank::kNumBins};
  bool finished_ = false;
};

}  // namespace oasr::encoder
