#include "encoder/conformer_encoder.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/half.h"
#include "common/status.h"
#include "kernels/activation.h"
#include "kernels/causal_conv.h"
#include "kernels/cpu_math.h"
#include "kernels/feed_forward.h"
#include "kernels/norm.h"
#include "kernels/rel_pos_attention.h"
#include "kernels/softmax.h"

namespace oasr::encoder {

using kernels::Activation;
using kernels::LinearArgs;
using kernels::LinearOp;
using kernels::LinearOptions;

struct Norm {
  const float* scale = nullptr;
  const float* shift = nullptr;
};

struct ConformerEncoder::Layer {
  LinearOp ff_macaron_w1, ff_macaron_w2, ff_w1, ff_w2, qkv, attn_out, pointwise_conv1,
      pointwise_conv2;
  // Set (and the four ff LinearOps left empty) when the feed-forward modules
  // run fused (EncoderOptions::fused_feed_forward).
  std::optional<kernels::FeedForwardOp> fused_ff_macaron, fused_ff;
  Norm norm_ff_macaron, norm_mha, norm_conv, norm_ff, norm_final, conv_norm;
  const float* pos_bias_u = nullptr;
  const float* pos_bias_v = nullptr;
  const float* linear_pos = nullptr;
  const float* taps = nullptr;              // [K, d]
  const float* tap_bias = nullptr;          // [d]
  const float* glu0 = nullptr;              // [d]
  std::vector<float> host_taps, host_glu0;  // Backing for the CPU pointers.
};

constexpr size_t kMaxSubsamplingStages = 4;  // conv2d8 has three.

struct ConformerEncoder::Buffers {
  float* x = nullptr;        // [M, d] float32: the residual stream.
  void* h = nullptr;         // [M, d]: norm outputs.
  void* hidden = nullptr;    // [M, units]
  void* qkv = nullptr;       // [M, 3d]
  void* attn = nullptr;      // [M, d]
  void* conv_mid = nullptr;  // [M, 2d]
  void* conv_out = nullptr;  // [M, d]
  // Each subsampling stage's output [B, h_i, w_i, d] (a fixed array: the
  // forward allocates nothing on the heap).
  std::array<void*, kMaxSubsamplingStages> sub{};
  bool ok = false;
};

absl::Status EncoderOptions::Validate() const {
  if (dtype != DType::kFloat32 && dtype != DType::kBFloat16 && dtype != DType::kFloat16) {
    return absl::InvalidArgumentError(absl::StrCat("EncoderOptions.dtype=", DTypeName(dtype),
                                                   " is not one of float32, bfloat16, float16"));
  }
  if (max_table_positions < RelPositionTable::kBlockRows || max_table_positions > (1 << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("EncoderOptions.max_table_positions=", max_table_positions, " is outside [",
                     RelPositionTable::kBlockRows, ", 2^24]"));
  }
  return absl::OkStatus();
}

ConformerEncoder::ConformerEncoder(const ConformerModel* model, ExecutionContext* ctx,
                                   const EncoderOptions& options)
    : model_(model), ctx_(ctx), options_(options) {}

ConformerEncoder::~ConformerEncoder() = default;

absl::StatusOr<std::unique_ptr<ConformerEncoder>> ConformerEncoder::Create(
    const ConformerModel* model, ExecutionContext* ctx, const EncoderOptions& options) {
  if (model == nullptr || ctx == nullptr) {
    return absl::InvalidArgumentError("ConformerEncoder: model and context are required");
  }
  OASR_RETURN_IF_ERROR(options.Validate());
  if (ctx->device().is_cpu() && options.dtype != DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ConformerEncoder: the CPU computes in float32, not ", DTypeName(options.dtype)));
  }
  if (options.kv_fp8 && ctx->is_cuda() &&
      (options.dtype == DType::kFloat32 || model->config().head_dim() % 16 != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConformerEncoder: a float8 K/V pool on CUDA needs a 16-bit dtype (got ",
                     DTypeName(options.dtype), ") and head dims a multiple of 16 (got ",
                     model->config().head_dim(), ")"));
  }
  std::unique_ptr<ConformerEncoder> encoder(new ConformerEncoder(model, ctx, options));
  OASR_RETURN_IF_ERROR(encoder->Init());
  return encoder;
}

absl::StatusOr<const float*> ConformerEncoder::Upload(const float* host, int64_t n) {
  if (!ctx_->is_cuda()) return host;
  OASR_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty({n}, DType::kFloat32, ctx_->device()));
  OASR_RETURN_IF_ERROR(CopyTensor(
      t.view(), TensorView(const_cast<float*>(host), DType::kFloat32, {n}, Device::Cpu())));
  const float* p = t.data<float>();
  device_tensors_.push_back(std::move(t));
  return p;
}

