// A stream's front end when the fbank runs on the model's device: audio at
// any supported rate is resampled to 16 kHz exactly as FeaturePipeline does
// (libsoxr; samples kept in int16 range) and handed out as rows of 80
// samples, so that a window of feature frames is a whole number of rows
// (kLayout: a 400-sample frame every 160 samples). The device computes the
// same Kaldi fbank and CMVN from them (kernels::LogMel), frame for frame.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "encoder/feature_pipeline.h"
#include "encoder/feature_source.h"
#include "encoder/frame_buffer.h"
#include "encoder/resampler.h"

namespace oasr::encoder {

class PcmSource final : public FeatureSource {
 public:
  static constexpr RowLayout kLayout{80, 2, 3};
  // Samples a window of `frames` feature frames spans.
  static constexpr int64_t WindowSamples(int64_t frames) {
    return kLayout.WindowRows(frames) * kLayout.width;
  }

  static absl::StatusOr<std::unique_ptr<PcmSource>> Create(const FeaturePipelineOptions& options);

  RowLayout layout() const override { return kLayout; }
  // At 16 kHz the samples only become rows of floats.
  bool CopiesInput() const override { return resampler_->in_rate() == resampler_->out_rate(); }
  absl::Status AcceptPcm16(const int16_t* samples, int64_t n) override;
  // Flushes the resampler's tail and the tail padding (options'
  // tail_padding_samples zeros); a last partial row (under 5 ms, less than
  // any frame needs) is dropped, as the fbank drops a partial frame.
  absl::Status InputFinished() override;
  int64_t NumRowsReady() const override { return exact_ ? rows16_.end() : rows_.end(); }
  absl::Status GetRows(int64_t start, int64_t count, float* out) const override;
  // At 16 kHz a copy of the client's samples; resampled rows are rounded.
  absl::Status GetRowsPcm16(int64_t start, int64_t count, int16_t* out) const override;
  void DiscardRowsBefore(int64_t row) override {
    exact_ ? rows16_.DiscardBefore(row) : rows_.DiscardBefore(row);
  }

 private:
  PcmSource(std::unique_ptr<Resampler> resampler, int tail_padding_samples)
      : resampler_(std::move(resampler)),
        tail_padding_samples_(tail_padding_samples),
        exact_(resampler_->in_rate() == resampler_->out_rate()) {}
  // Appends n samples (sample(i): a 16 kHz sample in int16 range) to
  // `rows`: whole rows straight in, the rest in `pending`.
  template <typename T, typename Sample>
  static void AddSamples(int64_t n, const Sample& sample, std::vector<T>& pending,
                         BasicFrameBuffer<T>& rows);

  std::unique_ptr<Resampler> resampler_;
  int tail_padding_samples_;
  // 16 kHz input: the rows are the client's 16-bit samples (rows16_,
  // pending16_), half the bytes and no conversion on the way to a PCM ring;
  // otherwise the resampler's floats (rows_, pending_).
  const bool exact_;
  std::vector<float> pcm_;        // Scratch: the input as floats in [-1, 1) (resampling only).
  std::vector<float> resampled_;  // Scratch.
  std::vector<float> pending_;    // 16 kHz samples short of a whole row.
  FrameBuffer rows_{kLayout.width};
  std::vector<int16_t> pending16_;
  BasicFrameBuffer<int16_t> rows16_{kLayout.width};
  bool finished_ = false;
};

}  // namespace oasr::encoder
