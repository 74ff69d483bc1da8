#include "encoder/attention_rescorer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/activation.h"
#include "kernels/cpu_math.h"
#include "kernels/decoder_ops.h"
#include "kernels/norm.h"
#include "kernels/rel_pos_attention.h"
#include "kernels/softmax.h"

namespace oasr::encoder {
namespace {

// Output-layer rows per pass (they bound the logits buffer).
constexpr int64_t kCpuLogitRows = 64;
constexpr int64_t kCudaLogitRows = 2048;

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
  const float* embed = nullptr;  // [V, d] on the context's device
  std::vector<Layer> layers;
  Norm after_norm;
  kernels::LinearOp output;
};

absl::Status RescorerOptions::Validate() const {
  if (max_frames < 1 || max_frames > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rescorer: max_frames=", max_frames, " is outside [1, 2^20]"));
  }
  if (max_batch_frames != 0 &&
      (max_batch_frames < max_frames || max_batch_frames > (int64_t{1} << 24))) {
    return absl::InvalidArgumentError(
        absl::StrCat("rescorer: max_batch_frames=", max_batch_frames,
                     " is neither 0 nor in [max_frames = ", max_frames, ", 2^24]"));
  }
  if (max_rows != 0 && (max_rows < max_frames + 1 || max_rows > (int64_t{1} << 22))) {
    return absl::InvalidArgumentError(
        absl::StrCat("rescorer: max_rows=", max_rows,
                     " is neither 0 nor in [max_frames + 1 = ", max_frames + 1, ", 2^22]"));
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
  if (ctx == nullptr) return absl::InvalidArgumentError("attention rescoring: no context");
  if (options.dtype != DType::kFloat32 && (!ctx->is_cuda() || (options.dtype != DType::kBFloat16 &&
                                                               options.dtype != DType::kFloat16))) {
    return absl::InvalidArgumentError(
        absl::StrCat("rescorer: dtype ", DTypeName(options.dtype), " on ", ctx->Describe(),
                     " (float32 everywhere; bfloat16 or float16 on CUDA)"));
  }
  OASR_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<AttentionRescorer> r(new AttentionRescorer(model, ctx, options));
  OASR_RETURN_IF_ERROR(r->Init());
  return r;
}

absl::Status AttentionRescorer::PrepareDirection(const DecoderDirectionWeights& w, Direction* out) {
  ExecutionContext& ctx = *ctx_;
  kernels::LinearOptions plain;
  plain.dtype = options_.dtype;
  kernels::LinearOptions relu = plain;
  relu.activation = kernels::Activation::kRelu;
  auto linear = [&](const LinearWeights& lw,
                    const kernels::LinearOptions& o) -> absl::StatusOr<kernels::LinearOp> {
    return kernels::LinearOp::Create(lw.weight.data<float>(), lw.bias.data<float>(),
                                     lw.weight.dim(0), lw.weight.dim(1), o, ctx);
  };
  auto norm = [&](const NormWeights& n) -> absl::StatusOr<Norm> {
    OASR_ASSIGN_OR_RETURN(const float* scale, OnDevice(n.scale.data<float>(), n.scale.numel()));
    OASR_ASSIGN_OR_RETURN(const float* shift, OnDevice(n.shift.data<float>(), n.shift.numel()));
    return Norm{scale, shift};
  };
  OASR_ASSIGN_OR_RETURN(out->embed, OnDevice(w.embed.data<float>(), w.embed.numel()));
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
    OASR_ASSIGN_OR_RETURN(L.norm1, norm(lw.norm1));
    OASR_ASSIGN_OR_RETURN(L.norm2, norm(lw.norm2));
    OASR_ASSIGN_OR_RETURN(L.norm3, norm(lw.norm3));
  }
  OASR_ASSIGN_OR_RETURN(out->after_norm, norm(w.after_norm));
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
  if (options_.max_batch_frames == 0) options_.max_batch_frames = frames;
  const int64_t rows = options_.max_rows;
  const int64_t layers = std::max(m.config.num_blocks, m.config.r_num_blocks);
  const bool cuda = ctx_->is_cuda();
  {
    std::vector<float> pe(static_cast<size_t>((frames + 1) * d_));
    for (int64_t p = 0; p <= frames; ++p) {
      kernels::SinusoidRow(p, static_cast<int>(d_), pe.data() + p * d_);
    }
    OASR_ASSIGN_OR_RETURN(pe_, Buffer({frames + 1, d_}));
    OASR_RETURN_IF_ERROR(
        CopyTensor(pe_.view(), TensorView(pe.data(), DType::kFloat32, pe_.shape(), Device::Cpu())));
  }
  logit_rows_ = std::min(rows, cuda ? kCudaLogitRows : kCpuLogitRows);
  OASR_ASSIGN_OR_RETURN(cross_kv_, Buffer({layers, options_.max_batch_frames, 2 * d_}));
  OASR_ASSIGN_OR_RETURN(x_, Buffer({rows, d_}));
  const DType lo = options_.dtype;
  OASR_ASSIGN_OR_RETURN(y_, Buffer({rows, d_}, lo));
  OASR_ASSIGN_OR_RETURN(qkv_, Buffer({rows, 3 * d_}));
  OASR_ASSIGN_OR_RETURN(att_, Buffer({rows, d_}));
  OASR_ASSIGN_OR_RETURN(hidden_, Buffer({rows, units_}, lo));
  if (lo != DType::kFloat32) {
    OASR_ASSIGN_OR_RETURN(att_lo_, Buffer({rows, d_}, lo));
    OASR_ASSIGN_OR_RETURN(memory_lo_, Buffer({options_.max_batch_frames, d_}, lo));
  }
  OASR_ASSIGN_OR_RETURN(logits_, Buffer({logit_rows_, vocab_}));
  OASR_ASSIGN_OR_RETURN(
      scores_, cuda ? Buffer({rows * heads_, frames + 1}) : Buffer({frames + 1, frames + 1}));
  OASR_ASSIGN_OR_RETURN(row_log_probs_, Buffer({rows}));
  index_.resize(static_cast<size_t>(kIndices * rows));
  if (cuda) {
    OASR_ASSIGN_OR_RETURN(index_device_, Buffer({kIndices, rows}, DType::kInt32));
  }
  owner_.resize(static_cast<size_t>(rows));
  row_log_probs_host_.resize(static_cast<size_t>(rows));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> AttentionRescorer::Buffer(const Shape& shape, DType dtype) const {
  return Tensor::Empty(shape, dtype, ctx_->device());
}

absl::StatusOr<const float*> AttentionRescorer::OnDevice(const float* host, int64_t n) {
  if (!ctx_->is_cuda()) return host;
  OASR_ASSIGN_OR_RETURN(Tensor t, Buffer({n}));
  OASR_RETURN_IF_ERROR(CopyTensor(
      t.view(), TensorView(const_cast<float*>(host), DType::kFloat32, {n}, Device::Cpu())));
  device_weights_.push_back(std::move(t));
  return device_weights_.back().data<float>();
}

void AttentionRescorer::Attend(const float* q, int64_t ldq, const float* k, const float* v,
                               int64_t ldkv, int64_t queries, int64_t keys, bool causal,
                               float* out) {
  // softmax(q k^T / sqrt(d_k)) v per head; with `causal`, query i sees keys
  // 0..i only (self-attention over one hypothesis).
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk_));
  float* s = scores_.data<float>();
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

absl::Status AttentionRescorer::RunGroup(const Direction& dir,
                                         std::span<const RescoreSegment> segments,
                                         std::span<const Item> items, bool reverse) {
  ExecutionContext& ctx = *ctx_;
  const bool cuda = ctx.is_cuda();
  const AttentionDecoderConfig& c = config();
  const int64_t d = d_;
  const int64_t max_rows = options_.max_rows;
  // Inputs: [sos, y...] (reversed for the right-to-left decoder); row r
  // predicts the next unit, or eos after the last.
  int32_t* index = index_.data();
  auto at = [&](Index i) { return index + i * max_rows; };
  int64_t rows = 0;
  for (const Item& item : items) {
    const RescoreSegment& seg = segments[item.segment];
    const std::span<const int32_t> y = seg.hyps[item.hyp];
    const int64_t n = static_cast<int64_t>(y.size());
    const auto begin = static_cast<int32_t>(rows);
    for (int64_t p = 0; p <= n; ++p, ++rows) {
      at(kTokens)[rows] = p == 0 ? c.sos : (reverse ? y[n - p] : y[p - 1]);
      at(kSteps)[rows] = static_cast<int32_t>(p);
      at(kTargets)[rows] = p == n ? c.eos : (reverse ? y[n - 1 - p] : y[p]);
      at(kSelfBegin)[rows] = begin;
      at(kSelfEnd)[rows] = static_cast<int32_t>(rows + 1);
      at(kCrossBegin)[rows] = static_cast<int32_t>(seg.first_frame);
      at(kCrossEnd)[rows] = static_cast<int32_t>(seg.first_frame + seg.frames);
      owner_[rows] = item;
    }
  }
  // The ops read the indices where they compute.
  const int32_t* dev = index;
  if (cuda) {
    OASR_RETURN_IF_ERROR(CopyTensorAsync(
        index_device_.view(),
        TensorView(index, DType::kInt32, index_device_.shape(), Device::Cpu()), ctx.stream()));
    dev = index_device_.data<int32_t>();
  }
  auto dev_at = [&](Index i) { return dev + i * max_rows; };
  const DType lo = options_.dtype;
  const size_t lo_size = DTypeSize(lo);
  float* x = x_.data<float>();
  void* y = y_.data();  // In lo.
  float* qkv = qkv_.data<float>();
  float* att = att_.data<float>();
  {
    kernels::EmbedParams e;
    e.table = dir.embed;
    e.positions = pe_.data<float>();
    e.tokens = dev_at(kTokens);
    e.steps = dev_at(kSteps);
    e.scale = std::sqrt(static_cast<float>(d));
    e.out = x;
    e.rows = rows;
    e.d = d;
    OASR_RETURN_IF_ERROR(kernels::EmbedTokens(ctx, e));
  }
  // The attention's output as the next linear reads it.
  const void* att_in =
      lo == DType::kFloat32 ? static_cast<const void*>(att_.data()) : att_lo_.data();
  auto to_lo = [&]() -> absl::Status {
    if (lo == DType::kFloat32) return absl::OkStatus();
    kernels::CastParams c;
    c.in = att_.data();
    c.out = att_lo_.data();
    c.out_dtype = lo;
    c.n = rows * d;
    return kernels::Cast(ctx, c);
  };
  auto layer_norm = [&](const Norm& n, const float* in, void* dst) {
    kernels::LayerNormParams p;
    p.x = in;
    p.ldx = d;
    p.scale = n.scale;
    p.shift = n.shift;
    p.eps = 1e-5f;
    p.out = dst;
    p.out_dtype = lo;
    p.ldo = d;
    p.rows = rows;
    p.d = d;
    return kernels::LayerNorm(ctx, p);
  };
  auto run = [&](const kernels::LinearOp& op, const void* in, int64_t ldx, void* dst, int64_t ldy,
                 int64_t m, bool accumulate, DType y_dtype = DType::kFloat32) {
    kernels::LinearArgs a;
    a.x = in;
    a.ldx = ldx;
    a.y = dst;
    a.ldy = ldy;
    a.y_dtype = y_dtype;
    a.m = m;
    a.accumulate = accumulate;
    return op.Run(ctx, a);
  };
  // Attention of every row over its span: on CUDA one launch for the group;
  // on the CPU per hypothesis and head through the GEMMs.
  auto attend = [&](const float* q, int64_t ldq, const float* k, const float* v, int64_t ldkv,
                    bool self) -> absl::Status {
    if (cuda) {
      kernels::SpanAttentionParams p;
      p.q = q;
      p.ldq = ldq;
      p.k = k;
      p.v = v;
      p.ldkv = ldkv;
      p.key_begin = dev_at(self ? kSelfBegin : kCrossBegin);
      p.key_end = dev_at(self ? kSelfEnd : kCrossEnd);
      p.out = att;
      p.ldo = d;
      p.rows = rows;
      p.heads = static_cast<int>(heads_);
      p.dk = static_cast<int>(dk_);
      p.scale = 1.0f / std::sqrt(static_cast<float>(dk_));
      p.scores = scores_.data<float>();
      p.score_ld = scores_.dim(1);
      return kernels::SpanAttention(ctx, p);
    }
    int64_t base = 0;
    for (const Item& item : items) {
      const RescoreSegment& seg = segments[item.segment];
      const int64_t n = static_cast<int64_t>(seg.hyps[item.hyp].size()) + 1;
      if (self) {
        Attend(q + base * ldq, ldq, k + base * ldkv, v + base * ldkv, ldkv, n, n, true,
               att + base * d);
      } else {
        const int64_t f = seg.first_frame * ldkv;
        Attend(q + base * ldq, ldq, k + f, v + f, ldkv, n, seg.frames, false, att + base * d);
      }
      base += n;
    }
    return absl::OkStatus();
  };
  for (size_t l = 0; l < dir.layers.size(); ++l) {
    const Layer& L = dir.layers[l];
    const float* kv =
        cross_kv_.data<float>() + static_cast<int64_t>(l) * options_.max_batch_frames * 2 * d;
    // x += SelfAttn(norm1(x)), causal within each hypothesis.
    OASR_RETURN_IF_ERROR(layer_norm(L.norm1, x, y));
    OASR_RETURN_IF_ERROR(run(L.self_qkv, y, d, qkv, 3 * d, rows, false));
    OASR_RETURN_IF_ERROR(attend(qkv, 3 * d, qkv + d, qkv + 2 * d, 3 * d, true));
    OASR_RETURN_IF_ERROR(to_lo());
    OASR_RETURN_IF_ERROR(run(L.self_out, att_in, d, x, d, rows, true));
    // x += SrcAttn(norm2(x), memory): every frame of the segment.
    OASR_RETURN_IF_ERROR(layer_norm(L.norm2, x, y));
    OASR_RETURN_IF_ERROR(run(L.src_q, y, d, qkv, d, rows, false));
    OASR_RETURN_IF_ERROR(attend(qkv, d, kv, kv + d, 2 * d, false));
    OASR_RETURN_IF_ERROR(to_lo());
    OASR_RETURN_IF_ERROR(run(L.src_out, att_in, d, x, d, rows, true));
    // x += w_2(relu(w_1(norm3(x)))).
    OASR_RETURN_IF_ERROR(layer_norm(L.norm3, x, y));
    OASR_RETURN_IF_ERROR(run(L.w1, y, d, hidden_.data(), units_, rows, false, lo));
    OASR_RETURN_IF_ERROR(run(L.w2, hidden_.data(), units_, x, d, rows, true));
  }
  OASR_RETURN_IF_ERROR(layer_norm(dir.after_norm, x, y));
  // Each row's log-probability of its target, logit_rows_ rows a pass.
  float* lp = row_log_probs_.data<float>();
  for (int64_t r0 = 0; r0 < rows; r0 += logit_rows_) {
    const int64_t m = std::min(logit_rows_, rows - r0);
    const void* y_rows = static_cast<const char*>(y) + static_cast<size_t>(r0 * d) * lo_size;
    OASR_RETURN_IF_ERROR(run(dir.output, y_rows, d, logits_.data<float>(), vocab_, m, false));
    kernels::TargetLogProbParams t;
    t.logits = logits_.data<float>();
    t.ld = vocab_;
    t.rows = m;
    t.n = vocab_;
    t.targets = dev_at(kTargets) + r0;
    t.out = lp + r0;
    OASR_RETURN_IF_ERROR(kernels::TargetLogProbs(ctx, t));
  }
  const float* host_lp = lp;
  if (cuda) {
    OASR_RETURN_IF_ERROR(CopyTensorAsync(
        TensorView(row_log_probs_host_.data(), DType::kFloat32, {rows}, Device::Cpu()),
        TensorView(lp, DType::kFloat32, {rows}, ctx.device()), ctx.stream()));
    OASR_RETURN_IF_ERROR(ctx.Synchronize());
    host_lp = row_log_probs_host_.data();
  }
  for (int64_t r = 0; r < rows; ++r) {
    const RescoreSegment& seg = segments[owner_[r].segment];
    (reverse ? seg.right : seg.left)[owner_[r].hyp] += host_lp[r];
  }
  return absl::OkStatus();
}

absl::Status AttentionRescorer::Score(const float* memory, int64_t frames,
                                      std::span<const std::span<const int32_t>> hyps,
                                      std::span<double> left, std::span<double> right) {
  RescoreSegment segment;
  segment.frames = frames;
  segment.hyps = hyps;
  segment.left = left;
  segment.right = right;
  return ScoreSegments(memory, frames, {&segment, 1});
}

absl::Status AttentionRescorer::ScoreSegments(const float* memory, int64_t total_frames,
                                              std::span<const RescoreSegment> segments) {
  if (memory == nullptr || total_frames < 1 || total_frames > options_.max_batch_frames) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rescoring: ", total_frames, " encoder frames in all (this rescorer takes 1 to ",
        options_.max_batch_frames, " a call)"));
  }
  bool any_right = false;
  for (size_t s = 0; s < segments.size(); ++s) {
    const RescoreSegment& seg = segments[s];
    if (seg.frames < 1 || seg.frames > options_.max_frames) {
      return absl::InvalidArgumentError(absl::StrCat("rescoring: ", seg.frames,
                                                     " encoder frames (this rescorer takes 1 to ",
                                                     options_.max_frames, ")"));
    }
    if (seg.first_frame < 0 || seg.first_frame + seg.frames > total_frames) {
      return absl::InvalidArgumentError(
          absl::StrCat("rescoring: segment ", s, " at frames [", seg.first_frame, ", ",
                       seg.first_frame + seg.frames, ") is outside the memory's ", total_frames));
    }
    const size_t n = seg.hyps.size();
    if (seg.left.size() != n || (!seg.right.empty() && seg.right.size() != n)) {
      return absl::InvalidArgumentError(absl::StrCat("rescoring: ", n, " hypotheses but ",
                                                     seg.left.size(), " / ", seg.right.size(),
                                                     " score slots"));
    }
    if (!seg.right.empty() && directions_.size() < 2) {
      return absl::InvalidArgumentError(
          "rescoring: right-to-left scores asked of a decoder without right-to-left blocks");
    }
    any_right = any_right || !seg.right.empty();
    for (size_t i = 0; i < n; ++i) {
      if (static_cast<int64_t>(seg.hyps[i].size()) > options_.max_frames) {
        return absl::InvalidArgumentError(absl::StrCat("rescoring: hypothesis ", i, " has ",
                                                       seg.hyps[i].size(), " units (at most ",
                                                       options_.max_frames, ")"));
      }
      for (int32_t u : seg.hyps[i]) {
        if (u < 0 || u >= vocab_) {
          return absl::InvalidArgumentError(absl::StrCat("rescoring: hypothesis ", i, " has unit ",
                                                         u, " outside [0, ", vocab_, ")"));
        }
      }
    }
  }
  const int64_t d = d_;
  // The memory as the linears read it.
  const void* memory_in = memory;
  if (options_.dtype != DType::kFloat32) {
    kernels::CastParams c;
    c.in = memory;
    c.out = memory_lo_.data();
    c.out_dtype = options_.dtype;
    c.n = total_frames * d;
    OASR_RETURN_IF_ERROR(kernels::Cast(*ctx_, c));
    memory_in = memory_lo_.data();
  }
  for (size_t side = 0; side < (any_right ? 2u : 1u); ++side) {
    const Direction& dir = *directions_[side];
    items_.clear();
    for (size_t s = 0; s < segments.size(); ++s) {
      std::span<double> out = side == 0 ? segments[s].left : segments[s].right;
      std::fill(out.begin(), out.end(), 0.0);
      for (size_t i = 0; i < out.size(); ++i) {
        items_.push_back({static_cast<uint32_t>(s), static_cast<uint32_t>(i)});
      }
    }
    // The segments' cross-attention K and V, once per layer for every group.
    for (size_t l = 0; l < dir.layers.size(); ++l) {
      kernels::LinearArgs a;
      a.x = memory_in;
      a.ldx = d;
      a.y = cross_kv_.data<float>() + static_cast<int64_t>(l) * options_.max_batch_frames * 2 * d;
      a.ldy = 2 * d;
      a.m = total_frames;
      OASR_RETURN_IF_ERROR(dir.layers[l].src_kv.Run(*ctx_, a));
    }
    size_t first = 0;
    while (first < items_.size()) {
      size_t last = first;
      int64_t rows = 0;
      auto length = [&](size_t k) {
        const Item& it = items_[k];
        return static_cast<int64_t>(segments[it.segment].hyps[it.hyp].size()) + 1;
      };
      while (last < items_.size() && rows + length(last) <= options_.max_rows) {
        rows += length(last);
        ++last;
      }
      OASR_RETURN_IF_ERROR(
          RunGroup(dir, segments, {items_.data() + first, last - first}, side == 1));
      first = last;
    }
  }
  return absl::OkStatus();
}

}  // namespace oasr::encoder
