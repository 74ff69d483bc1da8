// oasr-bench-gemm: the encoder's products (the model's shapes, with their
// epilogues) on cuBLASLt and on the project's wgmma kernel, side by side at
// several row counts, in bfloat16 on the GPU; where k <= 256 the wgmma
// kernel is timed both weight-stationary ("wgmma", the library's default)
// and on its 128 x 256 tiles ("tiled"; SetWgmmaWeightStationary). cuBLASLt's
// time for a swish product includes the separate swish pass it needs. Each
// kernel's output is checked against the other's (max |diff| over max |y|),
// inputs rotate among sets larger than the L2 cache, outputs are poisoned
// first. Prints the median time (CUDA events), TFLOP/s and the fewest bytes' GB/s.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/median_time.h"
#include "common/execution_context.h"
#include "common/half.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/tensor.h"
#include "kernels/linear.h"
#include "kernels/norm.h"
#include "kernels/wgmma_gemm.h"

namespace oasr {
namespace {

using kernels::Activation;
using kernels::GemmKernel;

struct Shape {
  const char* name;
  int64_t n, k;
  Activation act;
  bool accumulate;
};

// The 12 x 256 model's products (FFN 1024, CTC 258 in float32 is cuBLASLt's).
constexpr Shape kShapes[] = {
    {"ffn w1 + swish", 1024, 256, Activation::kSwish, false},
    {"ffn w2 +=", 256, 1024, Activation::kNone, true},
    {"qkv", 768, 256, Activation::kNone, false},
    {"attn out +=", 256, 256, Activation::kNone, true},
    {"pointwise conv1", 512, 256, Activation::kNone, false},
    {"stem stage 2 + relu", 256, 2304, Activation::kRelu, false},
};

std::vector<float> RandomValues(std::mt19937_64& rng, int64_t n, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

absl::StatusOr<Tensor> Device16(ExecutionContext& ctx, const std::vector<float>& host) {
  const int64_t n = static_cast<int64_t>(host.size());
  OASR_ASSIGN_OR_RETURN(Tensor staged, Tensor::Empty({n}, DType::kBFloat16));
  ConvertFromFloat(host.data(), n, DType::kBFloat16, staged.data());
  OASR_ASSIGN_OR_RETURN(Tensor dev, Tensor::Empty({n}, DType::kBFloat16, ctx.device()));
  OASR_RETURN_IF_ERROR(CopyTensor(dev.view(), staged.view()));
  return dev;
}

// The copies here run on the legacy stream, the ops on the context's
// non-blocking one: every check waits for the whole device between them.
absl::Status Sync() {
  const cudaError_t e = cudaDeviceSynchronize();
  return e == cudaSuccess ? absl::OkStatus() : absl::InternalError(cudaGetErrorString(e));
}

absl::StatusOr<std::vector<float>> ToHost(const Tensor& t) {
  OASR_RETURN_IF_ERROR(Sync());
  OASR_ASSIGN_OR_RETURN(Tensor h, Tensor::Empty(t.shape(), t.dtype()));
  OASR_RETURN_IF_ERROR(CopyTensor(h.view(), t.view()));
  std::vector<float> out(static_cast<size_t>(t.numel()));
  ConvertToFloat(h.data(), t.numel(), t.dtype(), out.data());
  return out;
}

// max |a - b| over max |a|; infinity where either holds a NaN.
double RelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, mag = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - b[i]);
    diff = std::isnan(d) ? INFINITY : std::max(diff, d);
    mag = std::max(mag, std::fabs(double(a[i])));
  }
  return diff / mag;
}

// Median milliseconds of run(set) over `reps` runs, the input set rotating,
// after three warm-up runs; NaN when a run fails.
template <typename Run>
double TimeRotating(ExecutionContext& ctx, int reps, int sets, const Run& run) {
  for (int i = 0; i < 3; ++i) (void)run(i % sets);
  int set = 0;
  absl::StatusOr<double> t = bench::MedianMs(ctx, reps, [&] {
    set = (set + 1) % sets;
    return run(set);
  });
  return t.ok() ? *t : NAN;
}