absl::Status ConformerEncoder::Init() {
  const ModelConfig& c = config();
  const ConformerWeights& w = model_->weights();
  const int64_t d = c.output_size, k = c.cnn_module_kernel;
  kernels::cpu::SetBlasThreads(ctx_->threads().threads());

  auto linear = [&](const LinearWeights& lw, float scale,
                    Activation act) -> absl::StatusOr<LinearOp> {
    LinearOptions o;
    o.dtype = options_.dtype;
    o.scale = scale;
    o.activation = act;
    o.gemm = options_.gemm;
    return LinearOp::Create(lw.weight.data<float>(),
                            lw.bias.empty() ? nullptr : lw.bias.data<float>(), lw.weight.dim(0),
                            lw.weight.dim(1), o, *ctx_);
  };
  auto norm = [&](const NormWeights& n) -> absl::StatusOr<Norm> {
    Norm out;
    OASR_ASSIGN_OR_RETURN(out.scale, Upload(n.scale.data<float>(), n.scale.numel()));
    OASR_ASSIGN_OR_RETURN(out.shift, Upload(n.shift.data<float>(), n.shift.numel()));
    return out;
  };

  if (w.conv_kernel.size() > kMaxSubsamplingStages) {
    return absl::InvalidArgumentError(absl::StrCat("ConformerEncoder: ", w.conv_kernel.size(),
                                                   " subsampling stages, at most ",
                                                   kMaxSubsamplingStages));
  }
  for (size_t i = 0; i < w.conv_kernel.size(); ++i) {
    kernels::Conv2dOptions o;
    o.in_channels = i == 0 ? 1 : static_cast<int>(d);
    o.out_channels = static_cast<int>(d);
    o.kernel = w.conv_kernel[i];
    o.stride = w.conv_stride[i];
    o.dtype = options_.dtype;
    OASR_ASSIGN_OR_RETURN(kernels::Conv2dOp conv,
                          kernels::Conv2dOp::Create(w.conv_weight[i].data<float>(),
                                                    w.conv_bias[i].data<float>(), o, *ctx_));
    subsampling_.push_back(std::move(conv));
  }
  // On CUDA the one-channel first stage runs inside the second's patch
  // gather: its activation never reaches memory.
  if (ctx_->is_cuda() && subsampling_.size() >= 2 && w.conv_kernel[0] == 3) {
    OASR_RETURN_IF_ERROR(
        subsampling_[1].FuseFirstStage(w.conv_weight[0].data<float>(), w.conv_bias[0].data<float>(),
                                       subsampling_[0].options(), *ctx_, options_.stem));
    first_stage_ = 1;
  }
  OASR_ASSIGN_OR_RETURN(embed_out_,
                        linear(w.embed_out, std::sqrt(static_cast<float>(d)), Activation::kNone));
  OASR_ASSIGN_OR_RETURN(ctc_, linear(w.ctc, 1.0f, Activation::kNone));
  OASR_ASSIGN_OR_RETURN(Norm after, norm(w.after_norm));
  after_norm_scale_ = after.scale;
  after_norm_shift_ = after.shift;

  const int64_t units = c.linear_units;
  const bool fused_ff = options_.fused_feed_forward && ctx_->is_cuda() &&
                        kernels::FeedForwardOp::Supported(*ctx_, options_.dtype, d, units);
  layers_.resize(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const ConformerLayerWeights& lw = w.layers[l];
    Layer& L = layers_[l];
    if (fused_ff) {
      auto fused = [&](const LinearWeights& w1,
                       const LinearWeights& w2) -> absl::StatusOr<kernels::FeedForwardOp> {
        return kernels::FeedForwardOp::Create(
            w1.weight.data<float>(), w1.bias.empty() ? nullptr : w1.bias.data<float>(),
            w2.weight.data<float>(), w2.bias.empty() ? nullptr : w2.bias.data<float>(), d, units,
            0.5f, options_.dtype, *ctx_);
      };
      OASR_ASSIGN_OR_RETURN(L.fused_ff_macaron, fused(lw.ff_macaron_w1, lw.ff_macaron_w2));
      OASR_ASSIGN_OR_RETURN(L.fused_ff, fused(lw.ff_w1, lw.ff_w2));
    } else {
      OASR_ASSIGN_OR_RETURN(L.ff_macaron_w1, linear(lw.ff_macaron_w1, 1.0f, Activation::kSwish));
      OASR_ASSIGN_OR_RETURN(L.ff_macaron_w2, linear(lw.ff_macaron_w2, 0.5f, Activation::kNone));
      OASR_ASSIGN_OR_RETURN(L.ff_w1, linear(lw.ff_w1, 1.0f, Activation::kSwish));
      OASR_ASSIGN_OR_RETURN(L.ff_w2, linear(lw.ff_w2, 0.5f, Activation::kNone));
    }
    OASR_ASSIGN_OR_RETURN(L.qkv, linear(lw.qkv, 1.0f, Activation::kNone));
    OASR_ASSIGN_OR_RETURN(L.attn_out, linear(lw.attn_out, 1.0f, Activation::kNone));
    OASR_ASSIGN_OR_RETURN(L.pointwise_conv1, linear(lw.pointwise_conv1, 1.0f, Activation::kNone));
    OASR_ASSIGN_OR_RETURN(L.pointwise_conv2, linear(lw.pointwise_conv2, 1.0f, Activation::kNone));
    OASR_ASSIGN_OR_RETURN(L.norm_ff_macaron, norm(lw.norm_ff_macaron));
    OASR_ASSIGN_OR_RETURN(L.norm_mha, norm(lw.norm_mha));
    OASR_ASSIGN_OR_RETURN(L.norm_conv, norm(lw.norm_conv));
    OASR_ASSIGN_OR_RETURN(L.norm_ff, norm(lw.norm_ff));
    OASR_ASSIGN_OR_RETURN(L.norm_final, norm(lw.norm_final));
    OASR_ASSIGN_OR_RETURN(L.conv_norm, norm(lw.conv_norm));
    OASR_ASSIGN_OR_RETURN(L.pos_bias_u, Upload(lw.pos_bias_u.data<float>(), lw.pos_bias_u.numel()));
    OASR_ASSIGN_OR_RETURN(L.pos_bias_v, Upload(lw.pos_bias_v.data<float>(), lw.pos_bias_v.numel()));
    OASR_ASSIGN_OR_RETURN(L.linear_pos, Upload(lw.linear_pos.data<float>(), lw.linear_pos.numel()));
    L.host_taps.resize(static_cast<size_t>(k * d));
    const float* dw = lw.depthwise_weight.data<float>();
    for (int64_t ch = 0; ch < d; ++ch) {
      for (int64_t j = 0; j < k; ++j) L.host_taps[j * d + ch] = dw[ch * k + j];
    }
    OASR_ASSIGN_OR_RETURN(L.taps, Upload(L.host_taps.data(), k * d));
    OASR_ASSIGN_OR_RETURN(L.tap_bias, Upload(lw.depthwise_bias.data<float>(), d));
    // GLU of pointwise_conv1's bias: what WeNet's zero left padding becomes.
    L.host_glu0.assign(static_cast<size_t>(d), 0.0f);
    if (!lw.pointwise_conv1.bias.empty()) {
      const float* b1 = lw.pointwise_conv1.bias.data<float>();
      for (int64_t ch = 0; ch < d; ++ch) {
        L.host_glu0[ch] = b1[ch] / (1.0f + std::exp(-b1[d + ch]));
      }
    }
    OASR_ASSIGN_OR_RETURN(L.glu0, Upload(L.host_glu0.data(), d));
  }
  // The residual products' epilogues take the norms after them when every
  // one of them can.
  fused_norms_ = !layers_.empty() && !fused_ff && embed_out_.FusesNorms();
  for (const Layer& L : layers_) {
    fused_norms_ = fused_norms_ && L.ff_macaron_w2.FusesNorms() && L.attn_out.FusesNorms() &&
                   L.pointwise_conv2.FusesNorms() && L.ff_w2.FusesNorms();
  }
  return BuildPositionTable();
}

