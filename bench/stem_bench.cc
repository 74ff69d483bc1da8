// oasr-bench-stem: the conv2d subsampling stem alone (two 3 x 3 stride-2
// stages with bias and ReLU, 1 -> C -> C channels, over a chunk's window of
// fbank frames) for B images, the way the encoder runs it: "fused", stage 1
// recomputed for every element of stage 2's patch gather, then cuBLASLt (the
// CUDA default); "fused-tc", stage 1 on the tensor cores once per block of
// the gather (kernels::StemKernel::kTensorCores), then cuBLASLt; "implicit",
// stage 1 on the tensor cores written once, stage 2 an implicit GEMM on the
// wgmma kernel (kernels::StemKernel::kImplicitGemm; on the tensor cores'
// path where that kernel is unavailable); "unfused",
// each stage an im2col into the arena and a cuBLASLt GEMM. Prints the median
// time of --reps runs (CUDA events; the wall clock on the CPU, unfused only)
// and the rate from the stages' FLOP count, for the side-by-side with cuDNN
// in bench/gpu/stem_torch.py.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/median_time.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/execution_context.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/tensor.h"
#include "kernels/conv2d.h"
#include "scheduler/model_factory.h"

namespace oasr {
namespace {

struct Geometry {
  int64_t h = 67, w = 80;  // A 16-frame chunk's window: (16 - 1) x 4 + 7 frames, 80 bins.
  int channels = 256;
};

std::vector<float> Random(size_t n, float scale, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Variant {
  const char* name;
  bool fused;
  kernels::StemKernel kernel;
};
constexpr Variant kVariants[] = {{"fused", true, kernels::StemKernel::kRecompute},
                                 {"fused-tc", true, kernels::StemKernel::kTensorCores},
                                 {"implicit", true, kernels::StemKernel::kImplicitGemm},
                                 {"unfused", false, kernels::StemKernel::kRecompute}};

absl::StatusOr<double> TimeStem(ExecutionContext& ctx, const Geometry& geo, int64_t batch,
                                const Variant& variant, DType dtype, int reps) {
  const bool fused = variant.fused;
  std::mt19937 rng(3);
  const int c = geo.channels;
  const std::vector<float> w1 = Random(size_t{static_cast<size_t>(c)} * 9, 0.3f, rng);
  const std::vector<float> b1 = Random(c, 0.1f, rng);
  const std::vector<float> w2 = Random(size_t{static_cast<size_t>(c)} * 9 * c, 0.02f, rng);
  const std::vector<float> b2 = Random(c, 0.1f, rng);
  kernels::Conv2dOptions o1{1, c, 3, 2, dtype}, o2{c, c, 3, 2, dtype};
  OASR_ASSIGN_OR_RETURN(kernels::Conv2dOp stage1,
                        kernels::Conv2dOp::Create(w1.data(), b1.data(), o1, ctx));
  OASR_ASSIGN_OR_RETURN(kernels::Conv2dOp stage2,
                        kernels::Conv2dOp::Create(w2.data(), b2.data(), o2, ctx));
  if (fused) {
    OASR_RETURN_IF_ERROR(stage2.FuseFirstStage(w1.data(), b1.data(), o1, ctx, variant.kernel));
  }
  const int64_t h1 = stage1.OutSize(geo.h), w1s = stage1.OutSize(geo.w);
  const int64_t h2 = stage2.OutSize(h1), w2s = stage2.OutSize(w1s);

  const std::vector<float> host_in = Random(static_cast<size_t>(batch * geo.h * geo.w), 1.0f, rng);
  OASR_ASSIGN_OR_RETURN(Tensor in, Tensor::Empty({batch, geo.h, geo.w}, DType::kFloat32,
                                                 ctx.device()));
  OASR_RETURN_IF_ERROR(CopyTensor(
      in.view(), TensorView(const_cast<float*>(host_in.data()), DType::kFloat32,
                            {batch, geo.h, geo.w}, Device::Cpu())));
  Tensor mid;  // Stage 1's activation, unfused only.
  if (!fused) {
    OASR_ASSIGN_OR_RETURN(mid, Tensor::Empty({batch, h1, w1s, c}, dtype, ctx.device()));
  }
  OASR_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty({batch, h2, w2s, c}, dtype, ctx.device()));
  const size_t need = std::max(fused ? 0 : stage1.WorkspaceBytes(ctx, batch, geo.h, geo.w),
                               stage2.WorkspaceBytes(ctx, batch, fused ? geo.h : h1,
                                                     fused ? geo.w : w1s));
  if (ctx.workspace().capacity() < need) {
    OASR_RETURN_IF_ERROR(ctx.ReserveWorkspace(need, ctx.host_workspace().capacity()));
  }
  auto run = [&]() -> absl::Status {
    kernels::Conv2dArgs a;
    a.in = in.data();
    a.in_dtype = DType::kFloat32;
    a.n = batch;
    a.h = geo.h;
    a.w = geo.w;
    if (!fused) {
      a.out = mid.data();
      OASR_RETURN_IF_ERROR(stage1.Run(ctx, a));
      a.in = mid.data();
      a.in_dtype = dtype;
      a.h = h1;
      a.w = w1s;
    }
    a.out = out.data();
    return stage2.Run(ctx, a);
  };
  for (int i = 0; i < 3; ++i) OASR_RETURN_IF_ERROR(run());
  OASR_RETURN_IF_ERROR(ctx.Synchronize());
  return bench::MedianMs(ctx, reps, run);
}

int Main(int argc, char** argv) {
  CLI::App app{"oasr-bench-stem: the conv2d subsampling stem for B chunk windows"};
  std::string device = "auto", dtype_name, batches;
  int reps = 20, threads = 1;
  Geometry geo;
  app.add_option("--device", device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--dtype", dtype_name, "float32, bfloat16 or float16 (default: bfloat16 on CUDA)");
  app.add_option("--batches", batches,
                 "Comma-separated images (default: 64,512,2048,8192 on CUDA, 1,8 on the CPU)");
  app.add_option("--channels", geo.channels, "Channels of both stages")->capture_default_str();
  app.add_option("--reps", reps, "Timed runs per size")->check(CLI::Range(1, 10000));
  app.add_option("--threads", threads, "CPU threads")->check(CLI::Range(1, 256));
  CLI11_PARSE(app, argc, argv);
  (void)InitLogging("warn");
  absl::StatusOr<Device> dev = scheduler::ResolveDevice(device);
  if (!dev.ok()) {
    std::fprintf(stderr, "%s\n", dev.status().ToString().c_str());
    return 2;
  }
  ExecutionContextOptions options;
  options.device = *dev;
  options.cpu_threads = threads;
  absl::StatusOr<std::unique_ptr<ExecutionContext>> ctx = ExecutionContext::Create(options);
  if (!ctx.ok()) {
    std::fprintf(stderr, "%s\n", ctx.status().ToString().c_str());
    return 2;
  }
  const bool cuda = (*ctx)->is_cuda();
  DType dtype = cuda ? DType::kBFloat16 : DType::kFloat32;
  if (!dtype_name.empty()) {
    absl::StatusOr<DType> parsed = scheduler::ParseComputeDType(dtype_name);
    if (!parsed.ok()) {
      std::fprintf(stderr, "%s\n", parsed.status().ToString().c_str());
      return 2;
    }
    dtype = *parsed;
  }
  if (batches.empty()) batches = cuda ? "64,512,2048,8192" : "1,8";
  const int64_t h1 = kernels::Conv2dOp::OutSize(geo.h, 3, 2), w1 = kernels::Conv2dOp::OutSize(geo.w, 3, 2);
  const int64_t h2 = kernels::Conv2dOp::OutSize(h1, 3, 2), w2 = kernels::Conv2dOp::OutSize(w1, 3, 2);
  const double flops_per_image = 2.0 * h1 * w1 * geo.channels * 9 +
                                 2.0 * h2 * w2 * geo.channels * 9.0 * geo.channels;
  std::printf("oasr-bench-stem: [%ld x %ld] -> [%ld x %ld x %d] -> [%ld x %ld x %d]; %s %s; "
              "%.1f MFLOP per image\n",
              static_cast<long>(geo.h), static_cast<long>(geo.w), static_cast<long>(h1),
              static_cast<long>(w1), geo.channels, static_cast<long>(h2), static_cast<long>(w2),
              geo.channels, (*ctx)->Describe().c_str(), DTypeName(dtype), flops_per_image / 1e6);
  std::printf("%8s %9s %12s %10s\n", "B", "stem", "ms", "TFLOP/s");
  for (absl::string_view part : absl::StrSplit(batches, ',')) {
    int64_t batch = 0;
    if (!absl::SimpleAtoi(part, &batch) || batch < 1) continue;
    for (const Variant& variant : kVariants) {
      if (variant.fused && !cuda) continue;  // The fused gather is a CUDA kernel.
      absl::StatusOr<double> ms = TimeStem(**ctx, geo, batch, variant, dtype, reps);
      const char* name = variant.name;
      if (!ms.ok()) {
        std::printf("%8ld %9s  %s\n", static_cast<long>(batch), name,
                    std::string(ms.status().message()).c_str());
        continue;
      }
      std::printf("%8ld %9s %12.3f %10.1f\n", static_cast<long>(batch), name, *ms,
                  batch * flops_per_image / (*ms * 1e9));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace oasr

int main(int argc, char** argv) { return oasr::Main(argc, argv); }
