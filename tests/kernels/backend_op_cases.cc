// The op table of the backend harness: each case's inputs, its launch on a
// backend, and its float64 reference written from the op's maths.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/half.h"
#include "common/status.h"
#include "common/tensor.h"
#include "kernels/activation.h"
#include "kernels/causal_conv.h"
#include "kernels/conv2d.h"
#include "kernels/feed_forward.h"
#include "kernels/linear.h"
#include "kernels/norm.h"
#include "kernels/rel_pos_attention.h"
#include "kernels/residual_add.h"
#include "kernels/softmax.h"
#include "tests/kernels/backend_ops.h"
#include "tests/kernels/backend_ops_internal.h"

namespace oasr::kernels::testing {
namespace {

// out[0, d) = the layer norm of row[0, d) (eps 1e-5) with scale[i] and
// shift[i] from `at` on; out may be row.
void NormRowRef(const double* row, int64_t d, const std::vector<float>& scale,
                const std::vector<float>& shift, int64_t at, double* out) {
  double mean = 0, var = 0;
  for (int64_t i = 0; i < d; ++i) mean += row[i];
  mean /= d;
  for (int64_t i = 0; i < d; ++i) var += (row[i] - mean) * (row[i] - mean);
  const double inv = 1.0 / std::sqrt(var / d + 1e-5);
  for (int64_t i = 0; i < d; ++i) out[i] = (row[i] - mean) * inv * scale[at + i] + shift[at + i];
}

// --- linear -------------------------------------------------------------------

OpCase LinearCase(int64_t m, int64_t k, int64_t n, Activation act, bool accumulate, bool f32_out,
                  float scale, GemmKernel gemm = GemmKernel::kAuto) {
  OpCase c;
  c.op = "linear";
  c.name =
      absl::StrCat(m, "x", k, "x", n, " ", ActivationName(act), accumulate ? " +=" : "",
                   f32_out ? " ->f32" : "", scale != 1.0f ? absl::StrCat(" scale ", scale) : "",
                   gemm != GemmKernel::kAuto ? absl::StrCat(" ", GemmKernelName(gemm)) : "");
  c.inputs = [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    return Values{{"x", Random(rng, m * k)},
                  {"w", Random(rng, n * k, 1.0f / std::sqrt(static_cast<float>(k)))},
                  {"b", Random(rng, n, 0.1f)},
                  {"y", Random(rng, m * n)}};
  };
  c.low = {"x", "w", "b"};
  if (!f32_out) c.low.push_back("y");
  c.make = [=](const Backend& be, const Values& v) -> absl::StatusOr<std::unique_ptr<OpInstance>> {
    auto inst = std::make_unique<Instance>(be);
    LinearOptions o;
    o.dtype = be.dtype;
    o.scale = scale;
    o.activation = act;
    o.gemm = gemm;
    auto op = std::make_shared<LinearOp>();
    OASR_ASSIGN_OR_RETURN(*op,
                          LinearOp::Create(v.at("w").data(), v.at("b").data(), n, k, o, *be.ctx));
    const DType y_dtype = f32_out ? DType::kFloat32 : be.dtype;
    OASR_RETURN_IF_ERROR(inst->Add("x", v.at("x"), be.dtype));
    OASR_RETURN_IF_ERROR(inst->Add("y", v.at("y"), y_dtype));
    inst->outputs.push_back("y");
    Instance* raw = inst.get();
    const std::vector<float> y0 = v.at("y");
    inst->run = [=](bool restore) {
      if (accumulate && restore) {  // The op adds to y: restore it first.
        OASR_ASSIGN_OR_RETURN(Buf fresh, Upload(*be.ctx, y0, y_dtype));
        OASR_RETURN_IF_ERROR(CopyTensor(raw->bufs.at("y").t.view(), fresh.t.view()));
      }
      LinearArgs a;
      a.x = raw->ptr("x");
      a.ldx = k;
      a.y = raw->ptr("y");
      a.ldy = n;
      a.y_dtype = y_dtype;
      a.m = m;
      a.accumulate = accumulate;
      return op->Run(*be.ctx, a);
    };
    return std::unique_ptr<OpInstance>(std::move(inst));
  };
  c.reference = [=](const Values& v) {
    const auto& x = v.at("x");
    const auto& w = v.at("w");
    const auto& b = v.at("b");
    const auto& y0 = v.at("y");
    std::vector<double> y(static_cast<size_t>(m * n));
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = b[j];
        for (int64_t i = 0; i < k; ++i) acc += static_cast<double>(x[r * k + i]) * w[j * k + i];
        acc *= scale;
        if (act == Activation::kRelu) acc = std::max(acc, 0.0);
        if (act == Activation::kSwish) acc = acc * Sigmoid(acc);
        y[r * n + j] = accumulate ? y0[r * n + j] + acc : acc;
      }
    }
    return Reference{{"y", y}};
  };
  // 16-bit swish on cuBLASLt (kCublas, and every kernel on a GPU without
  // wgmma) rounds the product to the dtype before swish: one more rounding
  // than the plain reference (seen at 1.005x its bound on an H100).
  if (act == Activation::kSwish) c.low_tolerance = 1e-3;
  c.flops = 2.0 * m * k * n;
  c.bytes = 2.0 * (m * k + k * n + m * n);
  return c;
}

