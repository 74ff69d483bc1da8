#include "kernels/decoder_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace oasr::kernels {

void EmbedTokensCpu(const EmbedParams& p) {
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* e = p.table + static_cast<int64_t>(p.tokens[r]) * p.d;
    const float* pe = p.positions + static_cast<int64_t>(p.steps[r]) * p.d;
    float* o = p.out + r * p.d;
    for (int64_t j = 0; j < p.d; ++j) o[j] = e[j] * p.scale + pe[j];
  }
}

void SpanAttentionCpu(const SpanAttentionParams& p) {
  std::vector<float> s;
  for (int64_t r = 0; r < p.rows; ++r) {
    const int64_t begin = p.key_begin[r], end = p.key_end[r];
    s.resize(static_cast<size_t>(end - begin));
    for (int h = 0; h < p.heads; ++h) {
      const float* q = p.q + r * p.ldq + static_cast<int64_t>(h) * p.dk;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = begin; j < end; ++j) {
        const float* k = p.k + j * p.ldkv + static_cast<int64_t>(h) * p.dk;
        float dot = 0.0f;
        for (int i = 0; i < p.dk; ++i) dot += q[i] * k[i];
        s[j - begin] = dot * p.scale;
        mx = std::max(mx, s[j - begin]);
      }
      float sum = 0.0f;
      for (float& x : s) sum += (x = std::exp(x - mx));
      float* o = p.out + r * p.ldo + static_cast<int64_t>(h) * p.dk;
      std::fill(o, o + p.dk, 0.0f);
      for (int64_t j = begin; j < end; ++j) {
        const float w = s[j - begin] / sum;
        const float* v = p.v + j * p.ldkv + static_cast<int64_t>(h) * p.dk;
        for (int i = 0; i < p.dk; ++i) o[i] += w * v[i];
      }
    }
  }
}

void TargetLogProbsCpu(const TargetLogProbParams& p) {
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* x = p.logits + r * p.ld;
    const float mx = *std::max_element(x, x + p.n);
    float sum = 0.0f;
    for (int64_t i = 0; i < p.n; ++i) sum += std::exp(x[i] - mx);
    p.out[r] = x[p.targets[r]] - (mx + std::log(sum));
  }
}

void CopyRowRunsCpu(const CopyRowRunsParams& p) {
  for (int64_t i = 0; i < p.num_runs; ++i) {
    const int32_t* run = p.runs + 3 * i;
    std::memcpy(p.dst + static_cast<int64_t>(run[1]) * p.width,
                p.src + static_cast<int64_t>(run[0]) * p.width,
                static_cast<size_t>(run[2]) * static_cast<size_t>(p.width) * sizeof(float));
  }
}

namespace {

absl::Status Invalid(const char* op, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what));
}

}  // namespace

absl::Status EmbedTokens(ExecutionContext& ctx, const EmbedParams& p) {
  if (p.rows == 0) return absl::OkStatus();
  if (p.table == nullptr || p.positions == nullptr || p.tokens == nullptr || p.steps == nullptr ||
      p.out == nullptr || p.rows < 0 || p.d < 1) {
    return Invalid("embed_tokens",
                   absl::StrCat("rows ", p.rows, ", d ", p.d, " (every pointer non-null, d >= 1)"));
  }
  if (!ctx.is_cuda()) {
    EmbedTokensCpu(p);
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  LaunchEmbedTokens(p, ctx.stream());
#endif
  return absl::OkStatus();
}

absl::Status SpanAttention(ExecutionContext& ctx, const SpanAttentionParams& p) {
  if (p.rows == 0) return absl::OkStatus();
  const int64_t width = static_cast<int64_t>(p.heads) * p.dk;
  if (p.q == nullptr || p.k == nullptr || p.v == nullptr || p.key_begin == nullptr ||
      p.key_end == nullptr || p.out == nullptr || p.rows < 0 || p.heads < 1 || p.dk < 1 ||
      p.ldq < width || p.ldkv < width || p.ldo < width ||
      (ctx.is_cuda() && (p.scores == nullptr || p.score_ld < 1))) {
    return Invalid("span_attention",
                   absl::StrCat("rows ", p.rows, ", heads ", p.heads, ", dk ", p.dk, ", ldq ",
                                p.ldq, ", ldkv ", p.ldkv, ", ldo ", p.ldo,
                                " (pointers non-null, strides >= heads * dk, CUDA scratch)"));
  }
  if (!ctx.is_cuda()) {
    SpanAttentionCpu(p);
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  LaunchSpanAttention(p, ctx.stream());
#endif
  return absl::OkStatus();
}

absl::Status TargetLogProbs(ExecutionContext& ctx, const TargetLogProbParams& p) {
  if (p.rows == 0) return absl::OkStatus();
  if (p.logits == nullptr || p.targets == nullptr || p.out == nullptr || p.rows < 0 || p.n < 1 ||
      p.ld < p.n) {
    return Invalid("target_log_probs", absl::StrCat("rows ", p.rows, ", n ", p.n, ", ld ", p.ld,
                                                    " (pointers non-null, ld >= n >= 1)"));
  }
  if (!ctx.is_cuda()) {
    TargetLogProbsCpu(p);
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  LaunchTargetLogProbs(p, ctx.stream());
#endif
  return absl::OkStatus();
}

absl::Status CopyRowRuns(ExecutionContext& ctx, const CopyRowRunsParams& p) {
  if (p.num_runs == 0) return absl::OkStatus();
  if (p.src == nullptr || p.dst == nullptr || p.runs == nullptr || p.num_runs < 0 || p.width < 1) {
    return Invalid("copy_row_runs", absl::StrCat("runs ", p.num_runs, ", width ", p.width,
                                                 " (pointers non-null, width >= 1)"));
  }
  if (!ctx.is_cuda()) {
    CopyRowRunsCpu(p);
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  LaunchCopyRowRuns(p, ctx.stream());
#endif
  return absl::OkStatus();
}

}  // namespace oasr::kernels
