// kernels::LogMel (the GPU front end's filterbank) against the CPU front end
// it must equal: encoder::Fbank frame by frame plus global CMVN, within
// 1e-3 on every log-mel value, for speech-like rows, a silent row, a nearly
// silent one, and rows whose trailing frames must be zero; and
// kernels::GatherPcm, which collects the windows from the streams' rings
// (page-locked host memory the device reads). On the test device: the CPU,
// or CUDA in the _gpu_ build.
#include "kernels/log_mel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/tensor.h"
#include "encoder/fbank.h"

#ifndef OASR_TEST_CUDA
#define OASR_TEST_CUDA 0
#endif

namespace oasr::encoder {
namespace {

Device TestDevice() { return OASR_TEST_CUDA ? Device::Cuda(0) : Device::Cpu(); }

// A host vector on `device` (the tensor keeps it).
Tensor OnDevice(const void* data, int64_t n, DType dtype, Device device) {
  Tensor t = *Tensor::Empty({n}, dtype, device);
  EXPECT_TRUE(
      CopyTensor(t.view(), TensorView(const_cast<void*>(data), dtype, {n}, Device::Cpu())).ok());
  return t;
}

// A float32 tensor's values on the host.
std::vector<float> ToHost(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.view().numel()));
  EXPECT_TRUE(CopyTensor(TensorView(out.data(), DType::kFloat32, {static_cast<int64_t>(out.size())},
                                    Device::Cpu()),
                         t.view())
                  .ok());
  return out;
}

