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