// A residual product with the layer norms after it (LinearArgs' norms: the
// wgmma kernel's epilogue on CUDA, the norm op on the CPU): x += in W^T + b,
// then x = LN_final(x) when final_norm, and out = LN_next(x) in the
// backend's dtype when next_norm. Only where LinearOp::FusesNorms() (the
// CPU; 16-bit on a Hopper GPU); n is 256. kNorms takes the epilogue from
// a wave of tiles up (the last case's m), the norm op after cuBLASLt below.
OpCase LinearNormCase(int64_t m, int64_t k, bool final_norm, bool next_norm,
                      GemmKernel gemm = GemmKernel::kFused) {
  constexpr int64_t n = 256;
  OpCase c;
  c.op = "linear";
  c.name =
      absl::StrCat(m, "x", k, "x", n, " += then", final_norm ? " final norm" : "",
                   next_norm ? " next norm" : "", " (norms after, ", GemmKernelName(gemm), ")");
  c.inputs = [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<float> scale = Random(rng, 2 * n, 0.2f);
    for (float& v : scale) v += 1.0f;
    return Values{{"x", Random(rng, m * k)},
                  {"w", Random(rng, n * k, 1.0f / std::sqrt(static_cast<float>(k)))},
                  {"b", Random(rng, n, 0.1f)},
                  {"y", Random(rng, m * n, 2.0f)},
                  {"scales", scale},
                  {"shifts", Random(rng, 2 * n, 0.1f)}};
  };
  c.low = {"x", "w", "b"};
  c.supported = [=](const Backend& be) {
    if (be.ctx->is_cuda() && be.dtype == DType::kFloat32) return false;
    LinearOptions o;
    o.dtype = be.dtype;
    o.gemm = gemm;
    std::vector<float> w(n * 8, 0.0f);
    absl::StatusOr<LinearOp> probe = LinearOp::Create(w.data(), nullptr, n, 8, o, *be.ctx);
    return probe.ok() && probe->FusesNorms();
  };
  c.make = [=](const Backend& be, const Values& v) -> absl::StatusOr<std::unique_ptr<OpInstance>> {
    auto inst = std::make_unique<Instance>(be);
    LinearOptions o;
    o.dtype = be.dtype;
    o.gemm = gemm;
    auto op = std::make_shared<LinearOp>();
    OASR_ASSIGN_OR_RETURN(*op,
                          LinearOp::Create(v.at("w").data(), v.at("b").data(), n, k, o, *be.ctx));
    OASR_RETURN_IF_ERROR(inst->Add("x", v.at("x"), be.dtype));
    OASR_RETURN_IF_ERROR(inst->Add("y", v.at("y"), DType::kFloat32));
    OASR_RETURN_IF_ERROR(inst->Add("scales", v.at("scales"), DType::kFloat32));
    OASR_RETURN_IF_ERROR(inst->Add("shifts", v.at("shifts"), DType::kFloat32));
    inst->outputs.push_back("y");
    if (next_norm) OASR_RETURN_IF_ERROR(inst->AddOutput("out", m * n, be.dtype));
    Instance* raw = inst.get();
    const std::vector<float> y0 = v.at("y");
    inst->run = [=](bool restore) {
      if (restore) {  // The op adds to y: restore it first.
        OASR_ASSIGN_OR_RETURN(Buf fresh, Upload(*be.ctx, y0, DType::kFloat32));
        OASR_RETURN_IF_ERROR(CopyTensor(raw->bufs.at("y").t.view(), fresh.t.view()));
      }
      LinearArgs a;
      a.x = raw->ptr("x");
      a.ldx = k;
      a.y = raw->ptr("y");
      a.ldy = n;
      a.y_dtype = DType::kFloat32;
      a.m = m;
      a.accumulate = true;
      if (final_norm) {
        a.y_norm_scale = raw->f32("scales");
        a.y_norm_shift = raw->f32("shifts");
      }
      if (next_norm) {
        a.out_norm_scale = raw->f32("scales") + n;
        a.out_norm_shift = raw->f32("shifts") + n;
        a.norm_out = raw->ptr("out");
        a.ld_norm_out = n;
      }
      return op->Run(*be.ctx, a);
    };
    return std::unique_ptr<OpInstance>(std::move(inst));
  };
  c.reference = [=](const Values& v) {
    const auto& x = v.at("x");
    const auto& w = v.at("w");
    const auto& sc = v.at("scales");
    const auto& sh = v.at("shifts");
    auto norm = [&](double* row, int64_t at) { NormRowRef(row, n, sc, sh, at, row); };
    std::vector<double> y = ToDouble(v.at("y")), out(static_cast<size_t>(m * n));
    for (int64_t r = 0; r < m; ++r) {
      double* row = y.data() + r * n;
      for (int64_t j = 0; j < n; ++j) {
        double acc = v.at("b")[j];
        for (int64_t i = 0; i < k; ++i) acc += static_cast<double>(x[r * k + i]) * w[j * k + i];
        row[j] += acc;
      }
      if (final_norm) norm(row, 0);
      std::copy(row, row + n, out.begin() + r * n);
      norm(out.data() + r * n, n);
    }
    Reference ref{{"y", y}};
    if (next_norm) ref["out"] = out;
    return ref;
  };
  c.fp32_tolerance = 1e-4;
  c.flops = 2.0 * m * k * n;
  c.bytes = 2.0 * (m * k + k * n) + 8.0 * m * n + (next_norm ? 2.0 * m * n : 0.0);
  return c;
}

// --- conv2d (im2col + GEMM) ---------------------------------------------------

OpCase Conv2dCase(int64_t images, int64_t h, int64_t w, int cin, int cout, int kernel, int stride) {
  OpCase c;
  c.op = "conv2d";
  c.name = absl::StrCat(images, "x", h, "x", w, "x", cin, " -> ", cout, " k", kernel, " s", stride);
  const int64_t ho = Conv2dOp::OutSize(h, kernel, stride),
                wo = Conv2dOp::OutSize(w, kernel, stride);
  const int64_t patch = int64_t{kernel} * kernel * cin;
  c.inputs = [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    return Values{{"in", Random(rng, images * h * w * cin)},
                  {"w", Random(rng, cout * patch, 1.0f / std::sqrt(static_cast<float>(patch)))},
                  {"b", Random(rng, cout, 0.1f)}};
  };
  // The first stage reads the float32 features; later ones the activations.
  c.low = cin == 1 ? std::vector<std::string>{"w", "b"} : std::vector<std::string>{"in", "w", "b"};
  c.make = [=](const Backend& be, const Values& v) -> absl::StatusOr<std::unique_ptr<OpInstance>> {
    auto inst = std::make_unique<Instance>(be);
    Conv2dOptions o;
    o.in_channels = cin;
    o.out_channels = cout;
    o.kernel = kernel;
    o.stride = stride;
    o.dtype = be.dtype;
    auto op = std::make_shared<Conv2dOp>();
    OASR_ASSIGN_OR_RETURN(*op, Conv2dOp::Create(v.at("w").data(), v.at("b").data(), o, *be.ctx));
    const DType in_dtype = cin == 1 ? DType::kFloat32 : be.dtype;
    OASR_RETURN_IF_ERROR(inst->Add("in", v.at("in"), in_dtype));
    OASR_RETURN_IF_ERROR(inst->AddOutput("out", images * ho * wo * cout, be.dtype));
    const size_t need = op->WorkspaceBytes(*be.ctx, images, h, w);
    if (be.ctx->workspace().capacity() < need) {
      OASR_RETURN_IF_ERROR(be.ctx->ReserveWorkspace(need, be.ctx->host_workspace().capacity()));
    }
    Instance* raw = inst.get();
    inst->run = [=](bool) {
      Conv2dArgs a;
      a.in = raw->ptr("in");
      a.in_dtype = in_dtype;
      a.n = images;
      a.h = h;
      a.w = w;
      a.out = raw->ptr("out");
      return op->Run(*be.ctx, a);
    };
    return std::unique_ptr<OpInstance>(std::move(inst));
  };
  c.reference = [=](const Values& v) {
    const auto& in = v.at("in");
    const auto& wt = v.at("w");
    const auto& b = v.at("b");
    std::vector<double> out(static_cast<size_t>(images * ho * wo * cout));
    for (int64_t i = 0; i < images; ++i) {
      for (int64_t t = 0; t < ho; ++t) {
        for (int64_t f = 0; f < wo; ++f) {
          for (int o = 0; o < cout; ++o) {
            double acc = b[o];
            for (int a = 0; a < kernel; ++a) {
              for (int bb = 0; bb < kernel; ++bb) {
                const float* src = &in[((i * h + t * stride + a) * w + f * stride + bb) * cin];
                const float* wk = &wt[((int64_t{o} * kernel + a) * kernel + bb) * cin];
                for (int ch = 0; ch < cin; ++ch) acc += static_cast<double>(src[ch]) * wk[ch];
              }
            }
            out[((i * ho + t) * wo + f) * cout + o] = std::max(acc, 0.0);
          }
        }
      }
    }
    return Reference{{"out", out}};
  };
  c.flops = 2.0 * images * ho * wo * cout * patch;
  c.bytes = 2.0 * (images * h * w * cin + images * ho * wo * cout);
  return c;
}