TEST(LogMelTest, EqualsTheCpuFrontEndWithinOneThousandth) {
  const Device device = TestDevice();
  if (device.is_cuda() && CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  constexpr int kRows = 7, kFrames = 67, kBins = Fbank::kNumBins;
  const int64_t stride = int64_t{kFrames - 1} * Fbank::kFrameShift + Fbank::kFrameLength;
  std::mt19937 rng(9);
  std::normal_distribution<float> noise(0.0f, 300.0f);
  std::uniform_real_distribution<double> freq(100, 4000), amp(500, 9000);
  std::vector<float> pcm(kRows * stride);
  for (int r = 0; r < kRows; ++r) {
    const double f1 = freq(rng), f2 = freq(rng), a = amp(rng);
    for (int64_t i = 0; i < stride; ++i) {
      const double t = static_cast<double>(i) / Fbank::kSampleRate;
      float v =
          static_cast<float>(a * (0.5 + 0.5 * std::sin(2 * M_PI * 2.1 * t)) *
                             (std::sin(2 * M_PI * f1 * t) + 0.4 * std::sin(2 * M_PI * f2 * t))) +
          noise(rng);
      if (r == 3) v = 0.0f;                                                  // digital silence
      if (r == 4) v = static_cast<float>(static_cast<int>(noise(rng)) % 3);  // nearly silent
      pcm[r * stride + i] = std::round(std::clamp(v, -32768.0f, 32767.0f));
    }
  }
  const std::vector<int32_t> frames = {67, 67, 40, 67, 67, 1, 0};
  std::vector<float> mean(kBins), istd(kBins);
  for (int m = 0; m < kBins; ++m) {
    mean[m] = 8.0f + 0.05f * m;
    istd[m] = 0.2f + 0.01f * (m % 7);
  }
  std::vector<float> window, mel;
  Fbank::DenseTables(&window, &mel);

  ExecutionContextOptions o;
  o.device = device;
  o.cpu_threads = 3;  // The CPU implementation splits its rows over the pool.
  auto ctx = ExecutionContext::Create(o);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  Tensor d_pcm = OnDevice(pcm.data(), pcm.size(), DType::kFloat32, device);
  Tensor d_frames = OnDevice(frames.data(), kRows, DType::kInt32, device);
  Tensor d_window = OnDevice(window.data(), window.size(), DType::kFloat32, device);
  Tensor d_mel = OnDevice(mel.data(), mel.size(), DType::kFloat32, device);
  Tensor d_mean = OnDevice(mean.data(), kBins, DType::kFloat32, device);
  Tensor d_istd = OnDevice(istd.data(), kBins, DType::kFloat32, device);
  std::vector<float> poison(int64_t{kRows} * kFrames * kBins, std::nanf(""));
  Tensor d_out = OnDevice(poison.data(), poison.size(), DType::kFloat32, device);
  kernels::LogMelParams p;
  p.pcm = d_pcm.data<float>();
  p.pcm_stride = stride;
  p.frames = d_frames.data<int32_t>();
  p.rows = kRows;
  p.max_frames = kFrames;
  p.bins = kBins;
  p.window = d_window.data<float>();
  p.mel = d_mel.data<float>();
  p.mean = d_mean.data<float>();
  p.istd = d_istd.data<float>();
  p.out = d_out.data<float>();
  ASSERT_TRUE(kernels::LogMel(**ctx, p).ok());
  ASSERT_TRUE((*ctx)->Synchronize().ok());
  const std::vector<float> got = ToHost(d_out);
  // With the mel rows' spans given, as the engine passes them: the same values.
  const std::vector<int32_t> spans = kernels::MelSpans(mel.data(), kBins);
  Tensor d_spans =
      OnDevice(spans.data(), static_cast<int64_t>(spans.size()), DType::kInt32, device);
  Tensor d_out_spans = OnDevice(poison.data(), poison.size(), DType::kFloat32, device);
  p.mel_spans = d_spans.data<int32_t>();
  p.out = d_out_spans.data<float>();
  ASSERT_TRUE(kernels::LogMel(**ctx, p).ok());
  ASSERT_TRUE((*ctx)->Synchronize().ok());
  EXPECT_EQ(ToHost(d_out_spans), got);

  Fbank fbank;
  std::vector<float> want(kBins);
  double worst = 0.0;
  for (int r = 0; r < kRows; ++r) {
    for (int t = 0; t < kFrames; ++t) {
      const float* g = got.data() + (int64_t{r} * kFrames + t) * kBins;
      if (t >= frames[r]) {
        for (int m = 0; m < kBins; ++m) ASSERT_EQ(g[m], 0.0f) << "row " << r << " frame " << t;
        continue;
      }
      fbank.ComputeFrame(pcm.data() + r * stride + int64_t{t} * Fbank::kFrameShift, want.data());
      for (int m = 0; m < kBins; ++m) {
        const double w = (want[m] - mean[m]) * istd[m];
        ASSERT_TRUE(std::isfinite(g[m])) << "row " << r << " frame " << t << " bin " << m;
        worst = std::max(worst, std::fabs(g[m] - w));
        ASSERT_NEAR(g[m], w, 1e-3) << "row " << r << " frame " << t << " bin " << m;
      }
    }
  }
  std::printf("[ log_mel ] %s: max |diff| %.3g over %d rows\n", device.ToString().c_str(), worst,
              kRows);
}

// Each mel row's span holds every nonzero weight and starts and ends on one;
// a row of zeros is empty.
TEST(LogMelTest, MelSpansBoundEachRowsNonzeroWeights) {
  constexpr int kBins = Fbank::kNumBins, kFft = kernels::kLogMelFftBins;
  std::vector<float> window, mel;
  Fbank::DenseTables(&window, &mel);
  std::fill(mel.begin() + 5 * kFft, mel.begin() + 6 * kFft, 0.0f);  // Row 5: no weights.
  const std::vector<int32_t> spans = kernels::MelSpans(mel.data(), kBins);
  ASSERT_EQ(spans.size(), 2u * kBins);
  for (int m = 0; m < kBins; ++m) {
    const int first = spans[2 * m], last = spans[2 * m + 1];
    if (m == 5) {
      EXPECT_EQ(first, kFft);
      EXPECT_EQ(last, kFft);
      continue;
    }
    ASSERT_LT(first, last) << m;
    EXPECT_NE(mel[m * kFft + first], 0.0f) << m;
    EXPECT_NE(mel[m * kFft + last - 1], 0.0f) << m;
    for (int k = 0; k < kFft; ++k) {
      if (k < first || k >= last) EXPECT_EQ(mel[m * kFft + k], 0.0f) << m << " " << k;
    }
  }
}

TEST(LogMelTest, RefusesAShortStrideAndMissingTables) {
  ExecutionContextOptions o;
  auto ctx = ExecutionContext::Create(o);
  ASSERT_TRUE(ctx.ok());
  std::vector<float> pcm(1000), out(80), window(kernels::kLogMelWindowFloats), mel(80 * 257);
  const int32_t frames = 1;
  kernels::LogMelParams p;
  p.pcm = pcm.data();
  p.pcm_stride = 399;
  p.frames = &frames;
  p.rows = 1;
  p.max_frames = 1;
  p.window = window.data();
  p.mel = mel.data();
  p.out = out.data();
  EXPECT_EQ(kernels::LogMel(**ctx, p).code(), absl::StatusCode::kInvalidArgument);
  p.pcm_stride = 400;
  EXPECT_TRUE(kernels::LogMel(**ctx, p).ok());
  p.mel = nullptr;
  EXPECT_EQ(kernels::LogMel(**ctx, p).code(), absl::StatusCode::kInvalidArgument);
}

// Rows from three lanes, windows that wrap at the ring's end and one that
// does not, a padding row (feat_frames 0) that must stay untouched, and the
// output's stride past the window untouched too.
TEST(GatherPcmTest, CopiesEachWindowFromItsLaneWrappingAtTheEnd) {
  const Device device = TestDevice();
  if (device.is_cuda() && CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  constexpr int kLanes = 3, kRingRows = 10, kWidth = 8, kWindowRows = 6, kRows = 5;
  constexpr int64_t kStride = kWindowRows * kWidth + 4;
  const int64_t ring_samples = int64_t{kLanes} * kRingRows * kWidth;
  // The ring is host memory (page-locked: the device reads it directly), 16
  // bits a sample, negative ones and the extremes among them.
  Tensor ring = *(device.is_cuda() ? Tensor::EmptyPinned({ring_samples}, DType::kInt16)
                                   : Tensor::Empty({ring_samples}, DType::kInt16));
  for (int64_t i = 0; i < ring_samples; ++i) {
    ring.data<int16_t>()[i] = static_cast<int16_t>((i * 271) % 65536 - 32768);
  }
  ring.data<int16_t>()[5] = -32768;
  ring.data<int16_t>()[6] = 32767;
  const std::vector<int32_t> slots = {2, 0, 2, 1, 1}, starts = {0, 7, 4, 9, 3};
  const std::vector<int32_t> feat_frames = {3, 1, 67, 0, 2};
  ExecutionContextOptions o;
  o.device = device;
  auto ctx = ExecutionContext::Create(o);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  Tensor d_slots = OnDevice(slots.data(), kRows, DType::kInt32, device);
  Tensor d_starts = OnDevice(starts.data(), kRows, DType::kInt32, device);
  Tensor d_frames = OnDevice(feat_frames.data(), kRows, DType::kInt32, device);
  std::vector<float> poison(kRows * kStride, std::nanf(""));
  Tensor d_out = OnDevice(poison.data(), poison.size(), DType::kFloat32, device);
  kernels::GatherPcmParams p;
  p.ring = ring.data<int16_t>();
  p.ring_rows = kRingRows;
  p.width = kWidth;
  p.slots = d_slots.data<int32_t>();
  p.starts = d_starts.data<int32_t>();
  p.feat_frames = d_frames.data<int32_t>();
  p.rows = kRows;
  p.window_rows = kWindowRows;
  p.out = d_out.data<float>();
  p.out_stride = kStride;
  ASSERT_TRUE(kernels::GatherPcm(**ctx, p).ok());
  ASSERT_TRUE((*ctx)->Synchronize().ok());
  const std::vector<float> got = ToHost(d_out);
  for (int r = 0; r < kRows; ++r) {
    for (int64_t i = 0; i < kStride; ++i) {
      const float g = got[r * kStride + i];
      if (feat_frames[r] == 0 || i >= kWindowRows * kWidth) {
        EXPECT_TRUE(std::isnan(g)) << "row " << r << " sample " << i << " written";
        continue;
      }
      const int64_t ring_row = (starts[r] + i / kWidth) % kRingRows;
      const float want = static_cast<float>(
          ring.data<int16_t>()[(int64_t{slots[r]} * kRingRows + ring_row) * kWidth + i % kWidth]);
      ASSERT_EQ(g, want) << "row " << r << " sample " << i;
    }
  }
  p.window_rows = kRingRows + 1;  // A window longer than the ring.
  EXPECT_EQ(kernels::GatherPcm(**ctx, p).code(), absl::StatusCode::kInvalidArgument);
  p.window_rows = kWindowRows;
  p.width = 4;  // Not whole 16-byte vectors of 8 samples.
  EXPECT_EQ(kernels::GatherPcm(**ctx, p).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace oasr::encoder