absl::Status ConformerEncoder::BuildPositionTable() {
  const ModelConfig& c = config();
  const int64_t d = c.output_size, layers = c.num_blocks;
  if (!ctx_->is_cuda()) {
    cpu_table_ = std::make_unique<RelPositionTable>(&model_->weights(), static_cast<int>(d),
                                                    options_.max_table_positions);
    table_rows_ = cpu_table_->max_positions();
    return absl::OkStatus();
  }
  // CUDA: the whole table at load, [layers, P, d] in the encoder's dtype, by
  // one float32 GEMM per layer and block of positions.
  const int64_t block = RelPositionTable::kBlockRows * 16;
  table_rows_ = (options_.max_table_positions + block - 1) / block * block;
  OASR_ASSIGN_OR_RETURN(device_table_,
                        Tensor::Empty({layers, table_rows_, d}, options_.dtype, ctx_->device()));
  OASR_ASSIGN_OR_RETURN(Tensor pe_host, Tensor::EmptyPinned({block, d}, DType::kFloat32));
  OASR_ASSIGN_OR_RETURN(Tensor pe, Tensor::Empty({block, d}, DType::kFloat32, ctx_->device()));
  OASR_ASSIGN_OR_RETURN(Tensor rows, Tensor::Empty({block, d}, DType::kFloat32, ctx_->device()));
  std::vector<LinearOp> projections;
  for (int64_t l = 0; l < layers; ++l) {
    LinearOptions o;  // float32 for the table's exactness, whatever the dtype.
    OASR_ASSIGN_OR_RETURN(
        LinearOp op, LinearOp::Create(model_->weights().layers[l].linear_pos.data<float>(), nullptr,
                                      d, d, o, *ctx_));
    projections.push_back(std::move(op));
  }
  for (int64_t start = 0; start < table_rows_; start += block) {
    OASR_RETURN_IF_ERROR(ctx_->Synchronize());  // pe_host is reused.
    for (int64_t r = 0; r < block; ++r) {
      kernels::SinusoidRow(start + r, static_cast<int>(d), pe_host.data<float>() + r * d);
    }
    OASR_RETURN_IF_ERROR(CopyTensorAsync(pe.view(), pe_host.view(), ctx_->stream()));
    for (int64_t l = 0; l < layers; ++l) {
      LinearArgs a;
      a.x = pe.data();
      a.ldx = d;
      a.y = rows.data();
      a.ldy = d;
      a.m = block;
      OASR_RETURN_IF_ERROR(projections[l].Run(*ctx_, a));
      kernels::CastParams cast;
      cast.in = rows.data();
      cast.out = static_cast<char*>(device_table_.data()) +
                 static_cast<size_t>((l * table_rows_ + start) * d) * DTypeSize(options_.dtype);
      cast.out_dtype = options_.dtype;
      cast.n = block * d;
      OASR_RETURN_IF_ERROR(kernels::Cast(*ctx_, cast));
    }
  }
  return ctx_->Synchronize();
}

int64_t ConformerEncoder::OutputFrames(int64_t feature_frames) const {
  int64_t t = feature_frames;
  for (const kernels::Conv2dOp& conv : subsampling_) {
    t = conv.OutSize(t);
    if (t == 0) return 0;
  }
  return t;
}

Shape ConformerEncoder::ConvStateShape() const {
  const ModelConfig& c = config();
  return Shape{c.num_blocks, c.cnn_module_kernel - 1, c.output_size};
}

ConformerEncoder::Buffers ConformerEncoder::AllocateBuffers(Arena& arena, int batch,
                                                            int chunk) const {
  const ModelConfig& c = config();
  const size_t es = DTypeSize(options_.dtype);
  const size_t m = static_cast<size_t>(batch) * chunk;
  const size_t d = static_cast<size_t>(c.output_size);
  Buffers b;
  b.x = static_cast<float*>(arena.Allocate(m * d * sizeof(float)));
  b.h = arena.Allocate(m * d * es);
  // The fused feed-forward modules keep their hidden activation on chip.
  const bool hidden = layers_.empty() || !layers_[0].fused_ff;
  if (hidden) b.hidden = arena.Allocate(m * static_cast<size_t>(c.linear_units) * es);
  b.qkv = arena.Allocate(m * 3 * d * es);
  b.attn = arena.Allocate(m * d * es);
  b.conv_mid = arena.Allocate(m * 2 * d * es);
  b.conv_out = arena.Allocate(m * d * es);
  bool ok = b.x && b.h && (b.hidden || !hidden) && b.qkv && b.attn && b.conv_mid && b.conv_out;
  int64_t h = c.WindowFrames(chunk), w = c.input_dim;
  for (size_t i = 0; i < subsampling_.size(); ++i) {
    h = subsampling_[i].OutSize(h);
    w = subsampling_[i].OutSize(w);
    if (i < first_stage_) continue;  // Fused into the next stage: no activation.
    void* p = arena.Allocate(static_cast<size_t>(batch * h * w) * d * es);
    ok = ok && p != nullptr;
    b.sub[i] = p;
  }
  b.ok = ok;
  return b;
}

