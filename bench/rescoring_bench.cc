// oasr-bench-rescoring: what attention rescoring a final costs, on the CPU
// or CUDA: AttentionRescorer::Score of an n-best (both directions of a
// bitransformer decoder) over a segment of random encoder output, for
// segments of several lengths, with hypotheses of a token per 4 frames
// (160 ms at 4x subsampling). The model directory needs an attention
// decoder (bench/make_rescoring_model.py writes one of WeNet's recipe size).
//
// With --batch B (default 1, and 8 on CUDA too) B segments of a length are
// scored in one ScoreSegments call, packed as the engine packs a cohort's
// finals (max_rows 8192 as the engine sets on CUDA).
//
//   oasr-bench-rescoring [--model-dir DIR] [--device cuda] [--seconds 2,5,10,30] [--batch 1,8]
//
// Without --model-dir it writes that model once into the temporary
// directory (python3 with torch; skipped, saying why, without them).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <span>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/median_time.h"
#include "common/device.h"
#include "common/tensor.h"
#include "encoder/attention_rescorer.h"
#include "encoder/conformer_model.h"

int main(int argc, char** argv) {
  using namespace oasr;
  CLI::App app{"Attention rescoring: milliseconds a final on the CPU or CUDA"};
  std::string model_dir, device_name = "cpu";
  std::vector<double> seconds = {2, 5, 10, 30};
  int hyps = 10, reps = 20, threads = 1;
  std::vector<int> batches;
  std::string dtype_name = "float32";
  app.add_option("--model-dir", model_dir,
                 "Model directory with decoder.json (default: bench/make_rescoring_model.py's, "
                 "written once into the temporary directory)");
  app.add_option("--device", device_name, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--seconds", seconds, "Segment lengths")->delimiter(',');
  app.add_option("--hyps", hyps, "Hypotheses of the n-best")->capture_default_str();
  app.add_option("--reps", reps, "Timed runs a length (the median is printed)")
      ->capture_default_str();
  app.add_option("--threads", threads, "CPU threads")->capture_default_str();
  app.add_option("--dtype", dtype_name,
                 "The linears' dtype: float32, or bfloat16 / float16 on CUDA")
      ->check(CLI::IsMember({"float32", "bfloat16", "float16"}))
      ->capture_default_str();
  app.add_option("--batch", batches, "Segments a call (default 1, and 1,8 on CUDA)")
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);

  if (model_dir.empty()) {
    model_dir = (std::filesystem::temp_directory_path() / "oasr-bench-rescoring-model").string();
    if (!std::filesystem::exists(model_dir + "/decoder.json")) {
      const std::string command = std::string("cd '") + OASR_SOURCE_DIR + "' && " + OASR_PYTHON +
                                  " -B -m bench.make_rescoring_model '" + model_dir + "'";
      std::printf("oasr-bench-rescoring: writing the model: %s\n", command.c_str());
      std::fflush(stdout);
      if (std::system(command.c_str()) != 0) {
        std::printf("oasr-bench-rescoring: skipped (no model: python3 with torch is needed)\n");
        return 0;
      }
    }
  }
  auto device = ParseDevice(device_name);
  if (!device.ok()) return std::fprintf(stderr, "%s\n", device.status().ToString().c_str()), 2;
  auto model = encoder::ConformerModel::Load(model_dir);
  if (!model.ok()) return std::fprintf(stderr, "%s\n", model.status().ToString().c_str()), 1;
  ExecutionContextOptions options;
  options.device = *device;
  options.cpu_threads = threads;
  auto ctx = ExecutionContext::Create(options);
  if (!ctx.ok()) return std::fprintf(stderr, "%s\n", ctx.status().ToString().c_str()), 1;
  const auto& cfg = (*model)->config();
  const auto* dec = (*model)->attention_decoder();
  if (dec == nullptr)
    return std::fprintf(stderr, "%s has no attention decoder\n", model_dir.c_str()), 1;
  const double frame_ms = 10.0 * cfg.subsampling_rate();
  const double longest = *std::max_element(seconds.begin(), seconds.end());
  encoder::RescorerOptions ropts;
  ropts.max_frames = static_cast<int64_t>(longest * 1000.0 / frame_ms) + 1;
  if (batches.empty()) batches = device->is_cuda() ? std::vector<int>{1, 8} : std::vector<int>{1};
  const int widest = *std::max_element(batches.begin(), batches.end());
  ropts.max_batch_frames = widest * ropts.max_frames;
  if (device->is_cuda()) ropts.max_rows = std::max<int64_t>(8192, ropts.max_frames + 1);
  ropts.dtype = dtype_name == "bfloat16"  ? DType::kBFloat16
                : dtype_name == "float16" ? DType::kFloat16
                                          : DType::kFloat32;
  auto rescorer = encoder::AttentionRescorer::Create(model->get(), ctx->get(), ropts);
  if (!rescorer.ok()) return std::fprintf(stderr, "%s\n", rescorer.status().ToString().c_str()), 1;
  std::printf(
      "oasr-bench-rescoring: %s, d %lld, V %lld, decoder %d + %d blocks (heads %d, units %d), "
      "%d hypotheses, %s, %s\n",
      model_dir.c_str(), static_cast<long long>(cfg.output_size),
      static_cast<long long>(cfg.output_dim), dec->config.num_blocks, dec->config.r_num_blocks,
      dec->config.attention_heads, dec->config.linear_units, hyps, DTypeName(ropts.dtype),
      (*ctx)->Describe().c_str());
  std::printf("%8s %7s %7s %6s %12s %12s\n", "seconds", "frames", "tokens", "batch", "ms/call",
              "finals/s");
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> unit(1, static_cast<int32_t>(cfg.output_dim) - 2);
  for (double s : seconds) {
    const int64_t frames = static_cast<int64_t>(s * 1000.0 / frame_ms);
    const int64_t tokens = std::max<int64_t>(1, frames / 4);
    for (int batch : batches) {
      const int64_t total = frames * batch;
      std::vector<float> host(static_cast<size_t>(total * cfg.output_size));
      for (float& x : host) x = normal(rng);
      auto memory = Tensor::Empty({total, cfg.output_size}, DType::kFloat32, *device);
      if (!memory.ok()) return 1;
      if (!CopyTensor(memory->view(), TensorView(host.data(), DType::kFloat32,
                                                 {total, cfg.output_size}, Device::Cpu()))
               .ok()) {
        return 1;
      }
      std::vector<std::vector<int32_t>> nbest(static_cast<size_t>(hyps));
      for (auto& h : nbest) {
        h.resize(static_cast<size_t>(tokens));
        for (int32_t& u : h) u = unit(rng);
      }
      const std::vector<std::span<const int32_t>> spans(nbest.begin(), nbest.end());
      const size_t n = nbest.size(), right_n = dec->config.bidirectional ? n : 0;
      std::vector<double> scores(static_cast<size_t>(batch) * (n + right_n));
      std::vector<encoder::RescoreSegment> segments(static_cast<size_t>(batch));
      for (int b = 0; b < batch; ++b) {
        double* at = scores.data() + static_cast<size_t>(b) * (n + right_n);
        segments[b] = {b * frames, frames, spans, {at, n}, {at + n, right_n}};
      }
      auto run = [&] { return (*rescorer)->ScoreSegments(memory->data<float>(), total, segments); };
      for (int w = 0; w < 2; ++w) {
        if (absl::Status st = run(); !st.ok()) {
          return std::fprintf(stderr, "%s\n", st.ToString().c_str()), 1;
        }
      }
      auto ms = bench::MedianMs(**ctx, reps, run);
      if (!ms.ok()) return std::fprintf(stderr, "%s\n", ms.status().ToString().c_str()), 1;
      std::printf("%8.1f %7lld %7lld %6d %12.3f %12.1f\n", s, static_cast<long long>(frames),
                  static_cast<long long>(tokens), batch, *ms, batch * 1000.0 / *ms);
    }
  }
  return 0;
}