// The first two stages fused on CUDA: stage 2 over stage 1's activation
// computed inside the gather (FusedStemParams, any StemKernel; the
// implicit GEMM writes stage 1 once and gathers stage 2's patches from it),
// against the two convolutions in float64.
OpCase FusedStemCase(int64_t images, int64_t h, int64_t w, int c1, int c2, int k2, int s2,
                     StemKernel kernel = StemKernel::kRecompute) {
  OpCase c;
  c.op = "conv2d_stem";
  c.name = absl::StrCat(images, "x", h, "x", w, " -> ", c1, " -> ", c2, " k", k2, " s", s2,
                        kernel == StemKernel::kTensorCores    ? ", tensor cores"
                        : kernel == StemKernel::kImplicitGemm ? ", implicit gemm"
                                                              : "");
  c.cuda_only = true;
  const int64_t h1 = Conv2dOp::OutSize(h, 3, 2), w1 = Conv2dOp::OutSize(w, 3, 2);
  const int64_t h2 = Conv2dOp::OutSize(h1, k2, s2), w2 = Conv2dOp::OutSize(w1, k2, s2);
  const int64_t patch = int64_t{k2} * k2 * c1;
  c.inputs = [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    return Values{{"in", Random(rng, images * h * w)},
                  {"w1", Random(rng, c1 * 9, 1.0f / 3)},
                  {"b1", Random(rng, c1, 0.1f)},
                  {"w2", Random(rng, c2 * patch, 1.0f / std::sqrt(static_cast<float>(patch)))},
                  {"b2", Random(rng, c2, 0.1f)}};
  };
  c.low = {"w2", "b2"};
  c.make = [=](const Backend& be, const Values& v) -> absl::StatusOr<std::unique_ptr<OpInstance>> {
    auto inst = std::make_unique<Instance>(be);
    Conv2dOptions first{1, c1, 3, 2, be.dtype};
    Conv2dOptions second{c1, c2, k2, s2, be.dtype};
    auto op = std::make_shared<Conv2dOp>();
    OASR_ASSIGN_OR_RETURN(*op,
                          Conv2dOp::Create(v.at("w2").data(), v.at("b2").data(), second, *be.ctx));
    OASR_RETURN_IF_ERROR(
        op->FuseFirstStage(v.at("w1").data(), v.at("b1").data(), first, *be.ctx, kernel));
    OASR_RETURN_IF_ERROR(inst->Add("in", v.at("in"), DType::kFloat32));
    OASR_RETURN_IF_ERROR(inst->AddOutput("out", images * h2 * w2 * c2, be.dtype));
    const size_t need = op->WorkspaceBytes(*be.ctx, images, h, w);
    if (be.ctx->workspace().capacity() < need) {
      OASR_RETURN_IF_ERROR(be.ctx->ReserveWorkspace(need, be.ctx->host_workspace().capacity()));
    }
    Instance* raw = inst.get();
    inst->run = [=](bool) {
      Conv2dArgs a;
      a.in = raw->ptr("in");
      a.n = images;
      a.h = h;
      a.w = w;
      a.out = raw->ptr("out");
      return op->Run(*be.ctx, a);
    };
    return std::unique_ptr<OpInstance>(std::move(inst));
  };
  c.reference = [=](const Values& v) {
    // The tensors looked up once: the loops below run ~10^9 times for the
    // widest case.
    const std::vector<float>& in = v.at("in");
    const std::vector<float>& w1v = v.at("w1");
    const std::vector<float>& b1v = v.at("b1");
    const std::vector<float>& w2v = v.at("w2");
    const std::vector<float>& b2v = v.at("b2");
    std::vector<double> act(static_cast<size_t>(images * h1 * w1 * c1));
    for (int64_t i = 0; i < images; ++i) {
      for (int64_t t = 0; t < h1; ++t) {
        for (int64_t f = 0; f < w1; ++f) {
          for (int ch = 0; ch < c1; ++ch) {
            double acc = b1v[ch];
            for (int a = 0; a < 3; ++a) {
              for (int b = 0; b < 3; ++b) {
                acc += static_cast<double>(w1v[ch * 9 + a * 3 + b]) *
                       in[(i * h + 2 * t + a) * w + 2 * f + b];
              }
            }
            // Stage 2 sees stage 1's output in the backend's dtype.
            act[((i * h1 + t) * w1 + f) * c1 + ch] = std::max(acc, 0.0);
          }
        }
      }
    }
    std::vector<double> out(static_cast<size_t>(images * h2 * w2 * c2));
    for (int64_t i = 0; i < images; ++i) {
      for (int64_t t = 0; t < h2; ++t) {
        for (int64_t f = 0; f < w2; ++f) {
          for (int o = 0; o < c2; ++o) {
            double acc = b2v[o];
            for (int a = 0; a < k2; ++a) {
              for (int b = 0; b < k2; ++b) {
                for (int ch = 0; ch < c1; ++ch) {
                  acc += act[((i * h1 + t * s2 + a) * w1 + f * s2 + b) * c1 + ch] *
                         w2v[((int64_t{o} * k2 + a) * k2 + b) * c1 + ch];
                }
              }
            }
            out[((i * h2 + t) * w2 + f) * c2 + o] = std::max(acc, 0.0);
          }
        }
      }
    }
    return Reference{{"out", out}};
  };
  // Stage 1's activation is rounded to the dtype before stage 2 on the GPU:
  // a little more than the plain output rounding.
  c.fp32_tolerance = 2e-3;
  c.flops = 2.0 * images * h2 * w2 * c2 * patch;
  c.bytes = 4.0 * images * h * w + 2.0 * images * h2 * w2 * c2;
  return c;
}

// --- layer norm ---------------------------------------------------------------

