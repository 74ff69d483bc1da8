#include "kernels/causal_conv.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu_math.h"

namespace oasr::kernels {
namespace {

void ConvRow(const CausalConvParams& p, int64_t b) {
  const int64_t d = p.d, k1 = p.kernel - 1, chunk = p.chunk;
  const int64_t frames = p.frames[b];
  float* state = static_cast<float*>(p.state) + p.slots[b] * p.state_slot_stride;
  float* out = static_cast<float*>(p.out) + b * chunk * p.ldo;
  // g: the left context then the new frames' GLU outputs, [k1 + frames, d].
  thread_local std::vector<float> g;
  g.resize(static_cast<size_t>((k1 + frames) * d));
  for (int64_t j = 0; j < k1; ++j) {
    for (int64_t c = 0; c < d; ++c) g[j * d + c] = state[j * d + c] + p.glu0[c];
  }
  for (int64_t t = 0; t < frames; ++t) {
    const float* a = static_cast<const float*>(p.in) + (b * chunk + t) * p.ld_in;
    const float* gate = a + d;
    float* dst = g.data() + (k1 + t) * d;
    for (int64_t c = 0; c < d; ++c) dst[c] = -gate[c];
    cpu::ExpVec(dst, dst, d);
    for (int64_t c = 0; c < d; ++c) dst[c] = a[c] / (1.0f + dst[c]);
  }
  for (int64_t t = 0; t < frames; ++t) {
    float* o = out + t * p.ldo;
    std::copy(p.tap_bias, p.tap_bias + d, o);
    for (int64_t j = 0; j <= k1; ++j) {
      const float* in = g.data() + (t + j) * d;
      const float* w = p.taps + j * d;
      for (int64_t c = 0; c < d; ++c) o[c] += w[c] * in[c];
    }
    if (p.layer_norm) {
      float sum = 0.0f;
      for (int64_t c = 0; c < d; ++c) sum += o[c];
      const float mean = sum / static_cast<float>(d);
      float sq = 0.0f;
      for (int64_t c = 0; c < d; ++c) {
        const float v = o[c] - mean;
        sq += v * v;
      }
      const float inv = 1.0f / std::sqrt(sq / static_cast<float>(d) + p.eps);
      for (int64_t c = 0; c < d; ++c)
        o[c] = (o[c] - mean) * inv * p.norm_scale[c] + p.norm_shift[c];
    } else {
      for (int64_t c = 0; c < d; ++c) o[c] = o[c] * p.norm_scale[c] + p.norm_shift[c];
    }
    cpu::SwishInPlace(o, d);
  }
  for (int64_t t = frames; t < chunk; ++t) std::fill(out + t * p.ldo, out + t * p.ldo + d, 0.0f);
  // The new context: the last k1 rows of g.
  for (int64_t j = 0; j < k1; ++j) {
    const float* src = g.data() + (frames + j) * d;
    for (int64_t c = 0; c < d; ++c) state[j * d + c] = src[c] - p.glu0[c];
  }
}

bool DeviceDType(DType d) {
  return d == DType::kFloat32 || d == DType::kBFloat16 || d == DType::kFloat16;
}

}  // namespace

void CausalConvCpu(const CausalConvParams& p, ThreadPool* pool) {
  if (pool == nullptr || pool->threads() == 1 || p.batch == 1) {
    for (int64_t b = 0; b < p.batch; ++b) ConvRow(p, b);
    return;
  }
  pool->ParallelFor(p.batch, [&](int64_t b) { ConvRow(p, b); });
}

absl::Status CausalConv(ExecutionContext& ctx, const CausalConvParams& p) {
  if (p.batch == 0) return absl::OkStatus();
  if (p.in == nullptr || p.out == nullptr || p.state == nullptr || p.glu0 == nullptr ||
      p.slots == nullptr || p.frames == nullptr || p.taps == nullptr || p.tap_bias == nullptr ||
      p.norm_scale == nullptr || p.norm_shift == nullptr || p.batch < 0 || p.chunk < 1 || p.d < 1 ||
      p.kernel < 1 || p.ld_in < 2 * p.d || p.ldo < p.d ||
      p.state_slot_stride < int64_t{p.kernel - 1} * p.d) {
    return absl::InvalidArgumentError(absl::StrCat(
        "causal_conv: batch ", p.batch, ", chunk ", p.chunk, ", d ", p.d, ", kernel ", p.kernel,
        ", ld_in ", p.ld_in, ", ldo ", p.ldo, ", state stride ", p.state_slot_stride,
        " (pointers non-null, ld_in >= 2d, ldo >= d, state stride >= (kernel - 1) d)"));
  }
  if (ctx.is_cuda() ? !DeviceDType(p.dtype) : p.dtype != DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat("causal_conv: dtype ", DTypeName(p.dtype),
                                                   " is not computed on ",
                                                   ctx.device().ToString()));
  }
  if (!ctx.is_cuda()) {
    CausalConvCpu(p, &ctx.threads());
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  if (p.d > 1024 || p.kernel - 1 + p.chunk > 64) {
    return absl::InvalidArgumentError(absl::StrCat("causal_conv: d ", p.d, " (at most 1024) or ",
                                                   "kernel - 1 + chunk ", p.kernel - 1 + p.chunk,
                                                   " (at most 64) too large for the CUDA kernel"));
  }
  LaunchCausalConv(p, ctx.stream());
#endif
  return absl::OkStatus();
}

}  // namespace oasr::kernels
