#include "encoder/conformer_encoder.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "encoder/cpu_ops.h"
#include "kernels/residual_add.h"

namespace oasr::encoder {
namespace {

// Per-thread scratch that keeps its capacity between calls, so that the
// steady state allocates (and page-faults) nothing.
enum Slot {
  kX, kH, kOut, kHidden, kQkv, kAttn, kQu, kQv, kScores, kConvIn, kConvMid, kConvGlu,
  kPatches, kAct0, kAct1, kLogProbs, kNewKv, kNumSlots
};

float* Scratch(Slot slot, int64_t n) {
  thread_local std::vector<std::vector<float>> slots(kNumSlots);
  std::vector<float>& v = slots[slot];
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

void AddScaled(float* y, const float* x, float alpha, int64_t n) {
  kernels::ResidualAddCpu(kernels::ResidualAddParams{y, x, alpha, n});
}

absl::Status ShapeError(int index, const char* name, const Shape& got, const std::string& want) {
  return absl::InvalidArgumentError(absl::StrCat("chunk input ", index, ": ", name, " has shape ",
                                                 got.ToString(), ", expected ", want));
}

absl::Status CheckCpuFloat(int index, const char* name, const TensorView& v) {
  if (v.dtype() != DType::kFloat32 || !v.device().is_cpu()) {
    return absl::InvalidArgumentError(absl::StrCat("chunk input ", index, ": ", name,
                                                   " must be float32 on the CPU, got ",
                                                   DTypeName(v.dtype()), " on ",
                                                   v.device().ToString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EncoderOptions::Validate() const {
  if (num_threads < 1 || num_threads > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("EncoderOptions.num_threads=", num_threads, " is outside [1, 256]"));
  }
  if (max_table_positions < RelPositionTable::kBlockRows || max_table_positions > (1 << 24)) {
    return absl::InvalidArgumentError(absl::StrCat("EncoderOptions.max_table_positions=",
                                                   max_table_positions, " is outside [",
                                                   RelPositionTable::kBlockRows, ", 2^24]"));
  }
  return absl::OkStatus();
}

ConformerEncoder::ConformerEncoder(const ConformerModel* model, const EncoderOptions& options)
    : model_(model), options_(options) {
  const ModelConfig& c = model->config();
  const int d = c.output_size, k = c.cnn_module_kernel;
  for (const ConformerLayerWeights& layer : model->weights().layers) {
    packed_.push_back(PackedLayer{PackedLinear(layer.ff_macaron_w1), PackedLinear(layer.ff_macaron_w2),
                                  PackedLinear(layer.ff_w1), PackedLinear(layer.ff_w2),
                                  PackedLinear(layer.qkv), PackedLinear(layer.attn_out),
                                  PackedLinear(layer.pointwise_conv1),
                                  PackedLinear(layer.pointwise_conv2)});
    std::vector<float> t(static_cast<size_t>(k) * d);
    const float* w = layer.depthwise_weight.data<float>();
    for (int ch = 0; ch < d; ++ch)
      for (int j = 0; j < k; ++j) t[static_cast<size_t>(j) * d + ch] = w[ch * k + j];
    depthwise_t_.push_back(std::move(t));
  }
  embed_out_ = PackedLinear(model->weights().embed_out);
  ctc_ = PackedLinear(model->weights().ctc);
  table_ = std::make_unique<RelPositionTable>(&model->weights(), d, options.max_table_positions);
  pool_ = std::make_unique<ThreadPool>(options.num_threads);
}

void ConformerEncoder::Linear(const PackedLinear& w, const float* x, int64_t m, int64_t ldx,
                              float* y, int64_t ldy, bool accumulate) const {
  // Below ~1M multiply-adds a fork-join costs more than it saves.
  constexpr int64_t kMinWork = 1 << 20;
  const int64_t panels = w.num_panels();
  const int64_t parts = std::min<int64_t>(pool_->threads(), panels);
  if (parts <= 1 || m * w.in_features() * w.out_features() < kMinWork) {
    w.Forward(x, m, ldx, y, ldy, accumulate);
    return;
  }
  pool_->ParallelFor(parts, [&](int64_t i) {
    w.ForwardPanels(x, m, ldx, y, ldy, accumulate, panels * i / parts, panels * (i + 1) / parts);
  });
}

void ConformerEncoder::HalfFeedForward(const PackedLinear& w1, const PackedLinear& w2,
                                       const float* x, int64_t m, float* hidden, float* out,
                                       float* y) const {
  const int64_t units = w1.out_features(), d = w2.out_features();
  Linear(w1, x, m, d, hidden, units);
  pool_->ParallelFor(pool_->threads(), [&](int64_t i) {
    const int64_t begin = m * i / pool_->threads(), end = m * (i + 1) / pool_->threads();
    cpu::SwishInPlace(hidden + begin * units, (end - begin) * units);
  });
  Linear(w2, hidden, m, units, out, d);
  AddScaled(y, out, 0.5f, m * d);
}

absl::StatusOr<std::unique_ptr<ConformerEncoder>> ConformerEncoder::Create(
    const ConformerModel* model, const EncoderOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("ConformerEncoder: model is null");
  OASR_RETURN_IF_ERROR(options.Validate());
  openblas_set_num_threads(options.num_threads);
  return std::unique_ptr<ConformerEncoder>(new ConformerEncoder(model, options));
}

int64_t ConformerEncoder::OutputFrames(int64_t feature_frames) const {
  const ConformerWeights& w = model_->weights();
  int64_t t = feature_frames;
  for (size_t i = 0; i < w.conv_kernel.size(); ++i) {
    if (t < w.conv_kernel[i]) return 0;
    t = (t - w.conv_kernel[i]) / w.conv_stride[i] + 1;
  }
  return t;
}

void ConformerEncoder::Subsample(const float* feats, int64_t feat_frames, float* out) const {
  const ConformerWeights& w = model_->weights();
  const int64_t d = config().output_size;
  int64_t t_in = feat_frames, f_in = config().input_dim, ch = 1;
  const float* src = feats;
  Slot act_slot = kAct0;
  for (size_t i = 0; i < w.conv_kernel.size(); ++i) {
    const int64_t k = w.conv_kernel[i], s = w.conv_stride[i];
    const int64_t t_out = (t_in - k) / s + 1, f_out = (f_in - k) / s + 1;
    const int64_t patch = k * k * ch;
    float* patches = Scratch(kPatches, t_out * f_out * patch);
    for (int64_t t = 0; t < t_out; ++t) {
      for (int64_t f = 0; f < f_out; ++f) {
        float* dst = patches + (t * f_out + f) * patch;
        for (int64_t a = 0; a < k; ++a) {
          // k consecutive frequency cells of one time row are contiguous.
          const float* row = src + ((t * s + a) * f_in + f * s) * ch;
          std::memcpy(dst + a * k * ch, row, static_cast<size_t>(k * ch) * sizeof(float));
        }
      }
    }
    float* next = Scratch(act_slot, t_out * f_out * d);
    cpu::GemmNT(t_out * f_out, d, patch, 1.0f, patches, patch, w.conv_weight[i].data<float>(),
                patch, 0.0f, next, d);
    const float* bias = w.conv_bias[i].data<float>();
    for (int64_t r = 0; r < t_out * f_out; ++r) {
      float* row = next + r * d;
      for (int64_t j = 0; j < d; ++j) row[j] = std::max(row[j] + bias[j], 0.0f);
    }
    src = next;
    act_slot = act_slot == kAct0 ? kAct1 : kAct0;
    t_in = t_out;
    f_in = f_out;
    ch = d;
  }
  Linear(embed_out_, src, t_in, f_in * d, out, d);
  const float scale = std::sqrt(static_cast<float>(d));
  for (int64_t i = 0; i < t_in * d; ++i) out[i] *= scale;
}

absl::Status ConformerEncoder::ForwardCohort(const std::vector<CohortStream>& streams,
                                             float* log_probs, float* new_kv) const {
  const ModelConfig& c = config();
  const ConformerWeights& w = model_->weights();
  const int64_t d = c.output_size, heads = c.attention_heads, dk = c.head_dim();
  const int64_t k1 = c.cnn_module_kernel - 1, units = c.linear_units;
  const int layers = c.num_blocks;
  const int64_t nb = static_cast<int64_t>(streams.size());

  // Row layout: stream b owns rows [begin[b], begin[b] + rows[b]) of the
  // stacked activations and rows [begin[b] + b * k1, ...) of the conv input.
  std::vector<int64_t> rows(nb), begin(nb), pos_start(nb), pos_end(nb);
  int64_t m = 0, max_keys = 0, max_end = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const CohortStream& s = streams[b];
    rows[b] = OutputFrames(s.feat_frames);
    const int64_t t1 = s.history->length();
    if (rows[b] < 1 || t1 > s.offset || s.offset < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cohort stream ", b, ": ", s.feat_frames, " feature frames, offset ", s.offset,
          ", history ", t1, " (need >= ", c.right_context() + 1, " frames and history <= offset)"));
    }
    begin[b] = m;
    m += rows[b];
    pos_start[b] = s.offset - t1;
    pos_end[b] = s.offset + rows[b];
    max_keys = std::max(max_keys, t1 + rows[b]);
    max_end = std::max(max_end, pos_end[b]);
  }
  const int64_t m_conv = m + nb * k1;

  const int64_t max_rows = *std::max_element(rows.begin(), rows.end());
  float* x = Scratch(kX, m * d);
  float* h = Scratch(kH, m * d);
  float* out = Scratch(kOut, m * d);
  float* hidden = Scratch(kHidden, m * units);
  float* qkv = Scratch(kQkv, m * 3 * d);
  float* attn = Scratch(kAttn, m * d);
  float* conv_in = Scratch(kConvIn, m_conv * d);
  float* conv_mid = Scratch(kConvMid, m_conv * 2 * d);
  float* conv_glu = Scratch(kConvGlu, m_conv * d);

  for (int64_t b = 0; b < nb; ++b) Subsample(streams[b].feats, streams[b].feat_frames, x + begin[b] * d);

  // Position rows: from the shared table below its limit, projected here above.
  table_->Ensure(max_end);
  const int64_t table_end = table_->max_positions();
  std::vector<std::vector<float>> extra_pos(nb);
  std::vector<int64_t> extra_base(nb, 0);
  for (int64_t b = 0; b < nb; ++b) {
    if (pos_end[b] <= table_end) continue;
    extra_base[b] = std::max(pos_start[b], table_end);
    const int64_t n = pos_end[b] - extra_base[b];
    extra_pos[b].resize(static_cast<size_t>(layers * n * d));
    table_->ProjectRows(extra_base[b], n, extra_pos[b].data());
  }

  for (int l = 0; l < layers; ++l) {
    const ConformerLayerWeights& lw = w.layers[l];
    const PackedLayer& pw = packed_[l];
    // Macaron feed-forward.
    cpu::LayerNormRows(x, m, d, d, lw.norm_ff_macaron, h, d);
    HalfFeedForward(pw.ff_macaron_w1, pw.ff_macaron_w2, h, m, hidden, out, x);

    // Self-attention.
    cpu::LayerNormRows(x, m, d, d, lw.norm_mha, h, d);
    Linear(pw.qkv, h, m, d, qkv, 3 * d);
    float* kv_out = new_kv + static_cast<int64_t>(l) * m * 2 * d;
    for (int64_t r = 0; r < m; ++r) {
      std::memcpy(kv_out + r * 2 * d, qkv + r * 3 * d + d, 2 * d * sizeof(float));
    }
    const float* u = lw.pos_bias_u.data<float>();
    const float* v = lw.pos_bias_v.data<float>();
    pool_->ParallelFor(nb * heads, [&](int64_t task) {
      const int64_t b = task / heads, head = task % heads;
      // Scratch of the thread running this task.
      float* q_u = Scratch(kQu, max_rows * dk);
      float* q_v = Scratch(kQv, max_rows * dk);
      float* scores = Scratch(kScores, max_keys * max_rows);
      thread_local std::vector<KvSegment> kv;
      thread_local std::vector<PosSegment> pos;
      const float* q_rows = qkv + begin[b] * 3 * d;
      for (int64_t r = 0; r < rows[b]; ++r) {
        const float* q = q_rows + r * 3 * d + head * dk;
        for (int64_t j = 0; j < dk; ++j) {
          q_u[r * dk + j] = q[j] + u[head * dk + j];
          q_v[r * dk + j] = q[j] + v[head * dk + j];
        }
      }
      kv.clear();
      streams[b].history->AppendSegments(l, static_cast<int>(head), &kv);
      kv.push_back(KvSegment{q_rows + d + head * dk, q_rows + 2 * d + head * dk, rows[b], 3 * d});
      pos.clear();
      for (int64_t p = pos_start[b]; p < pos_end[b];) {
        if (p < table_end) {
          int64_t contiguous = 0;
          const float* row = table_->Rows(l, p, &contiguous);
          const int64_t n = std::min({contiguous, pos_end[b] - p, table_end - p});
          pos.push_back(PosSegment{row + head * dk, n, d});
          p += n;
        } else {
          const int64_t n_extra = pos_end[b] - extra_base[b];
          const float* row = extra_pos[b].data() + (l * n_extra + (p - extra_base[b])) * d;
          pos.push_back(PosSegment{row + head * dk, pos_end[b] - p, d});
          p = pos_end[b];
        }
      }
      RelPosAttentionParams params;
      params.q_u = q_u;
      params.q_v = q_v;
      params.ldq = dk;
      params.queries = rows[b];
      params.d_k = dk;
      params.kv = kv.data();
      params.num_kv = static_cast<int>(kv.size());
      params.pos = pos.data();
      params.num_pos = static_cast<int>(pos.size());
      params.out = attn + begin[b] * d + head * dk;
      params.ldo = d;
      params.scores = scores;
      RelPosAttentionCpu(params);
    });
    Linear(pw.attn_out, attn, m, d, x, d, /*accumulate=*/true);

    // Convolution module: each stream's cached rows, then its new rows.
    cpu::LayerNormRows(x, m, d, d, lw.norm_conv, h, d);
    for (int64_t b = 0; b < nb; ++b) {
      float* g = conv_in + (begin[b] + b * k1) * d;
      std::memcpy(g, streams[b].cnn_cache + l * k1 * d, k1 * d * sizeof(float));
      std::memcpy(g + k1 * d, h + begin[b] * d, rows[b] * d * sizeof(float));
    }
    for (int64_t b = 0; b < nb; ++b) {
      const float* g = conv_in + (begin[b] + b * k1) * d;
      std::memcpy(streams[b].cnn_cache_out + l * k1 * d, g + rows[b] * d, k1 * d * sizeof(float));
    }
    Linear(pw.pointwise_conv1, conv_in, m_conv, d, conv_mid, 2 * d);
    cpu::GluRows(conv_mid, m_conv, d, conv_glu);
    const float* dw = depthwise_t_[l].data();
    const float* dw_bias = lw.depthwise_bias.data<float>();
    for (int64_t b = 0; b < nb; ++b) {
      const float* g = conv_glu + (begin[b] + b * k1) * d;
      for (int64_t t = 0; t < rows[b]; ++t) {
        float* o = out + (begin[b] + t) * d;
        std::copy(dw_bias, dw_bias + d, o);
        for (int64_t j = 0; j <= k1; ++j) {
          const float* in = g + (t + j) * d;
          const float* wj = dw + j * d;
          for (int64_t ch = 0; ch < d; ++ch) o[ch] += wj[ch] * in[ch];
        }
      }
    }
    if (c.cnn_module_norm == ConvNorm::kLayerNorm) {
      cpu::LayerNormRows(out, m, d, d, lw.conv_norm, out, d);
    } else {
      cpu::AffineRows(out, m, d, d, lw.conv_norm);
    }
    cpu::SwishInPlace(out, m * d);
    Linear(pw.pointwise_conv2, out, m, d, x, d, /*accumulate=*/true);

    // Feed-forward, then the layer's final norm.
    cpu::LayerNormRows(x, m, d, d, lw.norm_ff, h, d);
    HalfFeedForward(pw.ff_w1, pw.ff_w2, h, m, hidden, out, x);
    cpu::LayerNormRows(x, m, d, d, lw.norm_final, x, d);
  }
  cpu::LayerNormRows(x, m, d, d, w.after_norm, x, d);
  Linear(ctc_, x, m, d, log_probs, c.output_dim);
  cpu::LogSoftmaxRows(log_probs, m, c.output_dim);
  return absl::OkStatus();
}

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
    return ShapeError(index, "att_cache", a, absl::StrCat("[", layers, ", ", heads, ", t1, ", 2 * dk, "]"));
  }
  if (in.offset < a[2]) {
    return absl::InvalidArgumentError(absl::StrCat("chunk input ", index, ": offset ", in.offset,
                                                   " is below the cache length ", a[2]));
  }
  OASR_RETURN_IF_ERROR(CheckCpuFloat(index, "cnn_cache", in.cnn_cache));
  const Shape want_cnn{layers, c.cnn_module_kernel - 1, c.output_size};
  if (!(in.cnn_cache.shape() == want_cnn) || in.cnn_cache.empty()) {
    return ShapeError(index, "cnn_cache", in.cnn_cache.shape(), want_cnn.ToString());
  }
  return absl::OkStatus();
}

absl::StatusOr<DenseChunkOutput> ConformerEncoder::ForwardChunk(const DenseChunkInput& input,
                                                                int required_cache_size) const {
  OASR_ASSIGN_OR_RETURN(std::vector<DenseChunkOutput> out,
                        ForwardChunks({input}, required_cache_size));
  return std::move(out[0]);
}

absl::StatusOr<std::vector<DenseChunkOutput>> ConformerEncoder::ForwardChunks(
    const std::vector<DenseChunkInput>& inputs, int required_cache_size) const {
  const ModelConfig& c = config();
  const int64_t layers = c.num_blocks, heads = c.attention_heads, dk = c.head_dim();
  const int64_t d = c.output_size, vocab = c.output_dim;
  if (required_cache_size < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("required_cache_size=", required_cache_size, " must be >= -1"));
  }
  std::vector<DenseAttentionHistory> histories;
  histories.reserve(inputs.size());
  std::vector<CohortStream> streams(inputs.size());
  std::vector<DenseChunkOutput> outputs(inputs.size());
  int64_t m = 0;
  for (size_t b = 0; b < inputs.size(); ++b) {
    const DenseChunkInput& in = inputs[b];
    OASR_RETURN_IF_ERROR(ValidateDense(in, static_cast<int>(b)));
    histories.emplace_back(static_cast<const float*>(in.att_cache.data()),
                           static_cast<int>(heads), in.att_cache.dim(2), dk);
    OASR_ASSIGN_OR_RETURN(outputs[b].cnn_cache,
                          Tensor::Empty(in.cnn_cache.shape(), DType::kFloat32));
    streams[b] = CohortStream{in.feats.data<float>(), in.feats.dim(0), in.offset, &histories[b],
                              in.cnn_cache.data<float>(), outputs[b].cnn_cache.data<float>()};
    m += OutputFrames(in.feats.dim(0));
  }
  float* log_probs = Scratch(kLogProbs, m * vocab);
  float* new_kv = Scratch(kNewKv, layers * m * 2 * d);
  OASR_RETURN_IF_ERROR(ForwardCohort(streams, log_probs, new_kv));