OpCase LayerNormCase(int64_t rows, int64_t d, bool residual, bool f32_out) {
  OpCase c;
  c.op = "layer_norm";
  c.name = absl::StrCat(rows, "x", d, residual ? " +residual" : "", f32_out ? " ->f32" : "");
  c.inputs = [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<float> x = Random(rng, rows * d, 3.0f);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < d; ++i) x[r * d + i] += 0.5f * static_cast<float>(r % 5);  // Offsets.
    }
    std::vector<float> scale = Random(rng, d, 0.2f);
    for (float& s : scale) s += 1.0f;
    return Values{{"x", x},
                  {"res", Random(rng, rows * d)},
                  {"scale", scale},
                  {"shift", Random(rng, d, 0.1f)}};
  };
  c.low = {"res"};
  c.make = [=](const Backend& be, const Values& v) -> absl::StatusOr<std::unique_ptr<OpInstance>> {
    auto inst = std::make_unique<Instance>(be);
    const DType out_dtype = f32_out ? DType::kFloat32 : be.dtype;
    OASR_RETURN_IF_ERROR(inst->Add("x", v.at("x"), DType::kFloat32));
    OASR_RETURN_IF_ERROR(inst->Add("res", v.at("res"), be.dtype));
    OASR_RETURN_IF_ERROR(inst->Add("scale", v.at("scale"), DType::kFloat32));
    OASR_RETURN_IF_ERROR(inst->Add("shift", v.at("shift"), DType::kFloat32));
    OASR_RETURN_IF_ERROR(inst->AddOutput("out", rows * d, out_dtype));
    if (residual) OASR_RETURN_IF_ERROR(inst->AddOutput("sum", rows * d, DType::kFloat32));
    Instance* raw = inst.get();
    inst->run = [=](bool) {
      LayerNormParams p;
      p.x = raw->ptr("x");
      p.ldx = d;
      if (residual) {
        p.residual = raw->ptr("res");
        p.residual_dtype = be.dtype;
        p.ld_residual = d;
        p.residual_scale = 0.5f;
        p.sum_out = raw->ptr("sum");
        p.ld_sum = d;
      }
      p.scale = raw->f32("scale");
      p.shift = raw->f32("shift");
      p.out = raw->ptr("out");
      p.out_dtype = out_dtype;
      p.ldo = d;
      p.rows = rows;
      p.d = d;
      return LayerNorm(*be.ctx, p);
    };
    return std::unique_ptr<OpInstance>(std::move(inst));
  };
  c.reference = [=](const Values& v) {
    Reference ref;
    std::vector<double>& out = ref["out"];
    std::vector<double>& sum = ref["sum"];
    out.resize(static_cast<size_t>(rows * d));
    sum.resize(out.size());
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < d; ++i) {
        sum[r * d + i] = v.at("x")[r * d + i] + (residual ? 0.5 * v.at("res")[r * d + i] : 0.0);
        mean += sum[r * d + i];
      }
      mean /= d;
      for (int64_t i = 0; i < d; ++i) var += (sum[r * d + i] - mean) * (sum[r * d + i] - mean);
      const double inv = 1.0 / std::sqrt(var / d + 1e-5);
      for (int64_t i = 0; i < d; ++i) {
        out[r * d + i] = (sum[r * d + i] - mean) * inv * v.at("scale")[i] + v.at("shift")[i];
      }
    }
    if (!residual) ref.erase("sum");
    return ref;
  };
  c.bytes = rows * d * (4.0 + (f32_out ? 4 : 2) + (residual ? 6 : 0));
  return c;
}

// --- the fused feed-forward module --------------------------------------------

// x (m rows of d at stride ldx, plus 3 rows past m that must not change) +=
// 0.5 (swish(LN(x) W1^T + b1) W2^T + b2), then the final norm if asked.
OpCase FeedForwardCase(int64_t m, int64_t units, bool final_norm, int block_rows,
                       int64_t ldx = 256) {
  constexpr int64_t d = 256;
  const int64_t rows_alloc = m + 3;
  OpCase c;
  c.op = "feed_forward";
  c.name = absl::StrCat(m, "x", d, " units ", units, final_norm ? " +final norm" : "",
                        block_rows ? absl::StrCat(" block ", block_rows) : "",
                        ldx != d ? absl::StrCat(" ldx ", ldx) : "");
  c.inputs = [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<float> x = Random(rng, rows_alloc * ldx, 2.0f);
    for (int64_t r = 0; r < rows_alloc; ++r) {
      for (int64_t i = 0; i < d; ++i) x[r * ldx + i] += 0.3f * static_cast<float>(r % 7);
    }
    auto around_one = [&](int64_t n) {
      std::vector<float> s = Random(rng, n, 0.2f);
      for (float& v : s) v += 1.0f;
      return s;
    };
    return Values{{"x", x},
                  {"w1", Random(rng, units * d, 1.0f / std::sqrt(static_cast<float>(d)))},
                  {"b1", Random(rng, units, 0.5f)},
                  {"w2", Random(rng, d * units, 1.0f / std::sqrt(static_cast<float>(units)))},
                  {"b2", Random(rng, d, 0.5f)},
                  {"scale", around_one(d)},
                  {"shift", Random(rng, d, 0.1f)},
                  {"final_scale", around_one(d)},
                  {"final_shift", Random(rng, d, 0.1f)}};
  };
  c.low = {"w1", "w2"};
  c.supported = [=](const Backend& be) {
    return FeedForwardOp::Supported(*be.ctx, be.dtype, d, units);
  };
  c.make = [=](const Backend& be, const Values& v) -> absl::StatusOr<std::unique_ptr<OpInstance>> {
    auto inst = std::make_unique<Instance>(be);
    auto op = std::make_shared<FeedForwardOp>();
    OASR_ASSIGN_OR_RETURN(
        *op, FeedForwardOp::Create(v.at("w1").data(), v.at("b1").data(), v.at("w2").data(),
                                   v.at("b2").data(), d, units, 0.5f, be.dtype, *be.ctx));
    for (const char* name : {"scale", "shift", "final_scale", "final_shift"}) {
      OASR_RETURN_IF_ERROR(inst->Add(name, v.at(name), DType::kFloat32));
    }
    OASR_RETURN_IF_ERROR(inst->AddOutput("x", rows_alloc * ldx, DType::kFloat32));
    Instance* raw = inst.get();
    const std::vector<float> x0 = v.at("x");
    inst->run = [=](bool restore) {
      if (restore) {  // The op updates x in place: its input first.
        OASR_ASSIGN_OR_RETURN(Buf fresh, Upload(*be.ctx, x0, DType::kFloat32));
        OASR_RETURN_IF_ERROR(CopyTensor(raw->bufs.at("x").t.view(), fresh.t.view()));
      }
      FeedForwardArgs a;
      a.x = raw->f32("x");
      a.ldx = ldx;
      a.m = m;
      a.norm_scale = raw->f32("scale");
      a.norm_shift = raw->f32("shift");
      if (final_norm) {
        a.final_scale = raw->f32("final_scale");
        a.final_shift = raw->f32("final_shift");
      }
      a.block_rows = block_rows;
      return op->Run(*be.ctx, a);
    };
    return std::unique_ptr<OpInstance>(std::move(inst));
  };
  c.reference = [=](const Values& v) {
    const auto& x0 = v.at("x");
    const auto& w1 = v.at("w1");
    const auto& w2 = v.at("w2");
    std::vector<double> x = ToDouble(x0);  // Padding columns and rows past m stay.
    auto norm = [&](double* row, const std::vector<float>& scale, const std::vector<float>& shift,
                    double* out) { NormRowRef(row, d, scale, shift, 0, out); };
    std::vector<double> xn(d), h(units);
    for (int64_t r = 0; r < m; ++r) {
      double* row = x.data() + r * ldx;
      norm(row, v.at("scale"), v.at("shift"), xn.data());
      for (int64_t u = 0; u < units; ++u) {
        double acc = v.at("b1")[u];
        for (int64_t i = 0; i < d; ++i) acc += xn[i] * w1[u * d + i];
        h[u] = acc * Sigmoid(acc);
      }
      for (int64_t i = 0; i < d; ++i) {
        double acc = v.at("b2")[i];
        for (int64_t u = 0; u < units; ++u) acc += h[u] * w2[i * units + u];
        row[i] += 0.5 * acc;
      }
      if (final_norm) norm(row, v.at("final_scale"), v.at("final_shift"), row);
    }
    return Reference{{"x", x}};
  };
  c.fp32_tolerance = 1e-4;  // Sums of 1,024 products in float32.
  // 16-bit: the normalised rows and swish(...) are rounded to the dtype
  // before each product, as on the unfused path (a simulation of the
  // roundings put their error at ~0.1 of twice the plain one).
  c.low_tolerance = 2e-3;
  c.flops = 4.0 * m * d * units;
  c.bytes = 8.0 * m * d + 4.0 * d * units;
  return c;
}

