#include "encoder/attention_rescorer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/cpu_math.h"
#include "kernels/norm.h"
#include "kernels/rel_pos_attention.h"
#include "kernels/softmax.h"

namespace oasr::encoder {
namespace {

constexpr int64_t kLogitRows = 64;  // Output-layer rows per pass (bounds the logits buffer).

struct Norm {
  const float* scale;
  const float* shift;
};

}  // namespace

struct AttentionRescorer::Layer {
  kernels::LinearOp self_qkv, self_out, src_q, src_kv, src_out, w1, w2;
  Norm norm1, norm2, norm3;
};

struct AttentionRescorer::Direction {
  const float* embed = nullptr;  // [V, d]
  std::vector<Layer> layers;
  Norm after_norm;
  kernels::LinearOp output;
};

absl::Status RescorerOptions::Validate() const {
  if (max_frames < 1 || max_frames > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rescorer: max_frames=", max_frames, " is outside [1, 2^20]"));
  }
  if (max_rows != 0 && (max_rows < max_frames + 1 || max_rows > (int64_t{1} << 22))) {
    return absl::InvalidArgumentError(absl::StrCat("rescorer: max_rows=", max_rows,
                                                   " is neither 0 nor in [max_frames + 1 = ",
                                                   max_frames + 1, ", 2^22]"));
  }
  return absl::OkStatus();
}

AttentionRescorer::AttentionRescorer(const ConformerModel* model, ExecutionContext* ctx,
                                     const RescorerOptions& options)
    : model_(model), ctx_(ctx), options_(options) {}

AttentionRescorer::~AttentionRescorer() = default;

absl::StatusOr<std::unique_ptr<AttentionRescorer>> AttentionRescorer::Create(
    const ConformerModel* model, ExecutionContext* ctx, const RescorerOptions& options) {
  if (model == nullptr || model->attention_decoder() == nullptr) {
    return absl::FailedPreconditionError(
        "attention rescoring: the model has no attention decoder (decoder.json)");
  }
  if (ctx == nullptr || ctx->is_cuda()) {
    return absl::UnimplementedError(
        "attention rescoring computes on the CPU only for now (the context is not a CPU one)");
  }
  OASR_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<AttentionRescorer> r(new AttentionRescorer(model, ctx, options));
  OASR_RETURN_IF_ERROR(r->Init());
  return r;
}

absl::Status AttentionRescorer::PrepareDirection(const DecoderDirectionWeights& w,
                                                 Direction* out) {
  ExecutionContext& ctx = *ctx_;
  kernels::LinearOptions plain;
  kernels::LinearOptions relu;
  relu.activation = kernels::Activation::kRelu;
  auto linear = [&](const LinearWeights& lw, const kernels::LinearOptions& o)
      -> absl::StatusOr<kernels::LinearOp> {
    return kernels::LinearOp::Create(lw.weight.data<float>(), lw.bias.data<float>(),
                                     lw.weight.dim(0), lw.weight.dim(1), o, ctx);
  };
  auto norm = [](const NormWeights& n) {
    return Norm{n.scale.data<float>(), n.shift.data<float>()};
  };
  out->embed = w.embed.data<float>();
  out->layers.resize(w.layers.size());
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const DecoderLayerWeights& lw = w.layers[i];
    Layer& L = out->layers[i];
    OASR_ASSIGN_OR_RETURN(L.self_qkv, linear(lw.self_qkv, plain));
    OASR_ASSIGN_OR_RETURN(L.self_out, linear(lw.self_out, plain));
    OASR_ASSIGN_OR_RETURN(L.src_q, linear(lw.src_q, plain));
    OASR_ASSIGN_OR_RETURN(L.src_kv, linear(lw.src_kv, plain));
    OASR_ASSIGN_OR_RETURN(L.src_out, linear(lw.src_out, plain));
    OASR_ASSIGN_OR_RETURN(L.w1, linear(lw.w1, relu));
    OASR_ASSIGN_OR_RETURN(L.w2, linear(lw.w2, plain));
    L.norm1 = norm(lw.norm1);
    L.norm2 = norm(lw.norm2);
    L.norm3 = norm(lw.norm3);
  }
  out->after_norm = norm(w.after_norm);
  OASR_ASSIGN_OR_RETURN(out->output, linear(w.output, plain));
  return absl::OkStatus();
}

