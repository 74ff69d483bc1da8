// oasr-bench-encoder: the CPU encoder at 16-frame chunks (640 ms on a 4x
// model): single-stream real-time factor, cohort throughput (how many streams
// one core set keeps in real time), and the PyTorch reference on the same
// model in the same run. The model is --model-dir's; by default the
// published streaming geometry (12 blocks x 256 x 2048 FFN, 4 heads, kernel
// 15, V = 5002) as a random model written afresh by bench/encoder_torch.py
// (Debian's /usr/bin/python3 with torch). The banner is the loaded model's.
// First, the front end's parts on one thread: power spectrum, fbank frame,
// 640 ms of audio through FeaturePipeline at 16 and 8 kHz. --help lists the
// flags.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "cache/attention_cache_manager.h"
#include "cache/block_pool.h"
#include "cache/slot_state_cache.h"
#include "common/execution_context.h"
#include "encoder/conformer_encoder.h"
#include "encoder/fbank.h"
#include "encoder/feature_pipeline.h"
#include "kernels/real_fft.h"

namespace oasr::encoder {
namespace {

constexpr double kSeconds = 20.0;  // Audio per measured stream.
constexpr int kChunk = 16;         // Encoder frames: 640 ms at 4x.
// The front end's frame shift (10 ms).
constexpr double kFeatureShiftMs = 1000.0 * Fbank::kFrameShift / Fbank::kSampleRate;

// `streams` streams over the same features in lockstep cohorts through the
// serving path: ForwardCohort over a real paged pool (one block per chunk,
// eviction with `left` chunks, none when negative) and slot-addressed conv
// state, as the engine runs it. Returns wall seconds.
double RunCohorts(ConformerEncoder& encoder, const Tensor& feats, int streams, int left) {
  const ModelConfig& c = encoder.config();
  cache::CacheConfig config;
  config.num_layers = c.num_blocks;
  config.n_kv_head = c.attention_heads;
  config.head_dim = c.head_dim();
  config.hidden_dim = c.output_size;
  config.kernel_size = c.cnn_module_kernel;
  config.chunk_size = config.block_size_frames = kChunk;
  config.num_left_chunks = left;
  config.max_batch_size = streams;
  config.max_blocks_per_seq = static_cast<int>(feats.dim(0) / (kChunk * c.subsampling_rate()) + 2);
  config.max_num_blocks = int64_t{streams} * config.max_blocks_per_seq;
  config.dtype = DType::kFloat32;
  auto pool = cache::BlockPool::Create(config);
  auto attention = cache::AttentionCacheManager::Create(pool->get());
  cache::StreamStateSpec spec{"cnn", encoder.ConvStateShape(), 1, false, DType::kFloat32};
  auto states = cache::SlotStateCache::Create({spec}, streams, Device::Cpu());
  if (!pool.ok() || !attention.ok() || !states.ok()) std::exit(1);
  const int64_t window = c.WindowFrames(kChunk), stride = int64_t{kChunk} * c.subsampling_rate();
  std::vector<int32_t> slots(streams), frames(streams), offsets(streams, 0);
  for (int i = 0; i < streams; ++i) {
    slots[i] = i;
    if (!(*attention)->AllocateSlot(i, nullptr).ok()) std::exit(1);
  }
  std::vector<float> staged(static_cast<size_t>(streams * window * c.input_dim));
  std::vector<float> log_probs(static_cast<size_t>(streams) * kChunk * c.output_dim);
  if (encoder.context().workspace().capacity() < encoder.WorkspaceBytes(streams, kChunk)) {
    if (!encoder.context().ReserveWorkspace(encoder.WorkspaceBytes(streams, kChunk), 0).ok()) {
      std::exit(1);
    }
  }
  const cache::BlockTableMirror& m = (*attention)->mirror();
  const auto start = std::chrono::steady_clock::now();
  for (int64_t next = 0; next < feats.dim(0) - c.right_context(); next += stride) {
    const int64_t n = std::min<int64_t>(window, feats.dim(0) - next);
    for (int i = 0; i < streams; ++i) {
      std::fill(staged.begin() + i * window * c.input_dim,
                staged.begin() + (i + 1) * window * c.input_dim, 0.0f);
      std::copy(feats.data<float>() + next * c.input_dim,
                feats.data<float>() + (next + n) * c.input_dim,
                staged.begin() + i * window * c.input_dim);
      frames[i] = static_cast<int32_t>(encoder.OutputFrames(n));
    }
    if (!(*attention)->PrepareChunksBatched(slots).ok()) std::exit(1);
    CohortInputs in;
    in.batch = streams;
    in.chunk = kChunk;
    in.feats = staged.data();
    in.slots = in.host_slots = slots.data();
    in.frames = in.host_frames = frames.data();
    in.offsets = in.host_offsets = offsets.data();
    PagedKv kv;
    kv.k = (*pool)->k_pool().data();
    kv.v = (*pool)->v_pool().data();
    kv.num_blocks = (*pool)->num_physical_blocks();
    kv.block_size = kChunk;
    kv.block_table = kv.host_block_table = static_cast<const int32_t*>(m.block_table().data());
    kv.cache_lens = kv.host_cache_lens = static_cast<const int32_t*>(m.cache_seqlens().data());
    kv.table_stride = m.width();
    const absl::Status status = encoder.ForwardCohort(
        in, kv, ConvStates{(*states)->buffer(0).data(), streams}, log_probs.data());
    if (!status.ok()) {
      std::fprintf(stderr, "ForwardCohort: %s\n", std::string(status.message()).c_str());
      std::exit(1);
    }
    for (int i = 0; i < streams; ++i) {
      if (!(*attention)->CommitChunkPaged(i, frames[i]).ok()) std::exit(1);
      offsets[i] += frames[i];
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
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
             .count() /
         reps;
}

// The front end's parts, one thread: the 512-point power spectrum, one fbank
// frame, and 640 ms of audio through FeaturePipeline (resampling, fbank).
void FrontEndFigures() {
  std::mt19937 rng(1);
  std::normal_distribution<double> dist(0.0, 3000.0);
  std::vector<double> frame(Fbank::kFftSize), power(Fbank::kFftSize / 2 + 1);
  for (double& v : frame) v = dist(rng);
  std::vector<double> scratch;
  const kernels::RealFft fft(Fbank::kFftSize);
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

int Main(int argc, char** argv) {
  CLI::App app{
      "oasr-bench-encoder: CPU encoder real-time factor and cohort throughput, next to the "
      "PyTorch reference on the same model"};
  std::string model_dir;
  app.add_option("--model-dir", model_dir,
                 "Model directory (default: a random 12 x 256 x 2048, V = 5002 model written "
                 "afresh by bench/encoder_torch.py)")
      ->check(CLI::ExistingDirectory);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  FrontEndFigures();
  const std::string source = OASR_SOURCE_DIR;
  const std::string python = "cd " + source + " && /usr/bin/python3 -B bench/encoder_torch.py";
  struct RemoveDir {
    std::filesystem::path path;
    ~RemoveDir() {
      if (!path.empty()) std::filesystem::remove_all(path);
    }
  } cleanup;
  std::filesystem::path dir = model_dir;
  if (model_dir.empty()) {
    // A fresh model each run, so that it always matches the current format.
    dir = std::filesystem::temp_directory_path() /
          ("oasr_bench_encoder_model_" + std::to_string(getpid()));
    RunCommand(python + " write-model " + dir.string());
    if (!std::filesystem::exists(dir / "model.safetensors")) {
      std::printf(
          "oasr-bench-encoder: cannot write the model (needs /usr/bin/python3 with torch); "
          "skipped\n");
      return 0;
    }
    cleanup.path = dir;
  }
  auto model = ConformerModel::Load(dir.string());
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  const ModelConfig& c = (*model)->config();
  const int64_t frames = static_cast<int64_t>(kSeconds * 1000 / kFeatureShiftMs) - 2;
  auto feats = Tensor::Empty({frames, c.input_dim}, DType::kFloat32);
  std::mt19937 rng(0);
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < feats->numel(); ++i) feats->data<float>()[i] = dist(rng);

  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::printf(
      "oasr-bench-encoder: %d x %d x %d FFN, %d heads, kernel %d, V = %d; %d ms chunks; "
      "%.0f s streams; %u cores\n",
      c.num_blocks, c.output_size, c.linear_units, c.attention_heads, c.cnn_module_kernel,
      c.output_dim, static_cast<int>(kChunk * c.subsampling_rate() * kFeatureShiftMs), kSeconds,
      cores);
  std::printf("%-44s %10s %12s\n", "case", "RTF", "streams@RT");
  for (int threads : {1, 2}) {
    ExecutionContextOptions ctx_options;
    ctx_options.cpu_threads = threads;
    auto ctx = ExecutionContext::Create(ctx_options);
    if (!ctx.ok()) return 1;
    auto encoder = ConformerEncoder::Create(model->get(), ctx->get(), EncoderOptions{});
    if (!encoder.ok()) return 1;
    RunCohorts(**encoder, *feats, 1, -1);  // Warm-up (position table, pages).
    for (int left : {-1, 4}) {
      const double wall = RunCohorts(**encoder, *feats, 1, left);
      std::printf("%-44s %10.4f %12.1f\n",
                  ("oasr cpu, 1 stream, threads " + std::to_string(threads) + ", left " +
                   std::to_string(left))
                      .c_str(),
                  wall / kSeconds, kSeconds / wall);
    }
    for (int streams : {4, 8}) {
      const double wall = RunCohorts(**encoder, *feats, streams, 4);
      std::printf("%-44s %10.4f %12.1f\n",
                  ("oasr cpu, cohort of " + std::to_string(streams) + ", threads " +
                   std::to_string(threads) + ", left 4")
                      .c_str(),
                  wall / (kSeconds * streams), kSeconds * streams / wall);
    }
  }
  for (int threads : {1, 2}) {
    const std::string out =
        RunCommand(python + " time " + dir.string() + " " + std::to_string(kSeconds) + " " +
                   std::to_string(kChunk) + " " + std::to_string(threads));
    double rtf = 0;
    if (std::sscanf(out.c_str(), "rtf %lf", &rtf) == 1) {
      std::printf(
          "%-44s %10.4f %12.1f\n",
          ("pytorch reference, 1 stream, threads " + std::to_string(threads) + ", left -1").c_str(),
          rtf, 1.0 / rtf);
    } else {
      std::printf("pytorch reference, threads %d: unavailable\n", threads);
    }
  }
  return 0;
}

}  // namespace
}  // namespace oasr::encoder

int main(int argc, char** argv) { return oasr::encoder::Main(argc, argv); }