// --- element-wise: swish, relu, GLU, cast, residual add -----------------------

OpCase ActivationCase(int64_t rows, int64_t cols, int64_t ld, Activation act) {
  OpCase c;
  c.op = ActivationName(act);
  c.name = absl::StrCat(rows, "x", cols, " ld ", ld);
  c.inputs = [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    return Values{{"x", Random(rng, rows * ld, 6.0f)}};
  };
  c.low = {"x"};
  c.make = [=](const Backend& be, const Values& v) -> absl::StatusOr<std::unique_ptr<OpInstance>> {
    auto inst = std::make_unique<Instance>(be);
    OASR_RETURN_IF_ERROR(inst->Add("x", v.at("x"), be.dtype));
    inst->outputs.push_back("x");  // In place: every element is rewritten or kept.
    Instance* raw = inst.get();
    const std::vector<float> x0 = v.at("x");
    inst->run = [=](bool restore) {
      if (restore) {
        OASR_ASSIGN_OR_RETURN(Buf fresh, Upload(*be.ctx, x0, be.dtype));
        OASR_RETURN_IF_ERROR(CopyTensor(raw->bufs.at("x").t.view(), fresh.t.view()));
      }
      ActivationParams p;
      p.x = raw->ptr("x");
      p.dtype = be.dtype;
      p.rows = rows;
      p.cols = cols;
      p.ld = ld;
      p.activation = act;
      return ApplyActivation(*be.ctx, p);
    };
    return std::unique_ptr<OpInstance>(std::move(inst));
  };
  c.reference = [=](const Values& v) {
    std::vector<double> x = ToDouble(v.at("x"));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < cols; ++i) {
        double& e = x[r * ld + i];
        e = act == Activation::kSwish ? e * Sigmoid(e) : std::max(e, 0.0);
      }
    }
    return Reference{{"x", x}};
  };
  c.bytes = 2.0 * rows * cols * 2;
  return c;
}

OpCase GluCase(int64_t rows, int64_t cols) {
  OpCase c;
  c.op = "glu";
  c.name = absl::StrCat(rows, "x", cols);
  c.inputs = [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    return Values{{"in", Random(rng, rows * 2 * cols, 4.0f)}};
  };
  c.low = {"in"};
  c.make = [=](const Backend& be, const Values& v) -> absl::StatusOr<std::unique_ptr<OpInstance>> {
    auto inst = std::make_unique<Instance>(be);
    OASR_RETURN_IF_ERROR(inst->Add("in", v.at("in"), be.dtype));
    OASR_RETURN_IF_ERROR(inst->AddOutput("out", rows * cols, be.dtype));
    Instance* raw = inst.get();
    inst->run = [=](bool) {
      GluParams p;
      p.in = raw->ptr("in");
      p.ld_in = 2 * cols;
      p.out = raw->ptr("out");
      p.ld_out = cols;
      p.dtype = be.dtype;
      p.rows = rows;
      p.cols = cols;
      return Glu(*be.ctx, p);
    };
    return std::unique_ptr<OpInstance>(std::move(inst));
  };
  c.reference = [=](const Values& v) {
    const auto& in = v.at("in");
    std::vector<double> out(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < cols; ++i) {
        out[r * cols + i] = in[r * 2 * cols + i] * Sigmoid(in[r * 2 * cols + cols + i]);
      }
    }
    return Reference{{"out", out}};
  };
  c.bytes = rows * cols * 6.0;
  return c;
}

OpCase CastCase(int64_t n, bool to_low) {
  OpCase c;
  c.op = "cast";
  c.name = absl::StrCat(n, to_low ? " f32->low" : " low->f32");
  c.inputs = [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    return Values{{"in", Random(rng, n, 100.0f)}};
  };
  if (!to_low) c.low = {"in"};
  c.make = [=](const Backend& be, const Values& v) -> absl::StatusOr<std::unique_ptr<OpInstance>> {
    auto inst = std::make_unique<Instance>(be);
    const DType in_dtype = to_low ? DType::kFloat32 : be.dtype;
    const DType out_dtype = to_low ? be.dtype : DType::kFloat32;
    OASR_RETURN_IF_ERROR(inst->Add("in", v.at("in"), in_dtype));
    OASR_RETURN_IF_ERROR(inst->AddOutput("out", n, out_dtype));
    Instance* raw = inst.get();
    inst->run = [=](bool) {
      CastParams p;
      p.in = raw->ptr("in");
      p.in_dtype = in_dtype;
      p.out = raw->ptr("out");
      p.out_dtype = out_dtype;
      p.n = n;
      return Cast(*be.ctx, p);
    };
    return std::unique_ptr<OpInstance>(std::move(inst));
  };
  c.reference = [=](const Values& v) { return Reference{{"out", ToDouble(v.at("in"))}}; };
  c.fp32_tolerance = 0;
  c.bytes = n * 6.0;
  return c;
}

OpCase ResidualAddCase(int64_t n) {
  OpCase c;
  c.op = "residual_add";
  c.name = absl::StrCat(n);
  c.inputs = [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    return Values{{"y", Random(rng, n)}, {"x", Random(rng, n)}};
  };
  c.make = [=](const Backend& be, const Values& v) -> absl::StatusOr<std::unique_ptr<OpInstance>> {
    auto inst = std::make_unique<Instance>(be);
    OASR_RETURN_IF_ERROR(inst->Add("x", v.at("x"), DType::kFloat32));
    OASR_RETURN_IF_ERROR(inst->Add("y", v.at("y"), DType::kFloat32));
    inst->outputs.push_back("y");
    Instance* raw = inst.get();
    const std::vector<float> y0 = v.at("y");
    inst->run = [=](bool restore) {
      if (restore) {
        OASR_ASSIGN_OR_RETURN(Buf fresh, Upload(*be.ctx, y0, DType::kFloat32));
        OASR_RETURN_IF_ERROR(CopyTensor(raw->bufs.at("y").t.view(), fresh.t.view()));
      }
      return ResidualAdd(*be.ctx, ResidualAddParams{raw->f32("y"), raw->f32("x"), 0.5f, n});
    };
    return std::unique_ptr<OpInstance>(std::move(inst));
  };
  c.reference = [=](const Values& v) {
    std::vector<double> y(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) y[i] = v.at("y")[i] + 0.5 * v.at("x")[i];
    return Reference{{"y", y}};
  };
  c.bytes = n * 12.0;
  return c;
}

// --- the conv module's core ---------------------------------------------------

