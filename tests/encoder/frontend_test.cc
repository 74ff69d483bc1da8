// The C++ front end against torchaudio.compliance.kaldi.fbank on speech
// (espeak-ng when installed, see tools/reference/make_fixtures.py).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "encoder/fbank.h"
#include "encoder/feature_pipeline.h"
#include "encoder/npy_io.h"
#include "gtest/gtest.h"
#include "tests/encoder/test_util.h"

namespace oasr::encoder {
namespace {

struct FbankFixture {
  Tensor wave;   // [N] float in [-1, 1) at 16 kHz
  Tensor fbank;  // [frames, 80] torchaudio
};

FbankFixture LoadFbankFixture() {
  const nlohmann::json manifest = testing::LoadManifest();
  FbankFixture f;
  auto wave = ReadNpyFloat32(manifest["fbank"]["wave"].get<std::string>());
  auto fbank = ReadNpyFloat32(manifest["fbank"]["fbank"].get<std::string>());
  EXPECT_TRUE(wave.ok() && fbank.ok());
  if (wave.ok()) f.wave = std::move(*wave);
  if (fbank.ok()) f.fbank = std::move(*fbank);
  return f;
}

TEST(FbankTest, MatchesTorchaudioKaldiFbank) {
  FbankFixture f = LoadFbankFixture();
  ASSERT_FALSE(f.wave.empty());
  const int64_t frames = Fbank::NumFrames(f.wave.numel());
  ASSERT_EQ(frames, f.fbank.dim(0));
  Fbank fbank;
  std::vector<float> samples(Fbank::kFrameLength), out(Fbank::kNumBins);
  float worst = 0;
  for (int64_t t = 0; t < frames; ++t) {
    for (int i = 0; i < Fbank::kFrameLength; ++i) {
      samples[i] = f.wave.data<float>()[t * Fbank::kFrameShift + i] * 32768.0f;
    }
    fbank.ComputeFrame(samples.data(), out.data());
    worst = std::max(worst, testing::MaxAbsDiff(out.data(), f.fbank.data<float>() + t * 80, 80));
  }
  EXPECT_LT(worst, 1e-3f);
  RecordProperty("max_abs_diff", std::to_string(worst));
}

// Feeding audio in arbitrary pieces gives the frames of one-shot
// processing, each as soon as its samples are in.
TEST(FeaturePipelineTest, IncrementalEqualsOneShot) {
  FbankFixture f = LoadFbankFixture();
  ASSERT_FALSE(f.wave.empty());
  auto cmvn = GlobalCmvn::FromMeanIstd(std::vector<float>(80, 1.0f), std::vector<float>(80, 0.5f));
  ASSERT_TRUE(cmvn.ok());
  auto pipeline = FeaturePipeline::Create({16000}, &*cmvn);
  ASSERT_TRUE(pipeline.ok());
  std::mt19937 rng(5);
  const int64_t n = f.wave.numel();
  for (int64_t i = 0; i < n;) {
    const int64_t len = std::min<int64_t>(n - i, 1 + rng() % 900);
    ASSERT_TRUE((*pipeline)->AcceptWaveform(f.wave.data<float>() + i, len).ok());
    i += len;
    EXPECT_EQ((*pipeline)->NumFramesReady(), Fbank::NumFrames(i));
  }
  ASSERT_TRUE((*pipeline)->InputFinished().ok());
  const int64_t frames = (*pipeline)->NumFramesReady();
  ASSERT_EQ(frames, f.fbank.dim(0));
  std::vector<float> got(frames * 80);
  ASSERT_TRUE((*pipeline)->GetFrames(0, frames, got.data()).ok());
  float worst = 0;
  for (int64_t i = 0; i < frames * 80; ++i) {
    worst = std::max(worst, std::abs(got[i] - (f.fbank.data<float>()[i] - 1.0f) * 0.5f));
  }
  EXPECT_LT(worst, 1e-3f);
  (*pipeline)->DiscardFramesBefore(10);
  EXPECT_EQ((*pipeline)->GetFrames(5, 2, got.data()).code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE((*pipeline)->GetFrames(10, 2, got.data()).ok());
  EXPECT_EQ((*pipeline)->AcceptWaveform(got.data(), 1).code(), absl::StatusCode::kFailedPrecondition);
}

// Discarding a chunk at a time while audio keeps coming (what the engine
// does) never changes a frame still held, whenever the buffer compacts.
TEST(FeaturePipelineTest, DiscardingAsAudioArrivesKeepsTheHeldFrames) {
  FbankFixture f = LoadFbankFixture();
  ASSERT_FALSE(f.wave.empty());
  auto whole = FeaturePipeline::Create({16000}, nullptr);
  auto pipeline = FeaturePipeline::Create({16000}, nullptr);
  ASSERT_TRUE(whole.ok() && pipeline.ok());
  const int64_t n = f.wave.numel();
  ASSERT_TRUE((*whole)->AcceptWaveform(f.wave.data<float>(), n).ok());
  const int64_t total = (*whole)->NumFramesReady();
  std::vector<float> want(total * 80), got(total * 80);
  ASSERT_TRUE((*whole)->GetFrames(0, total, want.data()).ok());
  std::mt19937 rng(9);
  int64_t discarded = 0;
  for (int64_t i = 0; i < n;) {
    const int64_t len = std::min<int64_t>(n - i, 1 + rng() % 2000);
    ASSERT_TRUE((*pipeline)->AcceptWaveform(f.wave.data<float>() + i, len).ok());
    i += len;
    const int64_t ready = (*pipeline)->NumFramesReady();
    // Forget up to a few frames short of what is ready, in uneven steps.
    discarded = std::max<int64_t>(discarded, ready - static_cast<int64_t>(rng() % 12));
    (*pipeline)->DiscardFramesBefore(discarded);
    EXPECT_EQ((*pipeline)->NumFramesReady(), ready);
    if (discarded > 0) {
      EXPECT_EQ((*pipeline)->GetFrames(discarded - 1, 1, got.data()).code(),
                absl::StatusCode::kOutOfRange);
    }
    const int64_t held = ready - std::min(discarded, ready);
    ASSERT_TRUE((*pipeline)->GetFrames(ready - held, held, got.data()).ok());
    for (int64_t k = 0; k < held * 80; ++k) {
      ASSERT_EQ(got[k], want[(ready - held) * 80 + k]) << "frame " << ready - held + k / 80;
    }
  }
  EXPECT_EQ((*pipeline)->NumFramesReady(), total);
}

// Audio at another rate goes through the resampler; its fbank stays close
// to the 16 kHz original's (the resampler's error is small in log-mel).
TEST(FeaturePipelineTest, ResampledInputGivesSameFeatures) {
  FbankFixture f = LoadFbankFixture();
  ASSERT_FALSE(f.wave.empty());
  auto up = Resampler::Create(16000, 44100);
  ASSERT_TRUE(up.ok());
  std::vector<float> wave44;
  ASSERT_TRUE((*up)->Process(f.wave.data<float>(), f.wave.numel(), &wave44).ok());
  ASSERT_TRUE((*up)->Flush(&wave44).ok());
  auto pipeline = FeaturePipeline::Create({44100}, nullptr);
  ASSERT_TRUE(pipeline.ok());
  std::vector<int16_t> pcm(wave44.size());
  for (size_t i = 0; i < pcm.size(); ++i) {
    pcm[i] = static_cast<int16_t>(std::clamp(std::lround(wave44[i] * 32768.0f), -32768L, 32767L));
  }
  ASSERT_TRUE((*pipeline)->AcceptPcm16(pcm.data(), static_cast<int64_t>(pcm.size())).ok());
  ASSERT_TRUE((*pipeline)->InputFinished().ok());
  const int64_t frames = std::min((*pipeline)->NumFramesReady(), f.fbank.dim(0));
  ASSERT_GE(frames, f.fbank.dim(0) - 1);
  std::vector<float> got(frames * 80);
  ASSERT_TRUE((*pipeline)->GetFrames(0, frames, got.data()).ok());
  // Compare bins with real energy (log-mel above 5); near-silent bins are
  // dominated by the int16 rounding of the resampled audio.
  double sum = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < frames * 80; ++i) {
    if (f.fbank.data<float>()[i] > 5.0f) {
      sum += std::abs(got[i] - f.fbank.data<float>()[i]);
      ++count;
    }
  }
  ASSERT_GT(count, frames * 20);
  EXPECT_LT(sum / count, 0.05);
}

}  // namespace
}  // namespace oasr::encoder