  int64_t row = 0;
  for (size_t b = 0; b < inputs.size(); ++b) {
    const int64_t rows = OutputFrames(inputs[b].feats.dim(0));
    const int64_t t1 = inputs[b].att_cache.dim(2);
    DenseChunkOutput& o = outputs[b];
    OASR_ASSIGN_OR_RETURN(o.log_probs, Tensor::Empty({rows, vocab}, DType::kFloat32));
    std::memcpy(o.log_probs.data(), log_probs + row * vocab, o.log_probs.nbytes());
    // Keep the last `keep` of the t1 + rows keys, as WeNet's forward_chunk.
    const int64_t total = t1 + rows;
    const int64_t keep = required_cache_size < 0 ? total : std::min<int64_t>(total, required_cache_size);
    OASR_ASSIGN_OR_RETURN(o.att_cache, Tensor::Empty({layers, heads, keep, 2 * dk}, DType::kFloat32));
    const float* old_cache = static_cast<const float*>(inputs[b].att_cache.data());
    float* dst = o.att_cache.data<float>();
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t head = 0; head < heads; ++head) {
        for (int64_t i = total - keep; i < total; ++i, dst += 2 * dk) {
          if (i < t1) {
            std::memcpy(dst, old_cache + ((l * heads + head) * t1 + i) * 2 * dk, 2 * dk * sizeof(float));
          } else {
            const float* src = new_kv + (l * m + row + i - t1) * 2 * d + head * dk;
            std::memcpy(dst, src, dk * sizeof(float));
            std::memcpy(dst + dk, src + d, dk * sizeof(float));
          }
        }
      }
    }
    row += rows;
  }
  return outputs;
}