absl::Status AttentionRescorer::Init() {
  const AttentionDecoderModel& m = *model_->attention_decoder();
  d_ = model_->config().output_size;
  heads_ = m.config.attention_heads;
  dk_ = d_ / heads_;
  units_ = m.config.linear_units;
  vocab_ = model_->config().output_dim;
  auto left = std::make_unique<Direction>();
  OASR_RETURN_IF_ERROR(PrepareDirection(m.left, left.get()));
  directions_.push_back(std::move(left));
  if (m.config.bidirectional) {
    auto right = std::make_unique<Direction>();
    OASR_RETURN_IF_ERROR(PrepareDirection(m.right, right.get()));
    directions_.push_back(std::move(right));
  }
  const int64_t frames = options_.max_frames;
  if (options_.max_rows == 0) options_.max_rows = std::max<int64_t>(frames + 1, 512);
  const int64_t rows = options_.max_rows;
  const int64_t layers = std::max(m.config.num_blocks, m.config.r_num_blocks);
  pe_.resize(static_cast<size_t>((frames + 1) * d_));
  for (int64_t p = 0; p <= frames; ++p) {
    kernels::SinusoidRow(p, static_cast<int>(d_), pe_.data() + p * d_);
  }
  cross_kv_.resize(static_cast<size_t>(layers * frames * 2 * d_));
  x_.resize(static_cast<size_t>(rows * d_));
  y_.resize(static_cast<size_t>(rows * d_));
  qkv_.resize(static_cast<size_t>(rows * 3 * d_));
  att_.resize(static_cast<size_t>(rows * d_));
  hidden_.resize(static_cast<size_t>(rows * units_));
  logits_.resize(static_cast<size_t>(kLogitRows * vocab_));
  scores_.resize(static_cast<size_t>((frames + 1) * (frames + 1)));
  targets_.resize(static_cast<size_t>(rows));
  owner_.resize(static_cast<size_t>(rows));
  return absl::OkStatus();
}

void AttentionRescorer::Attend(const float* q, int64_t ldq, const float* k, const float* v,
                               int64_t ldkv, int64_t queries, int64_t keys, bool causal,
                               float* out) {
  // softmax(q k^T / sqrt(d_k)) v per head; with `causal`, query i sees keys
  // 0..i only (self-attention over one hypothesis).
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk_));
  float* s = scores_.data();
  for (int64_t h = 0; h < heads_; ++h) {
    kernels::cpu::GemmNT(queries, keys, dk_, scale, q + h * dk_, ldq, k + h * dk_, ldkv, 0.0f, s,
                         keys);
    if (causal) {
      for (int64_t i = 0; i < queries; ++i) {
        kernels::cpu::SoftmaxRows(s + i * keys, 1, i + 1, keys);
        std::fill(s + i * keys + i + 1, s + (i + 1) * keys, 0.0f);
      }
    } else {
      kernels::cpu::SoftmaxRows(s, queries, keys, keys);
    }
    kernels::cpu::GemmNN(queries, dk_, keys, s, keys, v + h * dk_, ldkv, 0.0f, out + h * dk_, d_);
  }
}

