// oasr-bench-logmel: the filterbank of the GPU front end (kernels::LogMel:
// framing, window, 512-point power spectrum, 80 mel bins, log, CMVN) for B
// chunk windows of 67 frames, median of --reps runs; prints feature frames
// per second, the figure the front end must reach (100 per stream-second:
// 10 M/s for 100,000 streams). Then the host's part of that front end, what
// a front-end worker does per stream chunk: encoder::PcmSource taking a
// 640 ms piece of audio at 16 kHz (no resampling) and at 8 and 44.1 kHz.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/median_time.h"
#include "common/logging.h"
#include "common/tensor.h"
#include "encoder/fbank.h"
#include "encoder/pcm_source.h"
#include "kernels/log_mel.h"
#include "scheduler/model_factory.h"

namespace oasr {
namespace {

Tensor Upload(const std::vector<float>& host, Device device) {
  Tensor t = *Tensor::Empty({static_cast<int64_t>(host.size())}, DType::kFloat32, device);
  (void)CopyTensor(t.view(), TensorView(const_cast<float*>(host.data()), DType::kFloat32,
                                        {static_cast<int64_t>(host.size())}, Device::Cpu()));
  return t;
}

// Microseconds per 640 ms piece for a PcmSource at `rate`, pieces pushed
// until `seconds` of audio went through (the rows discarded as the engine
// does after each chunk).
double PcmSourceMicros(int rate, double seconds) {
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 3000.0f);
  const int64_t piece = static_cast<int64_t>(0.64 * rate);
  std::vector<int16_t> audio(piece);
  for (int16_t& x : audio) x = static_cast<int16_t>(std::clamp(dist(rng), -32768.0f, 32767.0f));
  auto source = encoder::PcmSource::Create({rate});
  if (!source.ok()) return -1;
  const int pieces = static_cast<int>(seconds / 0.64);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < pieces; ++i) {
    (void)(*source)->AcceptPcm16(audio.data(), piece);
    (*source)->DiscardRowsBefore((*source)->NumRowsReady());
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
             .count() /
         pieces;
}

int Main(int argc, char** argv) {
  CLI::App app{"oasr-bench-logmel: the GPU front end's filterbank for B chunk windows"};
  std::string device = "auto", batches;
  int reps = 20;
  app.add_option("--device", device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--batches", batches, "Windows (default: 1024,8192,32768 on CUDA, 8 on the CPU)");
  app.add_option("--reps", reps, "Timed runs")->check(CLI::Range(1, 10000));
  CLI11_PARSE(app, argc, argv);
  (void)InitLogging("warn");
  absl::StatusOr<Device> dev = scheduler::ResolveDevice(device);
  if (!dev.ok()) {
    std::fprintf(stderr, "%s\n", dev.status().ToString().c_str());
    return 2;
  }
  ExecutionContextOptions options;
  options.device = *dev;
  auto ctx = ExecutionContext::Create(options);
  if (!ctx.ok()) {
    std::fprintf(stderr, "%s\n", ctx.status().ToString().c_str());
    return 2;
  }
  if (batches.empty()) batches = dev->is_cuda() ? "1024,8192,32768" : "8";
  constexpr int kFrames = 67, kBins = 80;
  const int64_t stride = int64_t{kFrames - 1} * 160 + 400;
  std::vector<float> window, mel, mean(kBins, 8.0f), istd(kBins, 0.25f);
  encoder::Fbank::DenseTables(&window, &mel);
  const Tensor d_window = Upload(window, *dev), d_mel = Upload(mel, *dev);
  const Tensor d_mean = Upload(mean, *dev), d_istd = Upload(istd, *dev);
  const std::vector<int32_t> spans = kernels::MelSpans(mel.data(), kBins);
  Tensor d_spans = *Tensor::Empty({2 * kBins}, DType::kInt32, *dev);
  (void)CopyTensor(d_spans.view(), TensorView(const_cast<int32_t*>(spans.data()), DType::kInt32,
                                              {2 * kBins}, Device::Cpu()));
  // "ms": with the mel rows' spans given (as the engine runs it); "ms, scan":
  // each block finds them in the dense table (LogMelParams::mel_spans null).
  std::printf("oasr-bench-logmel: %s, windows of %d frames, %d bins\n%8s %12s %12s %16s\n",
              (*ctx)->Describe().c_str(), kFrames, kBins, "B", "ms", "ms, scan", "frames/s");
  std::mt19937 rng(1);
  std::normal_distribution<float> pcm_dist(0.0f, 3000.0f);
  for (absl::string_view part : absl::StrSplit(batches, ',')) {
    int rows = 0;
    if (!absl::SimpleAtoi(part, &rows) || rows < 1) continue;
    std::vector<float> pcm(rows * stride);
    for (float& x : pcm) x = std::round(pcm_dist(rng));
    const Tensor d_pcm = Upload(pcm, *dev);
    std::vector<int32_t> frames(rows, kFrames);
    Tensor d_frames = *Tensor::Empty({rows}, DType::kInt32, *dev);
    (void)CopyTensor(d_frames.view(),
                     TensorView(frames.data(), DType::kInt32, {rows}, Device::Cpu()));
    Tensor out = *Tensor::Empty({int64_t{rows} * kFrames * kBins}, DType::kFloat32, *dev);
    kernels::LogMelParams p;
    p.pcm = d_pcm.data<float>();
    p.pcm_stride = stride;
    p.frames = d_frames.data<int32_t>();
    p.rows = rows;
    p.max_frames = kFrames;
    p.bins = kBins;
    p.window = d_window.data<float>();
    p.mel = d_mel.data<float>();
    p.mean = d_mean.data<float>();
    p.istd = d_istd.data<float>();
    p.out = out.data<float>();
    (void)kernels::LogMel(**ctx, p);
    absl::StatusOr<double> scan =
        bench::MedianMs(**ctx, reps, [&] { return kernels::LogMel(**ctx, p); });
    p.mel_spans = d_spans.data<int32_t>();
    (void)kernels::LogMel(**ctx, p);
    absl::StatusOr<double> ms =
        bench::MedianMs(**ctx, reps, [&] { return kernels::LogMel(**ctx, p); });
    if (!ms.ok() || !scan.ok()) {
      std::printf("%8d  %s\n", rows, std::string((ms.ok() ? scan : ms).status().message()).c_str());
      continue;
    }
    std::printf("%8d %12.3f %12.3f %16.0f\n", rows, *ms, *scan, rows * kFrames / (*ms / 1000.0));
    std::fflush(stdout);
  }
  std::printf("host part per stream chunk (PcmSource, one 640 ms piece, one thread):\n");
  for (int rate : {16000, 8000, 44100}) {
    std::printf("%8d Hz %10.2f us\n", rate, PcmSourceMicros(rate, 600.0));
  }
  return 0;
}

}  // namespace
}  // namespace oasr

int main(int argc, char** argv) { return oasr::Main(argc, argv); }