OpCase CausalConvCase(int batch, int chunk, int d, int kernel, bool layer_norm,
                      std::vector<int32_t> frames) {
  OpCase c;
  c.op = "causal_conv";
  c.name = absl::StrCat(batch, " rows x ", chunk, ", d ", d, ", kernel ", kernel,
                        layer_norm ? ", layer norm" : ", affine");
  const int k1 = kernel - 1;
  const int slots = batch + 3;
  // Distinct slots, scattered, never in row order.
  std::vector<int32_t> slot_of(slots);
  std::iota(slot_of.begin(), slot_of.end(), 0);
  std::shuffle(slot_of.begin(), slot_of.end(), std::mt19937(5));
  slot_of.resize(batch);
  c.inputs = [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<float> scale = Random(rng, d, 0.2f);
    for (float& s : scale) s += 1.0f;
    return Values{{"in", Random(rng, int64_t{batch} * chunk * 2 * d, 2.0f)},
                  {"state", Random(rng, int64_t{slots} * k1 * d)},
                  {"glu0", Random(rng, d, 0.3f)},
                  {"taps", Random(rng, int64_t{kernel} * d, 0.4f)},
                  {"bias", Random(rng, d, 0.1f)},
                  {"scale", scale},
                  {"shift", Random(rng, d, 0.1f)}};
  };
  c.low = {"in", "state"};
  c.make = [=](const Backend& be, const Values& v) -> absl::StatusOr<std::unique_ptr<OpInstance>> {
    auto inst = std::make_unique<Instance>(be);
    for (const char* name : {"glu0", "taps", "bias", "scale", "shift"}) {
      OASR_RETURN_IF_ERROR(inst->Add(name, v.at(name), DType::kFloat32));
    }
    OASR_RETURN_IF_ERROR(inst->Add("in", v.at("in"), be.dtype));
    OASR_RETURN_IF_ERROR(inst->Add("state", v.at("state"), be.dtype));
    inst->outputs.push_back("state");
    OASR_RETURN_IF_ERROR(inst->AddOutput("out", int64_t{batch} * chunk * d, be.dtype));
    OASR_RETURN_IF_ERROR(inst->AddInts("slots", slot_of));
    OASR_RETURN_IF_ERROR(inst->AddInts("frames", frames));
    Instance* raw = inst.get();
    const std::vector<float> state0 = v.at("state");
    inst->run = [=](bool restore) {
      if (restore) {
        OASR_ASSIGN_OR_RETURN(Buf fresh, Upload(*be.ctx, state0, be.dtype));
        OASR_RETURN_IF_ERROR(CopyTensor(raw->bufs.at("state").t.view(), fresh.t.view()));
      }
      CausalConvParams p;
      p.in = raw->ptr("in");
      p.ld_in = 2 * d;
      p.dtype = be.dtype;
      p.state = raw->ptr("state");
      p.state_slot_stride = int64_t{k1} * d;
      p.glu0 = raw->f32("glu0");
      p.slots = raw->ints("slots");
      p.frames = raw->ints("frames");
      p.taps = raw->f32("taps");
      p.tap_bias = raw->f32("bias");
      p.layer_norm = layer_norm;
      p.norm_scale = raw->f32("scale");
      p.norm_shift = raw->f32("shift");
      p.out = raw->ptr("out");
      p.ldo = d;
      p.batch = batch;
      p.chunk = chunk;
      p.d = d;
      p.kernel = kernel;
      return CausalConv(*be.ctx, p);
    };
    return std::unique_ptr<OpInstance>(std::move(inst));
  };
  c.reference = [=](const Values& v) {
    const auto& in = v.at("in");
    std::vector<double> state = ToDouble(v.at("state"));
    std::vector<double> out(static_cast<size_t>(int64_t{batch} * chunk * d), 0.0);
    for (int b = 0; b < batch; ++b) {
      const int f = frames[b];
      std::vector<double> g(static_cast<size_t>((k1 + f) * d));
      double* st = &state[static_cast<size_t>(slot_of[b]) * k1 * d];
      for (int j = 0; j < k1; ++j) {
        for (int ch = 0; ch < d; ++ch) g[j * d + ch] = st[j * d + ch] + v.at("glu0")[ch];
      }
      for (int t = 0; t < f; ++t) {
        const float* row = &in[(static_cast<size_t>(b) * chunk + t) * 2 * d];
        for (int ch = 0; ch < d; ++ch) g[(k1 + t) * d + ch] = row[ch] * Sigmoid(row[d + ch]);
      }
      for (int t = 0; t < f; ++t) {
        std::vector<double> y(d);
        for (int ch = 0; ch < d; ++ch) {
          double acc = v.at("bias")[ch];
          for (int j = 0; j <= k1; ++j) acc += v.at("taps")[j * d + ch] * g[(t + j) * d + ch];
          y[ch] = acc;
        }
        double mean = 0, var = 0;
        for (double e : y) mean += e;
        mean /= d;
        for (double e : y) var += (e - mean) * (e - mean);
        const double inv = 1.0 / std::sqrt(var / d + 1e-5);
        for (int ch = 0; ch < d; ++ch) {
          const double n = layer_norm ? (y[ch] - mean) * inv * v.at("scale")[ch] + v.at("shift")[ch]
                                      : y[ch] * v.at("scale")[ch] + v.at("shift")[ch];
          out[(static_cast<size_t>(b) * chunk + t) * d + ch] = n * Sigmoid(n);
        }
      }
      for (int j = 0; j < k1; ++j) {
        for (int ch = 0; ch < d; ++ch) st[j * d + ch] = g[(f + j) * d + ch] - v.at("glu0")[ch];
      }
    }
    return Reference{{"out", out}, {"state", state}};
  };
  c.bytes = double(batch) * chunk * d * 6 + double(batch) * k1 * d * 4;
  return c;
}

// --- CTC head: log_softmax, top-k ---------------------------------------------

OpCase LogSoftmaxCase(int64_t rows, int64_t n) {
  OpCase c;
  c.op = "log_softmax";
  c.name = absl::StrCat(rows, "x", n);
  c.inputs = [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    return Values{{"x", Random(rng, rows * n, 12.0f)}};
  };
  c.make = [=](const Backend& be, const Values& v) -> absl::StatusOr<std::unique_ptr<OpInstance>> {
    auto inst = std::make_unique<Instance>(be);
    OASR_RETURN_IF_ERROR(inst->Add("x", v.at("x"), DType::kFloat32));
    inst->outputs.push_back("x");
    Instance* raw = inst.get();
    const std::vector<float> x0 = v.at("x");
    inst->run = [=](bool restore) {
      if (restore) {
        OASR_ASSIGN_OR_RETURN(Buf fresh, Upload(*be.ctx, x0, DType::kFloat32));
        OASR_RETURN_IF_ERROR(CopyTensor(raw->bufs.at("x").t.view(), fresh.t.view()));
      }
      return LogSoftmax(*be.ctx, LogSoftmaxParams{raw->f32("x"), rows, n, n});
    };
    return std::unique_ptr<OpInstance>(std::move(inst));
  };
  c.reference = [=](const Values& v) {
    std::vector<double> x = ToDouble(v.at("x"));
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -1e300, sum = 0;
      for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[r * n + i]);
      for (int64_t i = 0; i < n; ++i) sum += std::exp(x[r * n + i] - mx);
      const double lse = mx + std::log(sum);
      for (int64_t i = 0; i < n; ++i) x[r * n + i] -= lse;
    }
    return Reference{{"x", x}};
  };
  c.bytes = rows * n * 8.0;
  return c;
}