absl::Status AttentionRescorer::RunGroup(const Direction& dir, int64_t frames,
                                         std::span<const std::span<const int32_t>> hyps,
                                         size_t first, size_t last, bool reverse,
                                         std::span<double> out) {
  ExecutionContext& ctx = *ctx_;
  const AttentionDecoderConfig& c = config();
  const int64_t d = d_;
  const float xscale = std::sqrt(static_cast<float>(d));
  // Inputs: [sos, y...] (reversed for the right-to-left decoder); row r
  // predicts targets_[r]: the next unit, or eos after the last.
  int64_t rows = 0;
  for (size_t i = first; i < last; ++i) {
    const std::span<const int32_t> y = hyps[i];
    const int64_t n = static_cast<int64_t>(y.size());
    for (int64_t p = 0; p <= n; ++p, ++rows) {
      const int32_t token = p == 0 ? c.sos : (reverse ? y[n - p] : y[p - 1]);
      const float* e = dir.embed + static_cast<int64_t>(token) * d;
      const float* pe = pe_.data() + p * d;
      float* x = x_.data() + rows * d;
      for (int64_t j = 0; j < d; ++j) x[j] = e[j] * xscale + pe[j];
      targets_[rows] = p == n ? c.eos : (reverse ? y[n - 1 - p] : y[p]);
      owner_[rows] = static_cast<int32_t>(i);
    }
  }
  auto layer_norm = [&](const Norm& n, const float* in, float* dst) {
    kernels::LayerNormParams p;
    p.x = in;
    p.ldx = d;
    p.scale = n.scale;
    p.shift = n.shift;
    p.eps = 1e-5f;
    p.out = dst;
    p.ldo = d;
    p.rows = rows;
    p.d = d;
    return kernels::LayerNorm(ctx, p);
  };
  auto run = [&](const kernels::LinearOp& op, const float* in, int64_t ldx, float* dst,
                 int64_t ldy, int64_t m, bool accumulate) {
    kernels::LinearArgs a;
    a.x = in;
    a.ldx = ldx;
    a.y = dst;
    a.ldy = ldy;
    a.m = m;
    a.accumulate = accumulate;
    return op.Run(ctx, a);
  };
  for (size_t l = 0; l < dir.layers.size(); ++l) {
    const Layer& L = dir.layers[l];
    const float* kv = cross_kv_.data() + static_cast<int64_t>(l) * frames * 2 * d;
    // x += SelfAttn(norm1(x)), causal within each hypothesis.
    OASR_RETURN_IF_ERROR(layer_norm(L.norm1, x_.data(), y_.data()));
    OASR_RETURN_IF_ERROR(run(L.self_qkv, y_.data(), d, qkv_.data(), 3 * d, rows, false));
    int64_t base = 0;
    for (size_t i = first; i < last; ++i) {
      const int64_t n = static_cast<int64_t>(hyps[i].size()) + 1;
      const float* q = qkv_.data() + base * 3 * d;
      Attend(q, 3 * d, q + d, q + 2 * d, 3 * d, n, n, true, att_.data() + base * d);
      base += n;
    }
    OASR_RETURN_IF_ERROR(run(L.self_out, att_.data(), d, x_.data(), d, rows, true));
    // x += SrcAttn(norm2(x), memory): every frame of the segment.
    OASR_RETURN_IF_ERROR(layer_norm(L.norm2, x_.data(), y_.data()));
    OASR_RETURN_IF_ERROR(run(L.src_q, y_.data(), d, qkv_.data(), d, rows, false));
    base = 0;
    for (size_t i = first; i < last; ++i) {
      const int64_t n = static_cast<int64_t>(hyps[i].size()) + 1;
      Attend(qkv_.data() + base * d, d, kv, kv + d, 2 * d, n, frames, false, att_.data() + base * d);
      base += n;
    }
    OASR_RETURN_IF_ERROR(run(L.src_out, att_.data(), d, x_.data(), d, rows, true));
    // x += w_2(relu(w_1(norm3(x)))).
    OASR_RETURN_IF_ERROR(layer_norm(L.norm3, x_.data(), y_.data()));
    OASR_RETURN_IF_ERROR(run(L.w1, y_.data(), d, hidden_.data(), units_, rows, false));
    OASR_RETURN_IF_ERROR(run(L.w2, hidden_.data(), units_, x_.data(), d, rows, true));
  }
  OASR_RETURN_IF_ERROR(layer_norm(dir.after_norm, x_.data(), y_.data()));
  for (int64_t r0 = 0; r0 < rows; r0 += kLogitRows) {
    const int64_t m = std::min(kLogitRows, rows - r0);
    OASR_RETURN_IF_ERROR(run(dir.output, y_.data() + r0 * d, d, logits_.data(), vocab_, m, false));
    kernels::LogSoftmaxParams ls;
    ls.x = logits_.data();
    ls.rows = m;
    ls.n = vocab_;
    ls.ld = vocab_;
    OASR_RETURN_IF_ERROR(kernels::LogSoftmax(ctx, ls));
    for (int64_t r = 0; r < m; ++r) {
      out[owner_[r0 + r]] += logits_[static_cast<size_t>(r * vocab_ + targets_[r0 + r])];
    }
  }
  return absl::OkStatus();
}