size_t ConformerEncoder::WorkspaceBytes(int batch, int chunk) const {
  Arena measure = Arena::Measuring();
  (void)AllocateBuffers(measure, batch, chunk);
  const ModelConfig& c = config();
  // The subsampling stages take their patch scratch on top, one at a time.
  size_t conv = 0;
  int64_t h = c.WindowFrames(chunk), w = c.input_dim;  // Of the next stage that runs.
  for (size_t i = first_stage_; i < subsampling_.size(); ++i) {
    conv = std::max(conv, subsampling_[i].WorkspaceBytes(*ctx_, batch, h, w));
    for (size_t k = i == first_stage_ ? 0 : i; k <= i; ++k) {  // A fused stage's dims too.
      h = subsampling_[k].OutSize(h);
      w = subsampling_[k].OutSize(w);
    }
  }
  return measure.peak() + conv + Arena::kAlignment;
}

absl::Status ConformerEncoder::CheckInputs(const CohortInputs& in, const PagedKv& kv,
                                           const ConvStates& conv) const {
  const ModelConfig& c = config();
  if (in.batch < 0 || in.chunk < 1 || in.feats == nullptr || in.slots == nullptr ||
      in.frames == nullptr || in.offsets == nullptr || in.host_slots == nullptr ||
      in.host_frames == nullptr || in.host_offsets == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cohort: batch ", in.batch, ", chunk ", in.chunk,
                                                   " (feats and every row array are required)"));
  }
  if (OutputFrames(c.WindowFrames(in.chunk)) != in.chunk) {
    return absl::InvalidArgumentError(absl::StrCat("cohort: a window of ", c.WindowFrames(in.chunk),
                                                   " frames does not give chunk ", in.chunk));
  }
  if (kv.k == nullptr || kv.v == nullptr || kv.block_table == nullptr || kv.cache_lens == nullptr ||
      kv.host_block_table == nullptr || kv.host_cache_lens == nullptr || kv.block_size < 1 ||
      kv.num_blocks < 1 || kv.table_stride < 1) {
    return absl::InvalidArgumentError("cohort: the K/V pool and its tables are required");
  }
  if (conv.data == nullptr || conv.num_slots < 1) {
    return absl::InvalidArgumentError("cohort: the conv states are required");
  }
  for (int b = 0; b < in.batch; ++b) {
    const int32_t slot = in.host_slots[b], frames = in.host_frames[b];
    if (slot < 0 || slot >= conv.num_slots) {
      return absl::InvalidArgumentError(
          absl::StrCat("cohort row ", b, ": slot ", slot, " is outside [0, ", conv.num_slots, ")"));
    }
    if (frames < 1 || frames > in.chunk) {
      return absl::InvalidArgumentError(
          absl::StrCat("cohort row ", b, ": frames ", frames, " is outside [1, ", in.chunk, "]"));
    }
    const int64_t t1 = kv.host_cache_lens[slot];
    if (t1 < 0 || in.host_offsets[b] < t1) {
      return absl::InvalidArgumentError(
          absl::StrCat("cohort row ", b, ": offset ", in.host_offsets[b],
                       " is below the cache length ", t1, " (or the length is negative)"));
    }
    const int64_t used = (t1 + frames + kv.block_size - 1) / kv.block_size;
    if (used > kv.table_stride) {
      return absl::InvalidArgumentError(absl::StrCat("cohort row ", b, ": ", t1 + frames,
                                                     " positions need ", used,
                                                     " blocks, the table has ", kv.table_stride));
    }
    const int32_t* row = kv.host_block_table + static_cast<int64_t>(slot) * kv.table_stride;
    for (int64_t i = 0; i < used; ++i) {
      if (row[i] < 0 || row[i] >= kv.num_blocks) {
        return absl::InvalidArgumentError(
            absl::StrCat("cohort row ", b, ": block_table[", i, "] = ", row[i], " is outside [0, ",
                         kv.num_blocks, ") (positions up to ", t1 + frames, " need ", used,
                         " reserved blocks)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ConformerEncoder::ForwardCohort(const CohortInputs& in, const PagedKv& kv,
                                             const ConvStates& conv, float* log_probs,
                                             float* encoder_out) {
  if (in.batch == 0) return absl::OkStatus();
  OASR_RETURN_IF_ERROR(CheckInputs(in, kv, conv));
  const ModelConfig& c = config();
  const ConformerWeights& w = model_->weights();
  const int64_t d = c.output_size, heads = c.attention_heads, dk = c.head_dim();
  const int64_t units = c.linear_units, vocab = c.output_dim, k1 = c.cnn_module_kernel - 1;
  const int64_t m = int64_t{in.batch} * in.chunk;
  const DType dt = options_.dtype;
  ExecutionContext& ctx = *ctx_;

  if (cpu_table_ != nullptr) {
    int64_t max_end = 0;
    for (int b = 0; b < in.batch; ++b) {
      max_end = std::max<int64_t>(max_end, int64_t{in.host_offsets[b]} + in.host_frames[b]);
    }
    cpu_table_->Ensure(max_end);
  }

  Arena& arena = ctx.workspace();
  const size_t mark = arena.mark();
  Buffers buf = AllocateBuffers(arena, in.batch, in.chunk);
  if (!buf.ok) {
    arena.Rewind(mark);
    return absl::ResourceExhaustedError(absl::StrCat(
        "cohort of ", in.batch, " rows: the workspace holds ", arena.capacity(), " bytes, ",
        WorkspaceBytes(in.batch, in.chunk), " are needed (reserve WorkspaceBytes at start-up)"));
  }
  absl::Status status = [&]() -> absl::Status {
    // Subsampling: [B, window, F] -> ... -> [B, chunk, F' * d] -> x [M, d].
    const void* src = in.feats;
    DType src_dtype = DType::kFloat32;
    int64_t h = c.WindowFrames(in.chunk), wf = c.input_dim;
    for (size_t i = first_stage_; i < subsampling_.size(); ++i) {
      kernels::Conv2dArgs a;
      a.in = src;
      a.in_dtype = src_dtype;
      a.n = in.batch;
      a.h = h;
      a.w = wf;
      a.out = buf.sub[i];
      OASR_RETURN_IF_ERROR(subsampling_[i].Run(ctx, a));
      src = buf.sub[i];
      src_dtype = dt;
      for (size_t k = i == first_stage_ ? 0 : i; k <= i; ++k) {  // A fused stage's dims too.
        h = subsampling_[k].OutSize(h);
        wf = subsampling_[k].OutSize(wf);
      }
    }
    auto run = [&](const LinearOp& op, const void* x, int64_t ldx, void* y, int64_t ldy,
                   DType y_dtype, bool accumulate) {
      LinearArgs a;
      a.x = x;
      a.ldx = ldx;
      a.y = y;
      a.ldy = ldy;
      a.y_dtype = y_dtype;
      a.m = m;
      a.accumulate = accumulate;
      return op.Run(ctx, a);
    };
    auto norm = [&](const Norm& n, void* out, DType out_dtype) {
      kernels::LayerNormParams p;
      p.x = buf.x;
      p.x_dtype = DType::kFloat32;
      p.ldx = d;
      p.scale = n.scale;
      p.shift = n.shift;
      p.out = out;
      p.out_dtype = out_dtype;
      p.ldo = d;
      p.rows = m;
      p.d = d;
      return kernels::LayerNorm(ctx, p);
    };
    // x (+)= op(in); then x = final(x) and buf.h = next(x) when given: in
    // the product's epilogue with fused norms, else as passes of their own.
    auto into_x = [&](const LinearOp& op, const void* in, int64_t ld_in, bool accumulate,
                      const Norm* final, const Norm* next) -> absl::Status {
      if (!fused_norms_) {
        OASR_RETURN_IF_ERROR(run(op, in, ld_in, buf.x, d, DType::kFloat32, accumulate));
        if (final != nullptr) OASR_RETURN_IF_ERROR(norm(*final, buf.x, DType::kFloat32));
        return next != nullptr ? norm(*next, buf.h, dt) : absl::OkStatus();
      }
      LinearArgs a;
      a.x = in;
      a.ldx = ld_in;
      a.y = buf.x;
      a.ldy = d;
      a.y_dtype = DType::kFloat32;
      a.m = m;
      a.accumulate = accumulate;
      if (final != nullptr) {
        a.y_norm_scale = final->scale;
        a.y_norm_shift = final->shift;
      }
      if (next != nullptr) {
        a.out_norm_scale = next->scale;
        a.out_norm_shift = next->shift;
        a.norm_out = buf.h;
        a.ld_norm_out = d;
      }
      return op.Run(ctx, a);
    };
    auto residual = [&](const LinearOp& op, const void* in, int64_t ld_in, const Norm* final,
                        const Norm* next) { return into_x(op, in, ld_in, true, final, next); };
    // The embedding; it leaves the first module's input norm in buf.h
    // unless that module is fused and norms x itself.
    OASR_RETURN_IF_ERROR(into_x(
        embed_out_, src, wf * d, false, nullptr,
        !layers_.empty() && !layers_[0].fused_ff_macaron ? &layers_[0].norm_ff_macaron : nullptr));
    // The feed-forward module; its input norm is already in buf.h.
    auto feed_forward = [&](const LinearOp& w1, const LinearOp& w2, const Norm* final,
                            const Norm* next) -> absl::Status {
      OASR_RETURN_IF_ERROR(run(w1, buf.h, d, buf.hidden, units, dt, false));
      return residual(w2, buf.hidden, units, final, next);
    };
    // The fused module; `final` (or null) is the norm applied to x after it.
    auto fused_feed_forward = [&](const kernels::FeedForwardOp& op, const Norm& n,
                                  const Norm* final) {
      kernels::FeedForwardArgs a;
      a.x = buf.x;
      a.ldx = d;
      a.m = m;
      a.norm_scale = n.scale;
      a.norm_shift = n.shift;
      if (final != nullptr) {
        a.final_scale = final->scale;
        a.final_shift = final->shift;
      }
      return op.Run(ctx, a);
    };
    const size_t es = DTypeSize(dt);
    const size_t pool_layer =
        static_cast<size_t>(kv.num_blocks) * kv.block_size * d * DTypeSize(kv_dtype());
    const size_t state_layer = static_cast<size_t>(conv.num_slots * k1 * d) * es;
    const Norm after_norm{after_norm_scale_, after_norm_shift_};
    // Each residual product leaves the next module's input norm in buf.h;
    // the fused feed-forward modules norm x themselves.
    for (size_t l = 0; l < layers_.size(); ++l) {
      const Layer& L = layers_[l];
      const Norm& next_layer_norm =
          l + 1 < layers_.size() ? layers_[l + 1].norm_ff_macaron : after_norm;
      if (L.fused_ff_macaron) {
        OASR_RETURN_IF_ERROR(fused_feed_forward(*L.fused_ff_macaron, L.norm_ff_macaron, nullptr));
        OASR_RETURN_IF_ERROR(norm(L.norm_mha, buf.h, dt));
      } else {
        OASR_RETURN_IF_ERROR(feed_forward(L.ff_macaron_w1, L.ff_macaron_w2, nullptr, &L.norm_mha));
      }

      OASR_RETURN_IF_ERROR(run(L.qkv, buf.h, d, buf.qkv, 3 * d, dt, false));
      kernels::PagedAttentionParams ap;
      ap.qkv = buf.qkv;
      ap.ld_qkv = 3 * d;
      ap.dtype = dt;
      ap.pos_bias_u = L.pos_bias_u;
      ap.pos_bias_v = L.pos_bias_v;
      ap.k_pool = static_cast<char*>(kv.k) + l * pool_layer;
      ap.v_pool = static_cast<char*>(kv.v) + l * pool_layer;
      ap.pool_fp8 = options_.kv_fp8;
      ap.num_blocks = kv.num_blocks;
      ap.block_size = kv.block_size;
      ap.block_table = kv.block_table;
      ap.table_stride = kv.table_stride;
      ap.cache_lens = kv.cache_lens;
      ap.slots = in.slots;
      ap.frames = in.frames;
      ap.offsets = in.offsets;
      if (cpu_table_ != nullptr) {
        ap.pos_table = cpu_table_->layer(static_cast<int>(l));
        ap.pos_dtype = DType::kFloat32;
      } else {
        ap.pos_table = static_cast<const char*>(device_table_.data()) +
                       static_cast<size_t>(l * table_rows_ * d) * es;
        ap.pos_dtype = dt;
      }
      ap.pos_rows = table_rows_;
      ap.linear_pos = L.linear_pos;
      ap.out = buf.attn;
      ap.ldo = d;
      ap.batch = in.batch;
      ap.chunk = in.chunk;
      ap.heads = static_cast<int>(heads);
      ap.d_k = static_cast<int>(dk);
      OASR_RETURN_IF_ERROR(kernels::PagedAttention(ctx, ap));
      OASR_RETURN_IF_ERROR(residual(L.attn_out, buf.attn, d, nullptr, &L.norm_conv));
      OASR_RETURN_IF_ERROR(run(L.pointwise_conv1, buf.h, d, buf.conv_mid, 2 * d, dt, false));
      kernels::CausalConvParams cp;
      cp.in = buf.conv_mid;
      cp.ld_in = 2 * d;
      cp.dtype = dt;
      cp.state = static_cast<char*>(conv.data) + l * state_layer;
      cp.state_slot_stride = k1 * d;
      cp.glu0 = L.glu0;
      cp.slots = in.slots;
      cp.frames = in.frames;
      cp.taps = L.taps;
      cp.tap_bias = L.tap_bias;
      cp.layer_norm = c.cnn_module_norm == ConvNorm::kLayerNorm;
      cp.norm_scale = L.conv_norm.scale;
      cp.norm_shift = L.conv_norm.shift;
      cp.out = buf.conv_out;
      cp.ldo = d;
      cp.batch = in.batch;
      cp.chunk = in.chunk;
      cp.d = static_cast<int>(d);
      cp.kernel = static_cast<int>(k1 + 1);
      OASR_RETURN_IF_ERROR(kernels::CausalConv(ctx, cp));
      OASR_RETURN_IF_ERROR(
          residual(L.pointwise_conv2, buf.conv_out, d, nullptr, L.fused_ff ? nullptr : &L.norm_ff));

      if (L.fused_ff) {
        OASR_RETURN_IF_ERROR(fused_feed_forward(*L.fused_ff, L.norm_ff, &L.norm_final));
        if (l + 1 == layers_.size()) OASR_RETURN_IF_ERROR(norm(after_norm, buf.h, dt));
      } else {
        OASR_RETURN_IF_ERROR(feed_forward(L.ff_w1, L.ff_w2, &L.norm_final, &next_layer_norm));
      }
    }
    (void)w;
    if (encoder_out != nullptr) {
      kernels::CastParams cast;
      cast.in = buf.h;
      cast.in_dtype = dt;
      cast.out = encoder_out;
      cast.out_dtype = DType::kFloat32;
      cast.n = m * d;
      OASR_RETURN_IF_ERROR(kernels::Cast(ctx, cast));
    }
    OASR_RETURN_IF_ERROR(run(ctc_, buf.h, d, log_probs, vocab, DType::kFloat32, false));
    kernels::LogSoftmaxParams ls;
    ls.x = log_probs;
    ls.rows = m;
    ls.n = vocab;
    ls.ld = vocab;
    return kernels::LogSoftmax(ctx, ls);
  }();
  arena.Rewind(mark);
  return status;
}

// --- Dense caches ------------------------------------------------------------

namespace {

absl::Status ShapeError(int index, const char* name, const Shape& got, const std::string& want) {
  return absl::InvalidArgumentError(absl::StrCat("chunk input ", index, ": ", name, " has shape ",
                                                 got.ToString(), ", expected ", want));
}

absl::Status CheckCpuFloat(int index, const char* name, const TensorView& v) {
  if (v.dtype() != DType::kFloat32 || !v.device().is_cpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk input ", index, ": ", name, " must be float32 on the CPU, got ",
                     DTypeName(v.dtype()), " on ", v.device().ToString()));
  }
  return absl::OkStatus();
}

// A host float32 buffer moved to the context's device in `dtype`.
absl::StatusOr<Tensor> ToDevice(ExecutionContext& ctx, const std::vector<float>& host,
                                DType dtype) {
  const int64_t n = static_cast<int64_t>(host.size());
  OASR_ASSIGN_OR_RETURN(Tensor staged, Tensor::Empty({n}, dtype));
  ConvertFromFloat(host.data(), n, dtype, staged.data());
  if (!ctx.is_cuda()) return staged;
  OASR_ASSIGN_OR_RETURN(Tensor dev, Tensor::Empty({n}, dtype, ctx.device()));
  OASR_RETURN_IF_ERROR(CopyTensorAsync(dev.view(), staged.view(), ctx.stream()));
  OASR_RETURN_IF_ERROR(ctx.Synchronize());
  return dev;
}

absl::StatusOr<Tensor> IntsToDevice(ExecutionContext& ctx, const std::vector<int32_t>& host) {
  const int64_t n = static_cast<int64_t>(host.size());
  OASR_ASSIGN_OR_RETURN(Tensor dev,
                        Tensor::Empty({std::max<int64_t>(n, 1)}, DType::kInt32, ctx.device()));
  if (n > 0) {
    OASR_RETURN_IF_ERROR(CopyTensor(
        dev.view().Slice(0, n),
        TensorView(const_cast<int32_t*>(host.data()), DType::kInt32, {n}, Device::Cpu())));
  }
  return dev;
}

// The values of a device tensor in `dtype`, as host floats.
absl::StatusOr<std::vector<float>> ToHost(ExecutionContext& ctx, const Tensor& dev, DType dtype) {
  OASR_RETURN_IF_ERROR(ctx.Synchronize());
  OASR_ASSIGN_OR_RETURN(Tensor staged, Tensor::Empty(dev.shape(), dtype));
  OASR_RETURN_IF_ERROR(CopyTensor(staged.view(), dev.view()));
  std::vector<float> out(static_cast<size_t>(dev.numel()));
  ConvertToFloat(staged.data(), dev.numel(), dtype, out.data());
  return out;
}

}  // namespace

absl::Status ConformerEncoder::ValidateDense(const DenseChunkInput& in, int index) const {
  const ModelConfig& c = config();
  const int64_t layers = c.num_blocks, heads = c.attention_heads, dk = c.head_dim();
  OASR_RETURN_IF_ERROR(CheckCpuFloat(index, "feats", in.feats));
  if (in.feats.rank() != 2 || in.feats.dim(1) != c.input_dim || in.feats.empty()) {
    return ShapeError(index, "feats", in.feats.shape(), absl::StrCat("[T, ", c.input_dim, "]"));
  }
  if (OutputFrames(in.feats.dim(0)) < 1) {
    return absl::InvalidArgumentError(absl::StrCat("chunk input ", index, ": ", in.feats.dim(0),
                                                   " feature frames, need at least ",
                                                   c.right_context() + 1));
  }
  OASR_RETURN_IF_ERROR(CheckCpuFloat(index, "att_cache", in.att_cache));
  const Shape& a = in.att_cache.shape();
  if (a.rank() != 4 || a[0] != layers || a[1] != heads || a[3] != 2 * dk ||
      (a[2] > 0 && in.att_cache.empty())) {
    return ShapeError(index, "att_cache", a,
                      absl::StrCat("[", layers, ", ", heads, ", t1, ", 2 * dk, "]"));
  }
  if (in.offset < a[2]) {
    return absl::InvalidArgumentError(absl::StrCat("chunk input ", index, ": offset ", in.offset,
                                                   " is below the cache length ", a[2]));
  }
  OASR_RETURN_IF_ERROR(CheckCpuFloat(index, "cnn_cache", in.cnn_cache));
  const Shape want_cnn = ConvStateShape();
  if (!(in.cnn_cache.shape() == want_cnn) || in.cnn_cache.empty()) {
    return ShapeError(index, "cnn_cache", in.cnn_cache.shape(), want_cnn.ToString());
  }
  return absl::OkStatus();
}

absl::StatusOr<DenseChunkOutput> ConformerEncoder::ForwardChunk(const DenseChunkInput& input,
                                                                int required_cache_size) {
  OASR_ASSIGN_OR_RETURN(std::vector<DenseChunkOutput> out,
                        ForwardChunks({input}, required_cache_size));
  return std::move(out[0]);
}

absl::StatusOr<std::vector<DenseChunkOutput>> ConformerEncoder::ForwardChunks(
    const std::vector<DenseChunkInput>& inputs, int required_cache_size) {
  const ModelConfig& c = config();
  const int64_t layers = c.num_blocks, heads = c.attention_heads, dk = c.head_dim();
  const int64_t d = c.output_size, vocab = c.output_dim, k1 = c.cnn_module_kernel - 1;
  const int64_t feat_dim = c.input_dim;
  if (required_cache_size < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("required_cache_size=", required_cache_size, " must be >= -1"));
  }
  const int batch = static_cast<int>(inputs.size());
  if (batch == 0) return std::vector<DenseChunkOutput>();
  int chunk = 0;
  for (int b = 0; b < batch; ++b) {
    OASR_RETURN_IF_ERROR(ValidateDense(inputs[b], b));
    chunk = std::max<int>(chunk, static_cast<int>(OutputFrames(inputs[b].feats.dim(0))));
  }
  // A private pool: row b owns blocks [first[b], first[b] + blocks[b]) of
  // `chunk` frames, holding its history, then the chunk.
  const int64_t window = c.WindowFrames(chunk), bs = chunk;
  std::vector<int32_t> slots(batch), frames(batch), offsets(batch), lens(batch);
  std::vector<int64_t> first(batch);
  int64_t total_blocks = 0, width = 1;
  for (int b = 0; b < batch; ++b) {
    const int64_t t1 = inputs[b].att_cache.dim(2);
    slots[b] = b;
    frames[b] = static_cast<int32_t>(OutputFrames(inputs[b].feats.dim(0)));
    offsets[b] = static_cast<int32_t>(inputs[b].offset);
    lens[b] = static_cast<int32_t>(t1);
    const int64_t blocks = (t1 + frames[b] + bs - 1) / bs;
    first[b] = total_blocks;
    total_blocks += blocks;
    width = std::max(width, blocks);
  }
  std::vector<int32_t> table(static_cast<size_t>(batch * width), 0);
  for (int b = 0; b < batch; ++b) {
    for (int64_t j = 0; j * bs < lens[b] + frames[b]; ++j) {
      table[b * width + j] = static_cast<int32_t>(first[b] + j);
    }
  }
  const int64_t row_floats = heads * dk;  // One frame of one layer in the pool.
  std::vector<float> k_host(static_cast<size_t>(layers * total_blocks * bs * row_floats), 0.0f);
  std::vector<float> v_host(k_host.size(), 0.0f);
  auto pool_at = [&](int64_t l, int b, int64_t pos) {
    return ((l * total_blocks + first[b] + pos / bs) * bs + pos % bs) * row_floats;
  };
  for (int b = 0; b < batch; ++b) {
    const float* cache = inputs[b].att_cache.data<float>();
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t p = 0; p < lens[b]; ++p) {
          const float* src = cache + ((l * heads + h) * lens[b] + p) * 2 * dk;
          std::memcpy(&k_host[pool_at(l, b, p) + h * dk], src, dk * sizeof(float));
          std::memcpy(&v_host[pool_at(l, b, p) + h * dk], src + dk, dk * sizeof(float));
        }
      }
    }
  }
  std::vector<float> state(static_cast<size_t>(layers * batch * k1 * d));
  for (int b = 0; b < batch; ++b) {
    const float* cnn = inputs[b].cnn_cache.data<float>();
    for (int64_t l = 0; l < layers; ++l) {
      std::memcpy(&state[(l * batch + b) * k1 * d], cnn + l * k1 * d, k1 * d * sizeof(float));
    }
  }
  std::vector<float> feats(static_cast<size_t>(batch * window * feat_dim), 0.0f);
  for (int b = 0; b < batch; ++b) {
    const int64_t t = std::min<int64_t>(inputs[b].feats.dim(0), window);
    std::memcpy(&feats[b * window * feat_dim], inputs[b].feats.data<float>(),
                static_cast<size_t>(t * feat_dim) * sizeof(float));
  }

  ExecutionContext& ctx = *ctx_;
  const DType dt = options_.dtype;
  OASR_ASSIGN_OR_RETURN(Tensor k_dev, ToDevice(ctx, k_host, kv_dtype()));
  OASR_ASSIGN_OR_RETURN(Tensor v_dev, ToDevice(ctx, v_host, kv_dtype()));
  OASR_ASSIGN_OR_RETURN(Tensor state_dev, ToDevice(ctx, state, dt));
  OASR_ASSIGN_OR_RETURN(Tensor feats_dev, ToDevice(ctx, feats, DType::kFloat32));
  OASR_ASSIGN_OR_RETURN(Tensor slots_dev, IntsToDevice(ctx, slots));
  OASR_ASSIGN_OR_RETURN(Tensor frames_dev, IntsToDevice(ctx, frames));
  OASR_ASSIGN_OR_RETURN(Tensor offsets_dev, IntsToDevice(ctx, offsets));
  OASR_ASSIGN_OR_RETURN(Tensor lens_dev, IntsToDevice(ctx, lens));
  OASR_ASSIGN_OR_RETURN(Tensor table_dev, IntsToDevice(ctx, table));
  OASR_ASSIGN_OR_RETURN(Tensor log_probs,
                        Tensor::Empty({batch, chunk, vocab}, DType::kFloat32, ctx.device()));
  const size_t need = WorkspaceBytes(batch, chunk);
  if (ctx.workspace().capacity() - ctx.workspace().used() < need) {
    OASR_RETURN_IF_ERROR(ctx.ReserveWorkspace(need, ctx.host_workspace().capacity()));
  }

  CohortInputs in;
  in.batch = batch;
  in.chunk = chunk;
  in.feats = feats_dev.data<float>();
  in.slots = slots_dev.data<int32_t>();
  in.frames = frames_dev.data<int32_t>();
  in.offsets = offsets_dev.data<int32_t>();
  in.host_slots = slots.data();
  in.host_frames = frames.data();
  in.host_offsets = offsets.data();
  PagedKv kv;
  kv.k = k_dev.data();
  kv.v = v_dev.data();
  kv.num_blocks = total_blocks;
  kv.block_size = static_cast<int>(bs);
  kv.block_table = table_dev.data<int32_t>();
  kv.cache_lens = lens_dev.data<int32_t>();
  kv.host_block_table = table.data();
  kv.host_cache_lens = lens.data();
  kv.table_stride = width;
  ConvStates conv{state_dev.data(), batch};
  OASR_ASSIGN_OR_RETURN(Tensor encoder_out,
                        Tensor::Empty({batch, chunk, d}, DType::kFloat32, ctx.device()));
  OASR_RETURN_IF_ERROR(
      ForwardCohort(in, kv, conv, log_probs.data<float>(), encoder_out.data<float>()));

  OASR_ASSIGN_OR_RETURN(std::vector<float> lp, ToHost(ctx, log_probs, DType::kFloat32));
  OASR_ASSIGN_OR_RETURN(std::vector<float> eo, ToHost(ctx, encoder_out, DType::kFloat32));
  OASR_ASSIGN_OR_RETURN(std::vector<float> k_out, ToHost(ctx, k_dev, kv_dtype()));
  OASR_ASSIGN_OR_RETURN(std::vector<float> v_out, ToHost(ctx, v_dev, kv_dtype()));
  OASR_ASSIGN_OR_RETURN(std::vector<float> state_out, ToHost(ctx, state_dev, dt));
  std::vector<DenseChunkOutput> outputs(batch);
  for (int b = 0; b < batch; ++b) {
    DenseChunkOutput& o = outputs[b];
    const int64_t rows = frames[b], t1 = lens[b], total = t1 + rows;
    OASR_ASSIGN_OR_RETURN(o.log_probs, Tensor::Empty({rows, vocab}, DType::kFloat32));
    std::memcpy(o.log_probs.data(), &lp[static_cast<size_t>(b) * chunk * vocab],
                o.log_probs.nbytes());
    OASR_ASSIGN_OR_RETURN(o.encoder_out, Tensor::Empty({rows, d}, DType::kFloat32));
    std::memcpy(o.encoder_out.data(), &eo[static_cast<size_t>(b) * chunk * d],
                o.encoder_out.nbytes());
    // Keep the last `keep` of the t1 + rows keys, as WeNet's forward_chunk.
    const int64_t keep =
        required_cache_size < 0 ? total : std::min<int64_t>(total, required_cache_size);
    OASR_ASSIGN_OR_RETURN(o.att_cache,
                          Tensor::Empty({layers, heads, keep, 2 * dk}, DType::kFloat32));
    float* dst = o.att_cache.data<float>();
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t p = total - keep; p < total; ++p, dst += 2 * dk) {
          std::memcpy(dst, &k_out[pool_at(l, b, p) + h * dk], dk * sizeof(float));
          std::memcpy(dst + dk, &v_out[pool_at(l, b, p) + h * dk], dk * sizeof(float));
        }
      }
    }
    OASR_ASSIGN_OR_RETURN(o.cnn_cache, Tensor::Empty(ConvStateShape(), DType::kFloat32));
    for (int64_t l = 0; l < layers; ++l) {
      std::memcpy(o.cnn_cache.data<float>() + l * k1 * d, &state_out[(l * batch + b) * k1 * d],
                  k1 * d * sizeof(float));
    }
  }
  return outputs;
}

}  // namespace oasr::encoder
