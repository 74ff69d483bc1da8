// oasr-bench-encoder: the CPU encoder on the published streaming geometry
// (12 blocks x 256 x 2048 FFN, 4 heads, kernel 15, V = 5002) at 640 ms
// chunks: single-stream real-time factor, cohort throughput (how many
// streams one core set keeps in real time), and the PyTorch reference on the
// same model in the same run. The random model is written by
// bench/encoder_torch.py (Debian's /usr/bin/python3 with torch). First, the
// front end's parts on one thread: power spectrum, fbank frame, 640 ms of
// audio through FeaturePipeline at 16 and 8 kHz.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "encoder/conformer_encoder.h"
#include "encoder/fbank.h"
#include "encoder/feature_pipeline.h"
#include "encoder/real_fft.h"

namespace oasr::encoder {
namespace {

constexpr double kSeconds = 20.0;  // Audio per measured stream.
constexpr int kChunk = 16;         // 640 ms.

struct StreamState {
  int64_t next_feat = 0;
  int64_t offset = 0;
  Tensor att_cache;
  Tensor cnn_cache;
};

StreamState NewState(const ModelConfig& c) {
  return StreamState{0, 0, *Tensor::Zeros({c.num_blocks, c.attention_heads, 0, 2 * c.head_dim()}, DType::kFloat32),
                     *Tensor::Zeros({c.num_blocks, c.cnn_module_kernel - 1, c.output_size}, DType::kFloat32)};
}

// Runs `streams` streams over the same features in lockstep cohorts;
// returns wall seconds.
double RunCohorts(const ConformerEncoder& encoder, const Tensor& feats, int streams, int required) {
  const ModelConfig& c = encoder.config();
  std::vector<StreamState> states;
  for (int i = 0; i < streams; ++i) states.push_back(NewState(c));
  const auto start = std::chrono::steady_clock::now();
  while (states[0].next_feat < feats.dim(0) - c.right_context()) {
    std::vector<DenseChunkInput> inputs;
    for (StreamState& s : states) {
      const int64_t end = std::min<int64_t>(s.next_feat + c.WindowFrames(kChunk), feats.dim(0));
      inputs.push_back(DenseChunkInput{feats.view().Slice(s.next_feat, end - s.next_feat), s.offset,
                                       s.att_cache.view(), s.cnn_cache.view()});
    }
    auto outs = encoder.ForwardChunks(inputs, required);
    if (!outs.ok()) {
      std::fprintf(stderr, "ForwardChunks: %s\n", std::string(outs.status().message()).c_str());
      std::exit(1);
    }
    for (int i = 0; i < streams; ++i) {
      states[i].next_feat += c.subsampling_rate() * kChunk;
      states[i].offset += (*outs)[i].log_probs.dim(0);
      states[i].att_cache = std::move((*outs)[i].att_cache);
      states[i].cnn_cache = std::move((*outs)[i].cnn_cache);
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string RunCommand(const std::string& cmd) {
  std::string out;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[256];
  while (fgets(buf, sizeof(buf), pipe) != nullptr) out += buf;
  if (pclose(pipe) != 0) return "";
  return out;
}

// Keeps a computed value alive so the timed loop is not optimised away.
inline void KeepAlive(double v) { asm volatile("" : : "r,m"(v) : "memory"); }

// Microseconds per call of fn, over `reps` calls.
template <typename Fn>
double MicrosPerCall(int reps, Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) fn(r);
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / reps;
}

// The front end's parts, one thread: the 512-point power spectrum, one fbank
// frame, and 640 ms of audio through FeaturePipeline (resampling, fbank).
void FrontEndFigures() {
  std::mt19937 rng(1);
  std::normal_distribution<double> dist(0.0, 3000.0);
  std::vector<double> frame(Fbank::kFftSize), power(Fbank::kFftSize / 2 + 1);
  for (double& v : frame) v = dist(rng);
  std::vector<double> scratch;
  const RealFft fft(Fbank::kFftSize);
  const double fft_us = MicrosPerCall(20000, [&](int r) {
    frame[r % frame.size()] += 1e-6;
    fft.PowerSpectrum(frame.data(), power.data(), &scratch);
    KeepAlive(power[3]);
  });
  std::vector<float> samples(Fbank::kFrameLength), out(Fbank::kNumBins);
  for (float& v : samples) v = static_cast<float>(dist(rng));
  Fbank fbank;
  const double frame_us = MicrosPerCall(20000, [&](int r) {
    samples[r % samples.size()] += 1e-3f;
    fbank.ComputeFrame(samples.data(), out.data());
    KeepAlive(out[5]);
  });
  std::printf("front end: %.2f us per %d-point power spectrum, %.2f us per fbank frame", fft_us,
              Fbank::kFftSize, frame_us);
  for (int rate : {16000, 8000}) {
    std::vector<int16_t> pcm(static_cast<size_t>(rate * 64 / 100));  // 640 ms
    for (int16_t& v : pcm) v = static_cast<int16_t>(std::clamp(dist(rng), -32768.0, 32767.0));
    auto pipeline = FeaturePipeline::Create({rate}, nullptr);
    if (!pipeline.ok()) return;
    const double chunk_us = MicrosPerCall(200, [&](int) {
      (void)(*pipeline)->AcceptPcm16(pcm.data(), static_cast<int64_t>(pcm.size()));
      (*pipeline)->DiscardFramesBefore((*pipeline)->NumFramesReady());
    });
    std::printf(", %.0f us per 640 ms at %d Hz", chunk_us, rate);
  }
  std::printf("\n");
}

int Main() {
  FrontEndFigures();
  const std::string source = OASR_SOURCE_DIR;
  const std::string python = "cd " + source + " && /usr/bin/python3 -B bench/encoder_torch.py";
  // A fresh model each run, so that it always matches the current format.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("oasr_bench_encoder_model_" + std::to_string(getpid()));
  RunCommand(python + " write-model " + dir.string());
  if (!std::filesystem::exists(dir / "model.safetensors")) {
    std::printf("oasr-bench-encoder: cannot write the model (needs /usr/bin/python3 with torch); skipped\n");
    return 0;
  }
  struct RemoveDir {
    std::filesystem::path path;
    ~RemoveDir() { std::filesystem::remove_all(path); }
  } cleanup{dir};
  auto model = ConformerModel::Load(dir.string());
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  const ModelConfig& c = (*model)->config();
  const int64_t frames = static_cast<int64_t>(kSeconds * 100) - 2;
  auto feats = Tensor::Empty({frames, 80}, DType::kFloat32);
  std::mt19937 rng(0);
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < feats->numel(); ++i) feats->data<float>()[i] = dist(rng);

  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::printf("oasr-bench-encoder: %d x %d x %d FFN, %d heads, kernel %d, V = %d; %d ms chunks; "
              "%.0f s streams; %u cores\n",
              c.num_blocks, c.output_size, c.linear_units, c.attention_heads, c.cnn_module_kernel,
              c.output_dim, kChunk * 40, kSeconds, cores);
  std::printf("%-44s %10s %12s\n", "case", "RTF", "streams@RT");
  for (int threads : {1, 2}) {
    auto encoder = ConformerEncoder::Create(model->get(), EncoderOptions{threads, 16384});
    if (!encoder.ok()) return 1;
    RunCohorts(**encoder, *feats, 1, -1);  // Warm-up (position table, pages).
    for (int left : {-1, 4}) {
      const double wall = RunCohorts(**encoder, *feats, 1, left < 0 ? -1 : kChunk * left);
      std::printf("%-44s %10.4f %12.1f\n",
                  ("oasr cpu, 1 stream, threads " + std::to_string(threads) + ", left " + std::to_string(left)).c_str(),
                  wall / kSeconds, kSeconds / wall);
    }
    for (int streams : {4, 8}) {
      const double wall = RunCohorts(**encoder, *feats, streams, kChunk * 4);
      std::printf("%-44s %10.4f %12.1f\n",
                  ("oasr cpu, cohort of " + std::to_string(streams) + ", threads " + std::to_string(threads) + ", left 4").c_str(),
                  wall / (kSeconds * streams), kSeconds * streams / wall);
    }
  }
  for (int threads : {1, 2}) {
    const std::string out = RunCommand(python + " time " + dir.string() + " " + std::to_string(kSeconds) +
                                       " " + std::to_string(kChunk) + " " + std::to_string(threads));
    double rtf = 0;
    if (std::sscanf(out.c_str(), "rtf %lf", &rtf) == 1) {
      std::printf("%-44s %10.4f %12.1f\n", ("pytorch reference, 1 stream, threads " + std::to_string(threads) + ", left -1").c_str(),
                  rtf, 1.0 / rtf);
    } else {
      std::printf("pytorch reference, threads %d: unavailable\n", threads);
    }
  }
  return 0;
}

}  // namespace
}  // namespace oasr::encoder

int main() { return oasr::encoder::Main(); }