absl::Status AttentionRescorer::Score(const float* memory, int64_t frames,
                                      std::span<const std::span<const int32_t>> hyps,
                                      std::span<double> left, std::span<double> right) {
  if (frames < 1 || frames > options_.max_frames || memory == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("rescoring: ", frames,
                                                   " encoder frames (this rescorer takes 1 to ",
                                                   options_.max_frames, ")"));
  }
  if (left.size() != hyps.size() || (!right.empty() && right.size() != hyps.size())) {
    return absl::InvalidArgumentError(absl::StrCat("rescoring: ", hyps.size(),
                                                   " hypotheses but ", left.size(), " / ",
                                                   right.size(), " score slots"));
  }
  if (!right.empty() && directions_.size() < 2) {
    return absl::InvalidArgumentError(
        "rescoring: right-to-left scores asked of a decoder without right-to-left blocks");
  }
  for (size_t i = 0; i < hyps.size(); ++i) {
    if (static_cast<int64_t>(hyps[i].size()) > options_.max_frames) {
      return absl::InvalidArgumentError(absl::StrCat("rescoring: hypothesis ", i, " has ",
                                                     hyps[i].size(), " units (at most ",
                                                     options_.max_frames, ")"));
    }
    for (int32_t u : hyps[i]) {
      if (u < 0 || u >= vocab_) {
        return absl::InvalidArgumentError(
            absl::StrCat("rescoring: hypothesis ", i, " has unit ", u, " outside [0, ", vocab_,
                         ")"));
      }
    }
  }
  const int64_t d = d_;
  for (size_t side = 0; side < (right.empty() ? 1u : 2u); ++side) {
    const Direction& dir = *directions_[side];
    std::span<double> out = side == 0 ? left : right;
    std::fill(out.begin(), out.end(), 0.0);
    // The segment's cross-attention K and V, once per layer for every group.
    for (size_t l = 0; l < dir.layers.size(); ++l) {
      kernels::LinearArgs a;
      a.x = memory;
      a.ldx = d;
      a.y = cross_kv_.data() + static_cast<int64_t>(l) * frames * 2 * d;
      a.ldy = 2 * d;
      a.m = frames;
      OASR_RETURN_IF_ERROR(dir.layers[l].src_kv.Run(*ctx_, a));
    }
    size_t first = 0;
    while (first < hyps.size()) {
      size_t last = first;
      int64_t rows = 0;
      while (last < hyps.size() &&
             rows + static_cast<int64_t>(hyps[last].size()) + 1 <= options_.max_rows) {
        rows += static_cast<int64_t>(hyps[last].size()) + 1;
        ++last;
      }
      OASR_RETURN_IF_ERROR(RunGroup(dir, frames, hyps, first, last, side == 1, out));
      first = last;
    }
  }
  return absl::OkStatus();
}

}  // namespace oasr::encoder