int Main(int argc, char** argv) {
  CLI::App app{"oasr-bench-gemm: the encoder's products on cuBLASLt and on the wgmma kernel"};
  std::string rows_list = "1024,8192,32768,131072";
  int reps = 30;
  int sets = 4;
  app.add_option("--rows", rows_list, "Row counts m (B x 16 for a cohort of B)")
      ->capture_default_str();
  app.add_option("--reps", reps, "Timed runs per kernel")->check(CLI::Range(1, 10000));
  app.add_option("--sets", sets, "Input sets rotated through")->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);
  (void)InitLogging("warn");
  std::vector<int64_t> rows;
  for (absl::string_view p : absl::StrSplit(rows_list, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(p, &v) || v < 1) {
      std::fprintf(stderr, "bad --rows entry '%s'\n", std::string(p).c_str());
      return 2;
    }
    rows.push_back(v);
  }
  ExecutionContextOptions o;
  o.device = Device::Cuda(0);
  absl::StatusOr<std::unique_ptr<ExecutionContext>> ctx_or = ExecutionContext::Create(o);
  if (!ctx_or.ok()) {
    std::printf("oasr-bench-gemm: needs a CUDA device (%s)\n",
                std::string(ctx_or.status().message()).c_str());
    return 0;
  }
  ExecutionContext& ctx = **ctx_or;
  std::printf("oasr-bench-gemm: %s, bfloat16, median of %d runs over %d input sets\n",
              ctx.Describe().c_str(), reps, sets);
  std::printf("%-20s %8s %6s %6s | %10s %8s %8s | %10s %8s %8s | %8s %10s | %10s %8s\n", "product",
              "m", "n", "k", "cublas ms", "TFLOP/s", "GB/s", "wgmma ms", "TFLOP/s", "GB/s",
              "speedup", "rel diff", "tiled ms", "speedup");
  // Each variant sets the switch for its runs; it is put back after a row.
  const bool stationary_default = kernels::WgmmaWeightStationary();
  std::mt19937_64 rng(42);
  for (const Shape& s : kShapes) {
    const std::vector<float> w = RandomValues(rng, s.n * s.k, 1.0f / std::sqrt(float(s.k)));
    const std::vector<float> b = RandomValues(rng, s.n, 0.1f);
    kernels::LinearOptions lo;
    lo.dtype = DType::kBFloat16;
    lo.activation = s.act;
    lo.gemm = GemmKernel::kCublas;
    absl::StatusOr<kernels::LinearOp> cublas =
        kernels::LinearOp::Create(w.data(), b.data(), s.n, s.k, lo, ctx);
    lo.gemm = GemmKernel::kWgmma;
    absl::StatusOr<kernels::LinearOp> wgmma =
        kernels::LinearOp::Create(w.data(), b.data(), s.n, s.k, lo, ctx);
    if (!cublas.ok() || !wgmma.ok()) {
      std::fprintf(stderr, "LinearOp: %s\n",
                   (cublas.ok() ? wgmma.status() : cublas.status()).ToString().c_str());
      return 1;
    }
    for (int64_t m : rows) {
      std::vector<Tensor> xs, ys;
      for (int i = 0; i < sets; ++i) {
        absl::StatusOr<Tensor> x = Device16(ctx, RandomValues(rng, m * s.k, 1.0f));
        absl::StatusOr<Tensor> y = Device16(ctx, RandomValues(rng, m * s.n, 1.0f));
        if (!x.ok() || !y.ok()) {
          std::printf("%-20s %8lld: out of device memory\n", s.name, static_cast<long long>(m));
          xs.clear();
          break;
        }
        xs.push_back(std::move(*x));
        ys.push_back(std::move(*y));
      }
      if (xs.empty()) continue;
      auto run = [&](const kernels::LinearOp& op, int set) {
        kernels::LinearArgs a;
        a.x = xs[set].data();
        a.ldx = s.k;
        a.y = ys[set].data();
        a.ldy = s.n;
        a.y_dtype = DType::kBFloat16;
        a.m = m;
        a.accumulate = s.accumulate;
        return op.Run(ctx, a);
      };
      // Check: the same inputs (set 0's y as the accumulate base) through each.
      // Variant 2: the wgmma kernel on its 128 x 256 tiles.
      auto op_of = [&](int v) -> const kernels::LinearOp& { return v == 0 ? *cublas : *wgmma; };
      const std::vector<float> y0 = *ToHost(ys[0]);
      std::vector<float> got[3];
      for (int v = 0; v < 3; ++v) {
        kernels::SetWgmmaWeightStationary(v != 2);
        absl::StatusOr<Tensor> fresh = Device16(ctx, y0);
        if (!s.accumulate) {  // poison: NaN everywhere the op must write
          std::vector<float> nan(y0.size(), std::nanf(""));
          fresh = Device16(ctx, nan);
        }
        (void)CopyTensor(ys[0].view(), fresh->view());
        if (absl::Status st = Sync(); !st.ok()) return 1;
        if (absl::Status st = run(op_of(v), 0); !st.ok()) {
          std::fprintf(stderr, "%s\n", st.ToString().c_str());
          return 1;
        }
        got[v] = *ToHost(ys[0]);
      }
      const double rel_diff = std::max(RelDiff(got[0], got[1]), RelDiff(got[0], got[2]));
      double ms[3];
      for (int v = 0; v < 3; ++v) {
        kernels::SetWgmmaWeightStationary(v != 2);
        ms[v] = TimeRotating(ctx, reps, sets, [&](int set) { return run(op_of(v), set); });
      }
      kernels::SetWgmmaWeightStationary(stationary_default);
      const double flops = 2.0 * m * s.n * s.k;
      const double bytes = 2.0 * (m * s.k + s.n * s.k + m * s.n * (s.accumulate ? 2 : 1));
      std::printf(
          "%-20s %8lld %6lld %6lld | %10.4f %8.1f %8.0f | %10.4f %8.1f %8.0f | %8.2f %10.2e | "
          "%10.4f %8.2f\n",
          s.name, static_cast<long long>(m), static_cast<long long>(s.n),
          static_cast<long long>(s.k), ms[0], flops / ms[0] / 1e9, bytes / ms[0] / 1e6, ms[1],
          flops / ms[1] / 1e9, bytes / ms[1] / 1e6, ms[0] / ms[1], rel_diff, ms[2], ms[0] / ms[2]);
    }
  }
  // The residual products with the next module's layer norm: cuBLASLt then
  // the norm's own pass, against the norm in the wgmma kernel's epilogue.
  std::printf("\n%-20s %8s %6s %6s | %10s | %10s | %8s %10s | %10s %8s\n", "product + norm", "m",
              "n", "k", "cublas+LN", "wgmma", "speedup", "rel diff", "tiled", "speedup");
  for (int64_t k : {int64_t{1024}, int64_t{256}}) {
    const int64_t n = 256;
    const std::vector<float> w = RandomValues(rng, n * k, 1.0f / std::sqrt(float(k)));
    const std::vector<float> b = RandomValues(rng, n, 0.1f);
    std::vector<float> host_norm = RandomValues(rng, 2 * n, 0.2f);
    for (int i = 0; i < n; ++i) host_norm[i] += 1.0f;
    absl::StatusOr<Tensor> norm = Tensor::Empty({2 * n}, DType::kFloat32, ctx.device());
    if (!norm.ok() || !CopyTensor(norm->view(), TensorView(host_norm.data(), DType::kFloat32,
                                                           {2 * n}, Device::Cpu()))
                           .ok()) {
      return 1;
    }
    const float* scale = norm->data<float>();
    const float* shift = scale + n;
    kernels::LinearOptions lo;
    lo.dtype = DType::kBFloat16;
    lo.gemm = GemmKernel::kCublas;
    absl::StatusOr<kernels::LinearOp> cublas =
        kernels::LinearOp::Create(w.data(), b.data(), n, k, lo, ctx);
    lo.gemm = GemmKernel::kFused;
    absl::StatusOr<kernels::LinearOp> fused =
        kernels::LinearOp::Create(w.data(), b.data(), n, k, lo, ctx);
    if (!cublas.ok() || !fused.ok() || !fused->FusesNorms()) {
      std::printf("%-20s: the wgmma kernel cannot fuse norms here\n", "product + norm");
      break;
    }
    for (int64_t m : rows) {
      std::vector<Tensor> xs, ys, hs;
      for (int i = 0; i < sets; ++i) {
        absl::StatusOr<Tensor> x = Device16(ctx, RandomValues(rng, m * k, 1.0f));
        absl::StatusOr<Tensor> y = Tensor::Empty({m * n}, DType::kFloat32, ctx.device());
        absl::StatusOr<Tensor> h = Tensor::Empty({m * n}, DType::kBFloat16, ctx.device());
        if (!x.ok() || !y.ok() || !h.ok()) {
          std::printf("%-20s %8lld: out of device memory\n", "product + norm",
                      static_cast<long long>(m));
          xs.clear();
          break;
        }
        std::vector<float> y0 = RandomValues(rng, m * n, 2.0f);
        (void)CopyTensor(y->view(), TensorView(y0.data(), DType::kFloat32, {m * n}, Device::Cpu()));
        xs.push_back(std::move(*x));
        ys.push_back(std::move(*y));
        hs.push_back(std::move(*h));
      }
      if (xs.empty()) continue;
      auto run = [&](bool use_fused, int set) -> absl::Status {
        kernels::LinearArgs a;
        a.x = xs[set].data();
        a.ldx = k;
        a.y = ys[set].data();
        a.ldy = n;
        a.y_dtype = DType::kFloat32;
        a.m = m;
        a.accumulate = true;
        if (use_fused) {
          a.out_norm_scale = scale;
          a.out_norm_shift = shift;
          a.norm_out = hs[set].data();
          a.ld_norm_out = n;
          return fused->Run(ctx, a);
        }
        OASR_RETURN_IF_ERROR(cublas->Run(ctx, a));
        kernels::LayerNormParams p;
        p.x = ys[set].data();
        p.x_dtype = DType::kFloat32;
        p.ldx = n;
        p.scale = scale;
        p.shift = shift;
        p.out = hs[set].data();
        p.out_dtype = DType::kBFloat16;
        p.ldo = n;
        p.rows = m;
        p.d = n;
        return kernels::LayerNorm(ctx, p);
      };
      // Check: the norm's output from the same start (the y of set 0 saved).
      absl::StatusOr<std::vector<float>> y_start = ToHost(ys[0]);
      std::vector<float> got[3];
      for (int v = 0; v < 3; ++v) {
        kernels::SetWgmmaWeightStationary(v != 2);
        (void)CopyTensor(ys[0].view(),
                         TensorView(y_start->data(), DType::kFloat32, {m * n}, Device::Cpu()));
        std::vector<float> nan(static_cast<size_t>(m * n), std::nanf(""));
        absl::StatusOr<Tensor> poison = Device16(ctx, nan);
        (void)CopyTensor(hs[0].view(), poison->view());
        if (absl::Status st = Sync(); !st.ok()) return 1;
        if (absl::Status st = run(v >= 1, 0); !st.ok()) {
          std::fprintf(stderr, "%s\n", st.ToString().c_str());
          return 1;
        }
        got[v] = *ToHost(hs[0]);
      }
      const double rel_diff = std::max(RelDiff(got[0], got[1]), RelDiff(got[0], got[2]));
      double ms[3];
      for (int v = 0; v < 3; ++v) {
        kernels::SetWgmmaWeightStationary(v != 2);
        ms[v] = TimeRotating(ctx, reps, sets, [&](int set) { return run(v >= 1, set); });
      }
      kernels::SetWgmmaWeightStationary(stationary_default);
      std::printf("%-20s %8lld %6lld %6lld | %10.4f | %10.4f | %8.2f %10.2e | %10.4f %8.2f\n",
                  k == 1024 ? "ffn w2 += , LN" : "attn out += , LN", static_cast<long long>(m),
                  static_cast<long long>(n), static_cast<long long>(k), ms[0], ms[1], ms[0] / ms[1],
                  rel_diff, ms[2], ms[0] / ms[2]);
    }
  }
  return 0;
}

}  // namespace
}  // namespace oasr

int main(int argc, char** argv) { return oasr::Main(argc, argv); }