Shape ConformerEncoder::ConvStateShape() const {
  const ModelConfig& c = config();
  return Shape{c.num_blocks, c.cnn_module_kernel - 1, c.output_size};
}

absl::Status ConformerEncoder::ValidatePaged(std::span<const PagedKvLayer> pool,
                                             const PagedChunkInput& in, int index) const {
  const ModelConfig& c = config();
  if (in.feats == nullptr || in.cnn_cache == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("paged chunk input ", index, ": feats and cnn_cache must not be null"));
  }
  const int64_t rows = OutputFrames(in.feat_frames);
  if (rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat("paged chunk input ", index, ": ",
                                                   in.feat_frames, " feature frames, need at least ",
                                                   c.right_context() + 1));
  }
  if (in.kv.length < 0 || in.offset < in.kv.length) {
    return absl::InvalidArgumentError(absl::StrCat("paged chunk input ", index, ": offset ",
                                                   in.offset, " is below the cache length ",
                                                   in.kv.length, " (or the length is negative)"));
  }
  if (in.kv.block_row == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("paged chunk input ", index, ": block_row must not be null"));
  }
  // Every table entry the chunk reads or writes must name a block of the pool;
  // the layers share the row, so the smallest pool bounds it.
  const int64_t block_size = pool[0].block_size;
  int64_t num_blocks = pool[0].num_blocks;
  for (const PagedKvLayer& layer : pool) num_blocks = std::min(num_blocks, layer.num_blocks);
  const int64_t used = (in.kv.length + rows + block_size - 1) / block_size;
  for (int64_t i = 0; i < used; ++i) {
    const int32_t block = in.kv.block_row[i];
    if (block < 0 || block >= num_blocks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "paged chunk input ", index, ": block_row[", i, "] = ", block, " is outside [0, ",
          num_blocks, ") (positions up to ", in.kv.length + rows, " need ", used,
          " reserved blocks)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ConformerEncoder::ForwardChunkPaged(std::span<const PagedKvLayer> pool,
                                                 const PagedChunkInput& input,
                                                 float* log_probs) const {
  return ForwardChunksPaged(pool, std::span<const PagedChunkInput>(&input, 1), log_probs);
}

absl::Status ConformerEncoder::ForwardChunksPaged(std::span<const PagedKvLayer> pool,
                                                  std::span<const PagedChunkInput> inputs,
                                                  float* log_probs) const {
  const ModelConfig& c = config();
  const int layers = c.num_blocks;
  const int64_t d = c.output_size;
  if (inputs.empty()) return absl::OkStatus();
  if (static_cast<int>(pool.size()) != layers) {
    return absl::InvalidArgumentError(absl::StrCat("paged pool: ", pool.size(),
                                                   " layers given, the model has ", layers));
  }
  for (int l = 0; l < layers; ++l) {
    const PagedKvLayer& p = pool[l];
    if (p.k == nullptr || p.v == nullptr || p.block_size < 1 || p.num_blocks < 1 ||
        p.block_size != pool[0].block_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "paged pool layer ", l, ": k/v must be non-null with block_size >= 1 (the same in "
          "every layer, ", pool[0].block_size, ") and num_blocks >= 1; got block_size ",
          p.block_size, ", num_blocks ", p.num_blocks));
    }
  }
  std::vector<PagedKvHistory> histories;
  histories.reserve(inputs.size());
  std::vector<CohortStream> streams(inputs.size());
  int64_t m = 0;
  for (size_t b = 0; b < inputs.size(); ++b) {
    const PagedChunkInput& in = inputs[b];
    OASR_RETURN_IF_ERROR(ValidatePaged(pool, in, static_cast<int>(b)));
    histories.emplace_back(pool.data(), in.kv, c.attention_heads, c.head_dim());
    streams[b] = CohortStream{in.feats, in.feat_frames, in.offset, &histories[b], in.cnn_cache,
                              in.cnn_cache};
    m += OutputFrames(in.feat_frames);
  }
  float* new_kv = Scratch(kNewKv, layers * m * 2 * d);
  OASR_RETURN_IF_ERROR(ForwardCohort(streams, log_probs, new_kv));

  // New K/V rows go to positions [len, len + rows) of each stream's row.
  int64_t row = 0;
  for (const PagedChunkInput& in : inputs) {
    const int64_t rows = OutputFrames(in.feat_frames);
    for (int l = 0; l < layers; ++l) {
      const PagedKvLayer& p = pool[l];
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t pos = in.kv.length + i;
        const int64_t dst =
            (static_cast<int64_t>(in.kv.block_row[pos / p.block_size]) * p.block_size +
             pos % p.block_size) * d;
        const float* src = new_kv + (static_cast<int64_t>(l) * m + row + i) * 2 * d;
        std::memcpy(p.k + dst, src, d * sizeof(float));
        std::memcpy(p.v + dst, src + d, d * sizeof(float));
      }
    }
    row += rows;
  }
  return absl::OkStatus();
}

}  // namespace oasr::encoder