OpCase TopKCase(int64_t rows, int64_t n, int k) {
  OpCase c;
  c.op = "top_k";
  c.name = absl::StrCat(rows, "x", n, " k ", k);
  c.inputs = [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    // Values on a coarse grid, so ties are common and their order is tested.
    std::uniform_int_distribution<int> dist(-40, 40);
    std::vector<float> x(static_cast<size_t>(rows * n));
    for (float& e : x) e = static_cast<float>(dist(rng)) / 8.0f;
    return Values{{"x", x}};
  };
  c.make = [=](const Backend& be, const Values& v) -> absl::StatusOr<std::unique_ptr<OpInstance>> {
    auto inst = std::make_unique<Instance>(be);
    OASR_RETURN_IF_ERROR(inst->Add("x", v.at("x"), DType::kFloat32));
    OASR_RETURN_IF_ERROR(inst->AddOutput("values", rows * k, DType::kFloat32));
    OASR_RETURN_IF_ERROR(
        inst->AddInts("indices", std::vector<int32_t>(static_cast<size_t>(rows * k))));
    inst->outputs.push_back("indices");
    Instance* raw = inst.get();
    inst->run = [=](bool) {
      TopKParams p;
      p.x = raw->f32("x");
      p.rows = rows;
      p.n = n;
      p.ld = n;
      p.k = k;
      p.values = raw->f32("values");
      p.indices = static_cast<int32_t*>(raw->ptr("indices"));
      return TopK(*be.ctx, p);
    };
    return std::unique_ptr<OpInstance>(std::move(inst));
  };
  c.reference = [=](const Values& v) {
    Reference ref;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      const float* x = &v.at("x")[r * n];
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
      for (int j = 0; j < k; ++j) {
        ref["values"].push_back(x[order[j]]);
        ref["indices"].push_back(order[j]);
      }
    }
    return ref;
  };
  c.fp32_tolerance = 0;
  c.bytes = rows * n * 4.0;
  return c;
}

}  // namespace

