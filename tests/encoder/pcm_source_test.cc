// encoder::PcmSource, the front end of streams whose fbank runs on the
// model's device: its frame count is the fbank's, its windows are exactly
// the 16 kHz samples those frames read, and the filterbank of its windows
// (kernels::LogMel on the CPU) equals FeaturePipeline's features at every
// input rate, within 1e-4 (the GPU front end's bound is 1e-3).
#include "encoder/pcm_source.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "encoder/fbank.h"
#include "encoder/feature_pipeline.h"
#include "kernels/log_mel.h"

namespace oasr::encoder {
namespace {

std::vector<int16_t> Speechlike(std::mt19937& rng, int64_t n, int rate) {
  std::uniform_real_distribution<double> freq(120, 3500), amp(800, 9000);
  std::normal_distribution<double> noise(0, 200);
  const double f1 = freq(rng), f2 = freq(rng), a = amp(rng);
  std::vector<int16_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / rate;
    const double x = a * (0.5 + 0.5 * std::sin(2 * M_PI * 1.7 * t)) *
                         (std::sin(2 * M_PI * f1 * t) + 0.4 * std::sin(2 * M_PI * f2 * t)) +
                     noise(rng);
    out[static_cast<size_t>(i)] = static_cast<int16_t>(std::clamp(x, -32768.0, 32767.0));
  }
  return out;
}

TEST(PcmSourceTest, LayoutCountsTheFbanksFramesAndWindows) {
  constexpr RowLayout l = PcmSource::kLayout;
  for (int64_t n = 0; n < 4000; ++n) {
    ASSERT_EQ(l.FramesIn(n / l.width), Fbank::NumFrames(n)) << n << " samples";
  }
  EXPECT_EQ(l.WindowRows(0), 0);
  for (int64_t frames = 1; frames < 100; ++frames) {
    EXPECT_EQ(PcmSource::WindowSamples(frames),
              (frames - 1) * Fbank::kFrameShift + Fbank::kFrameLength);
  }
  // A host front end's rows are its frames.
  constexpr RowLayout host;
  EXPECT_EQ(host.FramesIn(17), 17);
  EXPECT_EQ(host.WindowRows(67), 67);
  EXPECT_EQ(host.FirstRow(64), 64);
}

TEST(PcmSourceTest, WindowsAreTheSamplesTheirFramesRead) {
  std::mt19937 rng(5);
  const std::vector<int16_t> audio = Speechlike(rng, 16000 * 3 + 123, 16000);
  auto source = PcmSource::Create({16000});
  ASSERT_TRUE(source.ok()) << source.status();
  size_t sent = 0;
  int64_t discarded_before = 0;
  while (sent < audio.size()) {
    const size_t n = std::min(audio.size() - sent, static_cast<size_t>(1 + rng() % 3000));
    ASSERT_TRUE((*source)->AcceptPcm16(audio.data() + sent, static_cast<int64_t>(n)).ok());
    sent += n;
    const int64_t ready = (*source)->NumFramesReady();
    ASSERT_EQ(ready, Fbank::NumFrames(static_cast<int64_t>(sent)));
    if (ready <= discarded_before) continue;
    const int64_t start = discarded_before + static_cast<int64_t>(rng() % (ready - discarded_before));
    const int64_t count = 1 + static_cast<int64_t>(rng() % (ready - start));
    std::vector<float> window(static_cast<size_t>(PcmSource::WindowSamples(count)), -1e9f);
    ASSERT_TRUE((*source)->GetFrames(start, count, window.data()).ok());
    for (size_t i = 0; i < window.size(); ++i) {
      ASSERT_EQ(window[i], static_cast<float>(audio[start * Fbank::kFrameShift + i]))
          << "frame " << start << " sample " << i;
    }
    (*source)->DiscardFramesBefore(start);
    discarded_before = start;
  }
  if (discarded_before > 0) {
    std::vector<float> window(static_cast<size_t>(PcmSource::WindowSamples(1)));
    EXPECT_EQ((*source)->GetFrames(discarded_before - 1, 1, window.data()).code(),
              absl::StatusCode::kOutOfRange);
  }
  ASSERT_TRUE((*source)->InputFinished().ok());
  EXPECT_EQ((*source)->NumFramesReady(), Fbank::NumFrames(static_cast<int64_t>(audio.size())));
  EXPECT_EQ((*source)->AcceptPcm16(audio.data(), 1).code(), absl::StatusCode::kFailedPrecondition);
}

// The rows as 16-bit samples (what a PCM ring holds): at 16 kHz the
// client's samples themselves, and the float rows' own values; resampled,
// the float rows rounded (RoundToPcm16). Both through the tail padding.
TEST(PcmSourceTest, SixteenBitRowsAreTheFloatRowsRounded) {
  std::mt19937 rng(9);
  for (int rate : {16000, 8000, 44100}) {
    FeaturePipelineOptions options;
    options.sample_rate = rate;
    options.tail_padding_samples = 700;
    auto source = PcmSource::Create(options);
    ASSERT_TRUE(source.ok()) << source.status();
    const std::vector<int16_t> audio = Speechlike(rng, rate * 2 + 77, rate);
    for (size_t sent = 0; sent < audio.size();) {
      const size_t n = std::min(audio.size() - sent, static_cast<size_t>(1 + rng() % 2000));
      ASSERT_TRUE((*source)->AcceptPcm16(audio.data() + sent, static_cast<int64_t>(n)).ok());
      sent += n;
    }
    ASSERT_TRUE((*source)->InputFinished().ok());
    const int64_t rows = (*source)->NumRowsReady();
    const int64_t width = PcmSource::kLayout.width;
    ASSERT_GT(rows, 300) << rate;  // 2 s of 5 ms rows.
    std::vector<float> floats(static_cast<size_t>(rows * width), -1e9f);
    std::vector<int16_t> pcm(floats.size(), 12345);
    ASSERT_TRUE((*source)->GetRows(0, rows, floats.data()).ok());
    ASSERT_TRUE((*source)->GetRowsPcm16(0, rows, pcm.data()).ok());
    int64_t inexact = 0;
    for (size_t i = 0; i < floats.size(); ++i) {
      ASSERT_LE(std::fabs(pcm[i] - floats[i]), 0.5f) << rate << " Hz, sample " << i;
      if (rate == 16000 && i < audio.size()) {
        ASSERT_EQ(pcm[i], audio[i]) << i;
      }
      inexact += pcm[i] != floats[i];
    }
    // At 16 kHz the rows are integers; resampled, almost none are.
    if (rate == 16000) {
      EXPECT_EQ(inexact, 0);
      for (size_t i = audio.size(); i < floats.size(); ++i) ASSERT_EQ(pcm[i], 0) << "padding";
    } else {
      EXPECT_GT(inexact, rows * width / 2) << rate;
    }
    // Discarded rows are gone from both.
    (*source)->DiscardRowsBefore(rows / 2);
    EXPECT_EQ((*source)->GetRowsPcm16(0, 1, pcm.data()).code(), absl::StatusCode::kOutOfRange);
    EXPECT_EQ((*source)->GetRows(0, 1, floats.data()).code(), absl::StatusCode::kOutOfRange);
    ASSERT_TRUE((*source)->GetRowsPcm16(rows / 2, rows - rows / 2, pcm.data()).ok());
    EXPECT_EQ((*source)->GetRowsPcm16(rows - 1, 2, pcm.data()).code(),
              absl::StatusCode::kOutOfRange);
  }
}

// The filterbank of a PcmSource's windows against FeaturePipeline's frames
// from the same audio, pushed in the same pieces (resampled alike).
TEST(PcmSourceTest, ItsFilterbankEqualsTheHostFrontEndAtEveryRate) {
  std::vector<float> window_table, mel;
  Fbank::DenseTables(&window_table, &mel);
  ExecutionContextOptions o;
  auto ctx = ExecutionContext::Create(o);
  ASSERT_TRUE(ctx.ok());
  for (int rate : {16000, 8000, 44100}) {
    std::mt19937 rng(rate);
    const std::vector<int16_t> audio = Speechlike(rng, rate * 2 + 77, rate);
    auto source = PcmSource::Create({rate});
    auto pipeline = FeaturePipeline::Create({rate}, nullptr);
    ASSERT_TRUE(source.ok() && pipeline.ok());
    for (size_t sent = 0; sent < audio.size();) {
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(audio.size() - sent), 1 + rng() % 5000);
      ASSERT_TRUE((*source)->AcceptPcm16(audio.data() + sent, n).ok());
      ASSERT_TRUE((*pipeline)->AcceptPcm16(audio.data() + sent, n).ok());
      sent += static_cast<size_t>(n);
      ASSERT_EQ((*source)->NumFramesReady(), (*pipeline)->NumFramesReady()) << rate << " Hz";
    }
    ASSERT_TRUE((*source)->InputFinished().ok());
    ASSERT_TRUE((*pipeline)->InputFinished().ok());
    const int64_t frames = (*pipeline)->NumFramesReady();
    ASSERT_EQ((*source)->NumFramesReady(), frames) << rate << " Hz";
    ASSERT_GT(frames, 150);
    std::vector<float> pcm(static_cast<size_t>(PcmSource::WindowSamples(frames)));
    ASSERT_TRUE((*source)->GetFrames(0, frames, pcm.data()).ok());
    std::vector<float> want(static_cast<size_t>(frames * Fbank::kNumBins));
    ASSERT_TRUE((*pipeline)->GetFrames(0, frames, want.data()).ok());

    const int32_t count = static_cast<int32_t>(frames);
    std::vector<float> got(want.size(), std::nanf(""));
    kernels::LogMelParams p;
    p.pcm = pcm.data();
    p.pcm_stride = static_cast<int64_t>(pcm.size());
    p.frames = &count;
    p.rows = 1;
    p.max_frames = count;
    p.window = window_table.data();
    p.mel = mel.data();
    p.out = got.data();
    ASSERT_TRUE(kernels::LogMel(**ctx, p).ok());
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, double{std::fabs(got[i] - want[i])});
    // 2e-6 here: both compute in double up to the power spectrum. The
    // bound the GPU front end is held to is 1e-3.
    EXPECT_LE(worst, 1e-4) << rate << " Hz";
  }
}

}  // namespace
}  // namespace oasr::encoder
