// oasr-bench-step: the cost of one batched chunk step of the streaming
// encoder (subsampling, every layer, CTC head and log_softmax) for B streams,
// on the serving path: the engine's paged K/V pool, block tables and
// slot-addressed conv state, the model's ForwardCohort. Each stream holds
// `--history` frames of attention history (4 left chunks of 16 by default)
// and adds one chunk, at its own offset. Prints the median step time over
// --reps steps (CUDA events on the GPU, the wall clock on the CPU), the
// streams that step keeps in real time (B x chunk seconds / step), encoder
// frames per second, and the matrix rate it reaches from the FLOP count of
// the model's geometry.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/median_time.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "cache/attention_cache_manager.h"
#include "cache/block_pool.h"
#include "cache/slot_state_cache.h"
#include "common/cuda_graph.h"
#include "common/logging.h"
#include "common/status.h"
#include "scheduler/cohort_staging.h"
#include "scheduler/conformer_streaming_model.h"
#include "scheduler/model_factory.h"

#if OASR_WITH_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace oasr::scheduler {
namespace {

// Multiply-adds x 2 of one encoder frame for a chunk of `chunk` frames with
// `history` frames of attention history (the subsampling's share is its
// patch rows per output frame).
double FlopsPerFrame(const encoder::ModelConfig& c, int chunk, int history) {
  const double d = c.output_size, units = c.linear_units;
  double flops = 0;
  int64_t h = c.WindowFrames(chunk), w = c.input_dim, ch = 1;
  // Subsampling: the conv stages (kernel, stride) of the model's input_layer.
  const std::vector<std::pair<int, int>> stages =
      c.input_layer == encoder::SubsamplingType::kConv2d6
          ? std::vector<std::pair<int, int>>{{3, 2}, {5, 3}}
      : c.input_layer == encoder::SubsamplingType::kConv2d8
          ? std::vector<std::pair<int, int>>{{3, 2}, {3, 2}, {3, 2}}
          : std::vector<std::pair<int, int>>{{3, 2}, {3, 2}};
  for (auto [k, s] : stages) {
    h = (h - k) / s + 1;
    w = (w - k) / s + 1;
    flops += 2.0 * h * w * d * k * k * ch / chunk;
    ch = static_cast<int64_t>(d);
  }
  flops += 2.0 * w * d * d;  // embed projection
  const double keys = history + chunk;
  const double layer = 2 * (2.0 * d * units * 2)        // two FFNs
                       + 2.0 * d * 3 * d + 2.0 * d * d  // q/k/v, out
                       + 2.0 * d * 2 * d + 2.0 * d * d  // pointwise convs
                       + 2.0 * d * c.cnn_module_kernel  // depthwise
                       + 3 * 2.0 * keys * d;            // scores (content, position), P V
  flops += c.num_blocks * layer + 2.0 * d * c.output_dim;
  return flops;
}

struct Row {
  int batch = 0;
  double ms = 0;
};

absl::StatusOr<Row> TimeStep(ConformerStreamingModel& model, int batch, int history, int reps,
                             bool graphed) {
  const ModelGeometry& g = model.geometry();
  ExecutionContext& ctx = model.context();
  cache::CacheConfig c = model.BaseCacheConfig();
  c.chunk_size = c.block_size_frames = g.chunk_size;
  c.num_left_chunks = history / g.chunk_size;
  c.max_batch_size = batch;
  c.max_blocks_per_seq = 16;
  c.max_num_blocks = int64_t{batch} * c.blocks_per_stream();
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<cache::BlockPool> pool, cache::BlockPool::Create(c));
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<cache::AttentionCacheManager> attention,
                        cache::AttentionCacheManager::Create(pool.get()));
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<cache::SlotStateCache> states,
                        cache::SlotStateCache::Create(model.StreamStates(), batch, ctx.device()));
  OASR_ASSIGN_OR_RETURN(
      std::unique_ptr<CohortStaging> staging,
      CohortStaging::Create(batch, g.WindowFrames(g.chunk_size), g.feature_dim, ctx.device()));
  OASR_ASSIGN_OR_RETURN(Tensor log_probs, Tensor::Empty({batch, g.chunk_size, g.vocab_size},
                                                        DType::kFloat32, ctx.device()));
  const size_t need = model.WorkspaceBytes(batch);
  if (ctx.workspace().capacity() < need) OASR_RETURN_IF_ERROR(ctx.ReserveWorkspace(need, 0));
  std::vector<int32_t> slots(batch);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  for (int b = 0; b < batch; ++b) {
    slots[b] = b;
    OASR_RETURN_IF_ERROR(attention->AllocateSlot(b, ctx.stream()));
    staging->slots()[b] = b;
    staging->frames()[b] = g.chunk_size;
    float* f = staging->feats(b);
    for (int64_t i = 0; i < g.WindowFrames(g.chunk_size) * g.feature_dim; ++i) f[i] = dist(rng);
  }
  std::vector<TensorView> state_views;
  for (int i = 0; i < states->num_specs(); ++i) state_views.push_back(states->buffer(i));
  const CohortPlan plan = MakeCohortPlan(*staging, batch, g.chunk_size, *pool,
                                         attention->mirror(), state_views);
  // A step: the plan's host work and its one staged copy, then the forward,
  // launched op by op or replayed as a CUDA graph captured from it.
  CudaGraph graph;
  auto step = [&](bool commit) -> absl::Status {
    OASR_RETURN_IF_ERROR(attention->PrepareChunksBatched(slots));
    attention->UpdateDeviceMirror(ctx.stream());
    OASR_RETURN_IF_ERROR(staging->Upload(batch, ctx.stream()));
    if (graph.empty()) {
      OASR_RETURN_IF_ERROR(model.ForwardCohort(plan, log_probs.view()));
    } else {
      OASR_RETURN_IF_ERROR(graph.Launch(ctx.stream()));
    }
    if (!commit) return absl::OkStatus();
    OASR_RETURN_IF_ERROR(ctx.Synchronize());
    for (int b = 0; b < batch; ++b) {
      OASR_RETURN_IF_ERROR(attention->CommitChunkPaged(b, g.chunk_size));
      staging->offsets()[b] += g.chunk_size;
    }
    return absl::OkStatus();
  };
  // Offsets differ per stream (the peers use one); then the history fills up
  // chunk by chunk, as a live stream's does.
  for (int b = 0; b < batch; ++b) staging->offsets()[b] = 1000 + 16 * (b % 64);
  for (int k = 0; k <= history / g.chunk_size; ++k) OASR_RETURN_IF_ERROR(step(true));
  for (int k = 0; k < 2; ++k) OASR_RETURN_IF_ERROR(step(false));
  if (graphed) {
    OASR_ASSIGN_OR_RETURN(graph, CudaGraph::Capture(ctx.stream(), [&] {
                            return model.ForwardCohort(plan, log_probs.view());
                          }));
    for (int k = 0; k < 2; ++k) OASR_RETURN_IF_ERROR(step(false));
  }
  OASR_RETURN_IF_ERROR(ctx.Synchronize());