std::vector<OpCase> AllCases() {
  std::vector<OpCase> cases;
  using A = Activation;
  // Linear: batch 1, odd sizes, the model's shapes at a cohort of 64 rows of 16.
  cases.push_back(LinearCase(1, 256, 256, A::kNone, false, false, 1.0f));
  cases.push_back(LinearCase(13, 80, 33, A::kRelu, false, false, 1.0f));
  cases.push_back(LinearCase(1024, 256, 1024, A::kSwish, false, false, 1.0f));
  cases.push_back(LinearCase(1024, 1024, 256, A::kNone, true, true, 0.5f));
  cases.push_back(LinearCase(1024, 256, 768, A::kNone, false, false, 1.0f));
  cases.push_back(LinearCase(37, 256, 258, A::kNone, false, true, 1.0f));
  cases.push_back(LinearCase(64, 4864, 256, A::kNone, false, true, 16.0f));
  // The wgmma kernel (16-bit on Hopper; cuBLASLt elsewhere): ragged rows,
  // several blocks of 128 x 256, k past one 64-wide stage and not a multiple
  // of it, n short of a block, each epilogue, both cuBLASLt's paths beside.
  for (GemmKernel g : {GemmKernel::kWgmma, GemmKernel::kCublas}) {
    cases.push_back(LinearCase(1000, 256, 1024, A::kSwish, false, false, 1.0f, g));
    cases.push_back(LinearCase(300, 1024, 256, A::kNone, true, false, 0.5f, g));
  }
  cases.push_back(LinearCase(77, 256, 768, A::kNone, false, false, 1.0f, GemmKernel::kWgmma));
  cases.push_back(LinearCase(129, 80, 40, A::kRelu, false, false, 1.0f, GemmKernel::kWgmma));
  cases.push_back(LinearCase(2, 200, 258, A::kSwish, false, false, 1.0f, GemmKernel::kWgmma));
  cases.push_back(LinearCase(700, 2304, 256, A::kRelu, false, false, 1.0f, GemmKernel::kWgmma));
  // The epilogue's staging rows: += read through them, rows of 258 columns
  // (a second block of two, rows not 16-byte aligned: the pair by pair
  // path), and 16-bit += over many tiles a block.
  cases.push_back(LinearCase(77, 256, 258, A::kNone, true, false, 1.0f, GemmKernel::kWgmma));
  cases.push_back(LinearCase(20011, 256, 256, A::kNone, true, false, 1.0f, GemmKernel::kWgmma));
  // k <= 256 takes the weight-stationary kernel: this m gives a block of
  // every SM six or seven 64-row tiles, so its ring of x wraps and its
  // warpgroups take several turns each.
  cases.push_back(LinearCase(50721, 256, 256, A::kNone, true, true, 1.0f, GemmKernel::kWgmma));
  cases.push_back(LinearNormCase(300, 1024, false, true));
  cases.push_back(LinearNormCase(1000, 256, true, true));
  cases.push_back(LinearNormCase(129, 256, true, false));
  cases.push_back(LinearNormCase(1000, 256, true, true, GemmKernel::kNorms));
  cases.push_back(LinearNormCase(132 * 128 + 77, 256, false, true, GemmKernel::kNorms));
  // FFN w2's shape on the 128 x 256 tiles (k = 1024): more tiles than SMs,
  // a short last one, both norms (the 16-bit out through the staging rows).
  // CUDA only: the CPU's path is the cases above, at a quarter of the
  // reference's cost.
  {
    OpCase c = LinearNormCase(132 * 128 + 77, 1024, true, true, GemmKernel::kNorms);
    c.cuda_only = true;
    cases.push_back(std::move(c));
  }
  // kEpilogues: swish's product on cuBLASLt and its pass below a wave of
  // tiles, on the wgmma kernel from one up.
  cases.push_back(LinearCase(1000, 64, 512, A::kSwish, false, false, 1.0f, GemmKernel::kEpilogues));
  cases.push_back(
      LinearCase(132 * 128 + 77, 64, 512, A::kSwish, false, false, 1.0f, GemmKernel::kEpilogues));
  cases.push_back(LinearNormCase(132 * 128 + 77, 256, true, true, GemmKernel::kEpilogues));
  // Subsampling stages: the first (one channel, float32 features) and the
  // second (256 channels) of conv2d, conv2d6's 5x5 stride 3.
  cases.push_back(Conv2dCase(1, 67, 80, 1, 256, 3, 2));
  cases.push_back(Conv2dCase(3, 67, 80, 1, 64, 3, 2));
  cases.push_back(Conv2dCase(2, 33, 39, 64, 64, 3, 2));
  cases.push_back(Conv2dCase(2, 50, 39, 32, 48, 5, 3));
  cases.push_back(FusedStemCase(2, 67, 80, 64, 64, 3, 2));
  cases.push_back(FusedStemCase(1, 101, 80, 32, 48, 5, 3));
  // Enough images that the patches come in several groups (96 MiB each).
  cases.push_back(FusedStemCase(80, 67, 80, 256, 16, 3, 2));
  // Stage 1 on the tensor cores (c1 64, 128, 256, 512; float32 patches and
  // other widths fall back to the recompute): the bundled stem's shape in
  // several groups, a wide one, a 5 x 5 stride-3 second stage, a stage-2
  // row narrower than a pass of the copy-out, and fallbacks.
  constexpr StemKernel kTc = StemKernel::kTensorCores;
  cases.push_back(FusedStemCase(80, 67, 80, 256, 16, 3, 2, kTc));
  cases.push_back(FusedStemCase(2, 67, 80, 64, 64, 3, 2, kTc));
  cases.push_back(FusedStemCase(3, 67, 80, 512, 32, 3, 2, kTc));
  cases.push_back(FusedStemCase(2, 101, 80, 128, 24, 5, 3, kTc));
  cases.push_back(FusedStemCase(3, 30, 20, 256, 16, 3, 2, kTc));
  cases.push_back(FusedStemCase(1, 101, 80, 32, 48, 5, 3, kTc));
  // The implicit GEMM (stage 1 written once, stage 2's patches gathered by
  // the copy engine's im2col mode; sm_90 only, else the tensor cores'
  // path): the bundled stem's shape in two groups (152 images each), whole
  // 256-column tiles with a partial last row tile, 64 and 512 stage-1
  // channels, a 5 x 5 stride-3 second stage, a last group of stage-1 rows
  // cut short, and a width it does not take.
  constexpr StemKernel kImplicit = StemKernel::kImplicitGemm;
  cases.push_back(FusedStemCase(160, 67, 80, 256, 16, 3, 2, kImplicit));
  cases.push_back(FusedStemCase(3, 67, 80, 256, 256, 3, 2, kImplicit));
  cases.push_back(FusedStemCase(2, 67, 80, 64, 64, 3, 2, kImplicit));
  cases.push_back(FusedStemCase(3, 67, 80, 512, 32, 3, 2, kImplicit));
  cases.push_back(FusedStemCase(2, 101, 80, 128, 24, 5, 3, kImplicit));
  cases.push_back(FusedStemCase(3, 30, 20, 256, 16, 3, 2, kImplicit));
  cases.push_back(FusedStemCase(1, 101, 80, 32, 48, 5, 3, kImplicit));
  // Stage-1 channels that are not a multiple of 8 take the scalar gather.
  cases.push_back(FusedStemCase(3, 40, 80, 12, 16, 3, 2));
  // Norms.
  cases.push_back(LayerNormCase(1, 256, false, false));
  cases.push_back(LayerNormCase(1000, 256, false, true));
  cases.push_back(LayerNormCase(77, 80, true, false));
  cases.push_back(LayerNormCase(5, 1024, true, true));
  // The feed-forward module: one row, both block heights with a partial last
  // block, the final norm, a row stride past d, two hidden slices.
  cases.push_back(FeedForwardCase(1, 1024, false, 0));
  cases.push_back(FeedForwardCase(77, 1024, true, 64));
  cases.push_back(FeedForwardCase(300, 1024, false, 128, 260));
  cases.push_back(FeedForwardCase(200, 128, true, 128));
  cases.push_back(FeedForwardCase(130, 256, false, 0, 264));
  // Element-wise.
  cases.push_back(ActivationCase(1, 1024, 1024, A::kSwish));
  cases.push_back(ActivationCase(300, 1000, 1024, A::kSwish));
  cases.push_back(ActivationCase(17, 96, 100, A::kRelu));
  cases.push_back(GluCase(1, 256));
  cases.push_back(GluCase(333, 96));
  cases.push_back(CastCase(1000003, true));
  cases.push_back(CastCase(4099, false));
  cases.push_back(ResidualAddCase(100001));
  // The conv module: full and short rows, both norms, odd widths and kernels.
  cases.push_back(CausalConvCase(1, 16, 256, 15, true, {16}));
  cases.push_back(CausalConvCase(5, 16, 256, 15, true, {16, 3, 16, 1, 9}));
  cases.push_back(CausalConvCase(4, 8, 96, 8, false, {8, 8, 2, 5}));
  cases.push_back(CausalConvCase(64, 16, 256, 15, false, std::vector<int32_t>(64, 16)));
  // The 16-bit fast path's other shapes: one row a block (d 512), 8 taps,
  // empty rows, a chunk of 12; d 1024 takes the general kernel.
  cases.push_back(CausalConvCase(7, 16, 512, 8, true, {16, 0, 5, 16, 15, 1, 16}));
  cases.push_back(CausalConvCase(3, 12, 256, 15, true, {12, 7, 12}));
  cases.push_back(CausalConvCase(33, 16, 128, 15, false, std::vector<int32_t>(33, 11)));
  cases.push_back(CausalConvCase(2, 16, 1024, 15, true, {16, 9}));
  // Attention: no history, one block, many blocks, a partly filled block,
  // short chunks, positions past the table, block sizes 16 and 8.
  cases.push_back(PagedAttentionCase("1 row, no history", {{0}, {16}, {0}}));
  cases.push_back(PagedAttentionCase("1 row, 1 block", {{16}, {16}, {16}}));
  cases.push_back(
      PagedAttentionCase("5 rows, mixed history and frames",
                         {{0, 64, 100, 300, 16}, {16, 16, 5, 16, 1}, {0, 64, 180, 900, 5000}}));
  {
    AttentionShape s{{64, 64, 48}, {16, 7, 16}, {64, 9000, 200}};
    s.pos_rows = 4096;  // Row 1's keys lie past the table.
    cases.push_back(PagedAttentionCase("positions past the table", s));
  }
  {
    AttentionShape s{{24, 0, 40}, {8, 8, 3}, {24, 0, 41}};
    s.chunk = 8;
    s.block_size = 8;
    s.heads = 2;
    cases.push_back(PagedAttentionCase("chunk 8, block 8, 2 heads", s));
  }
  {
    AttentionShape s;
    for (int b = 0; b < 64; ++b) {
      s.history.push_back(64);
      s.frames.push_back(16);
      s.offsets.push_back(64 + 16 * b);
    }
    cases.push_back(PagedAttentionCase("64 rows, 64 history", s));
    s.fp8_pool = true;
    cases.push_back(PagedAttentionCase("64 rows, 64 history, float8 pool", s));
  }
  {
    AttentionShape s{{0, 64, 100, 300, 16}, {16, 16, 5, 16, 1}, {0, 64, 180, 900, 5000}};
    s.fp8_pool = true;
    cases.push_back(PagedAttentionCase("5 rows, mixed history and frames, float8 pool", s));
  }
  {
    AttentionShape s{{64, 64, 48}, {16, 7, 16}, {64, 9000, 200}};
    s.fp8_pool = true;  // Row 1's keys lie past the table.
    cases.push_back(PagedAttentionCase("positions past the table, float8 pool", s));
  }
  // The CTC head.
  cases.push_back(LogSoftmaxCase(1, 258));
  cases.push_back(LogSoftmaxCase(33, 5002));
  cases.push_back(TopKCase(1, 258, 1));
  cases.push_back(TopKCase(45, 5002, 10));
  cases.push_back(TopKCase(7, 37, 37));
  return cases;
}

}  // namespace oasr::kernels::testing