#if OASR_WITH_CUDA
  // The timed steps, for profilers (ncu --nvtx --nvtx-include "timed/").
  nvtxRangePushA("timed");
#endif
  absl::StatusOr<double> ms = bench::MedianMs(ctx, reps, [&] { return step(false); });
#if OASR_WITH_CUDA
  nvtxRangePop();
#endif
  if (!ms.ok()) return ms.status();
  return Row{batch, *ms};
}

int Main(int argc, char** argv) {
  CLI::App app{"oasr-bench-step: one batched chunk step of the streaming encoder for B streams"};
  std::string model_dir = OASR_BUNDLED_MODEL, device = "auto", dtype, batches, modes,
              stem = "implicit-gemm", ffn = "unfused";
  int history = 64, reps = 20, threads = 1;
  double peak = 790.0;
  app.add_option("--model-dir", model_dir, "Model directory")->capture_default_str();
  app.add_option("--device", device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--dtype", dtype, "float32, bfloat16 or float16 (default: the device's)");
  app.add_option("--stem", stem,
                 "CUDA: how the subsampling stem computes, recompute, tensor-cores or "
                 "implicit-gemm")
      ->capture_default_str();
  app.add_option("--ffn", ffn,
                 "CUDA: the feed-forward modules fused (one kernel each) or unfused (separate "
                 "ops)")
      ->check(CLI::IsMember({"fused", "unfused"}))
      ->capture_default_str();
  std::string gemm = "auto";
  app.add_option("--gemm", gemm, kGemmFlagHelp)->capture_default_str();
  std::string kv_dtype = "auto";
  app.add_option("--kv-dtype", kv_dtype, kKvDTypeFlagHelp)->capture_default_str();
  std::string wgmma_k256 = "default";
  app.add_option("--wgmma-k256", wgmma_k256, kWgmmaK256FlagHelp)->capture_default_str();
  app.add_option(
      "--batches", batches,
      "Comma-separated batch sizes (default: 1,64,512,2048,8192 on CUDA, 1,8,32 on the CPU)");
  app.add_option("--modes", modes,
                 "Comma-separated: eager (every op launched), graph (the forward replayed as a "
                 "CUDA graph); default both on CUDA, eager on the CPU");
  app.add_option("--history", history, "Frames of attention history per stream")
      ->capture_default_str();
  app.add_option("--reps", reps, "Timed steps per batch size")->check(CLI::Range(1, 10000));
  app.add_option("--threads", threads, "CPU threads")->check(CLI::Range(1, 256));
  app.add_option("--peak-tflops", peak, "The matrix rate to report the fraction of")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  (void)InitLogging("warn");
  ModelOptions options;
  options.model_dir = model_dir;
  options.cpu_threads = threads;
  if (absl::Status s = SetComputeFlags(device, dtype, &options, stem, gemm, kv_dtype); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  options.fused_feed_forward = ffn == "fused";
  if (absl::Status s = SetWgmmaK256Flag(wgmma_k256); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  if (batches.empty()) batches = options.device.is_cuda() ? "1,64,512,2048,8192" : "1,8,32";
  if (modes.empty()) modes = options.device.is_cuda() ? "eager,graph" : "eager";
  absl::StatusOr<LoadedModel> loaded = LoadModel(options);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
    return 2;
  }
  auto& model = dynamic_cast<ConformerStreamingModel&>(*loaded->model);
  const encoder::ModelConfig& c = model.model().config();
  const ModelGeometry& g = loaded->geometry;
  const double flops = FlopsPerFrame(c, g.chunk_size, history);
  const double chunk_s = g.chunk_size * g.FrameShiftMs() / 1000.0;
  std::printf(
      "oasr-bench-step: %d x %d, FFN %d, %d heads, kernel %d, V %d; chunk %d (%.2f s), history %d; "
      "%s %s, stem %s, feed-forward %s, products %s%s; %.1f MFLOP per frame\n",
      c.num_blocks, c.output_size, c.linear_units, c.attention_heads, c.cnn_module_kernel,
      c.output_dim, g.chunk_size, chunk_s, history, model.context().Describe().c_str(),
      DTypeName(loaded->dtype), stem.c_str(), ffn.c_str(), gemm.c_str(),
      wgmma_k256 == "default" ? "" : (" (k <= 256 " + wgmma_k256 + ")").c_str(), flops / 1e6);
  std::printf("%8s %6s %12s %16s %14s %10s %8s\n", "B", "mode", "step ms", "real-time streams",
              "frames/s", "TFLOP/s", "% peak");
  for (absl::string_view part : absl::StrSplit(batches, ',')) {
    int batch = 0;
    if (!absl::SimpleAtoi(part, &batch) || batch < 1) continue;
    for (absl::string_view mode : absl::StrSplit(modes, ',')) {
      if (mode != "eager" && mode != "graph") {
        std::fprintf(stderr, "--modes: %s is neither eager nor graph\n", std::string(mode).c_str());
        return 2;
      }
      absl::StatusOr<Row> row = TimeStep(model, batch, history, reps, mode == "graph");
      if (!row.ok()) {
        std::printf("%8d %6s  %s\n", batch, std::string(mode).c_str(),
                    std::string(row.status().message()).c_str());
        continue;
      }
      const double frames_per_s = batch * g.chunk_size / (row->ms / 1000.0);
      const double tflops = frames_per_s * flops / 1e12;
      std::printf("%8d %6s %12.3f %16.0f %14.0f %10.1f %8.1f\n", batch, std::string(mode).c_str(),
                  row->ms, batch * chunk_s / (row->ms / 1000.0), frames_per_s, tflops,
                  100.0 * tflops / peak);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace oasr::scheduler

int main(int argc, char** argv) { return oasr::scheduler::Main(argc, argv); }
