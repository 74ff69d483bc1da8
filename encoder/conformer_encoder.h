// The streaming Conformer encoder and CTC head on the CPU (spec sections
// 2-4): conv2d subsampling, relative-position attention over cached K/V,
// macaron FFNs, the causal conv module, after_norm and log_softmax.
//
// One set of layer maths (ForwardCohort) runs any number of streams at
// once: their chunk rows are stacked for every per-frame GEMM, while
// attention and the conv module run per stream over that stream's own
// history, offset and chunk length, so streams at different offsets with
// different history lengths share one call and each gets exactly what it
// would alone. Where the history lives is abstracted (AttentionHistory), so
// the dense WeNet caches and a paged block pool (paged_kv_history.h) use the
// same code.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "encoder/conformer_model.h"
#include "encoder/packed_linear.h"
#include "encoder/paged_kv_history.h"
#include "encoder/rel_pos_attention.h"
#include "encoder/rel_position_table.h"
#include "encoder/thread_pool.h"

namespace oasr::encoder {

struct EncoderOptions {
  // Threads for one forward call: the encoder's own pool (packed GEMMs,
  // attention heads) and OpenBLAS (subsampling convs, position table).
  // OpenBLAS keeps one process-wide setting, so the last encoder created
  // decides that part for the whole process.
  int num_threads = 1;
  // Positions of the shared linear_pos(pe) table kept in memory (rounded up
  // to 256); later positions are projected per chunk. 16384 positions are
  // about 11 minutes of audio at 40 ms frames (d * layers * 4 bytes each).
  int64_t max_table_positions = 16384;

  // Ranges: num_threads in [1, 256], max_table_positions in [256, 2^24].
  absl::Status Validate() const;
};

// One chunk of one stream with dense WeNet-layout caches.
struct DenseChunkInput {
  // [T, input_dim] float32 CPU, CMVN-normalised fbank; T >= right_context+1
  // (7 for conv2d). Typically WindowFrames(chunk_size) frames, fewer at the
  // end of a stream.
  TensorView feats;
  // Encoder frames this stream produced before this chunk (>= t1).
  int64_t offset = 0;
  // [layers, heads, t1, 2 * d_k] float32 CPU, K then V on the last axis;
  // t1 = 0 (data may be null) for the first chunk.
  TensorView att_cache;
  // [layers, K - 1, d] float32 CPU: the last K - 1 rows of each layer's
  // norm_conv output (time-major, unlike WeNet's (layers, 1, d, K - 1));
  // zeros for a new stream.
  TensorView cnn_cache;
};

struct DenseChunkOutput {
  Tensor log_probs;  // [c, V] CTC log-probabilities of the chunk's frames.
  Tensor att_cache;  // [layers, heads, t1', 2 * d_k], t1' = min(t1 + c, required).
  Tensor cnn_cache;  // [layers, K - 1, d]
};

// One chunk of one stream whose attention history lives in a paged pool.
// Non-owning.
struct PagedChunkInput {
  const float* feats = nullptr;  // [feat_frames, input_dim] float32 CPU, CMVN applied.
  int64_t feat_frames = 0;       // >= right_context + 1.
  int64_t offset = 0;            // Encoder frames before the chunk (>= kv.length).
  // The stream's block-table row and cache length. The row must already hold
  // the blocks for positions [kv.length, kv.length + output frames), where the
  // chunk's new K/V rows are written (the cache manager's Prepare reserves them).
  PagedKvRow kv;
  float* cnn_cache = nullptr;  // [layers, K - 1, d]: read, then overwritten in place.
};

class ConformerEncoder {
 public:
  // One stream's part of a cohort call (all pointers non-owning).
  struct CohortStream {
    const float* feats = nullptr;  // [feat_frames, input_dim], CMVN applied.
    int64_t feat_frames = 0;
    int64_t offset = 0;                          // Encoder frames before the chunk.
    const AttentionHistory* history = nullptr;   // Retained K/V (length t1 <= offset).
    const float* cnn_cache = nullptr;            // [layers, K - 1, d]
    float* cnn_cache_out = nullptr;              // [layers, K - 1, d]; may alias cnn_cache.
  };

  // `model` must outlive the encoder. Fails on invalid options.
  static absl::StatusOr<std::unique_ptr<ConformerEncoder>> Create(const ConformerModel* model,
                                                                  const EncoderOptions& options);

  const ModelConfig& config() const { return model_->config(); }

  // Encoder frames a window of `feature_frames` produces (0 when too short).
  int64_t OutputFrames(int64_t feature_frames) const;

  // Runs one chunk of one stream. required_cache_size < 0 keeps all history,
  // >= 0 keeps that many frames (chunk_size * num_left_chunks), as WeNet's
  // forward_chunk. INVALID_ARGUMENT names the input whose shape, dtype,
  // device or offset is wrong. Thread-safe: concurrent calls are allowed.
  absl::StatusOr<DenseChunkOutput> ForwardChunk(const DenseChunkInput& input,
                                                int required_cache_size) const;

  // The same for a cohort of streams in one call; each stream's output
  // equals what ForwardChunk gives it alone. Inputs may differ in offset,
  // history length and chunk length.
  absl::StatusOr<std::vector<DenseChunkOutput>> ForwardChunks(
      const std::vector<DenseChunkInput>& inputs, int required_cache_size) const;

  // Runs one chunk of one stream over a paged K/V pool: attends to the
  // stream's retained history read from `pool` (one PagedKvLayer per layer),
  // writes the chunk's K/V rows into the reserved positions of its row and
  // its new conv state over input.cnn_cache, and log_probs [c, V]
  // (caller-owned, c = OutputFrames(feat_frames)). Does not evict or advance
  // the cache length: that is the cache manager's commit. INVALID_ARGUMENT
  // naming the input (or the pool layer) that is wrong, before anything is
  // written. Thread-safe for calls that touch disjoint rows and states.
  absl::Status ForwardChunkPaged(std::span<const PagedKvLayer> pool, const PagedChunkInput& input,
                                 float* log_probs) const;

  // The same for a cohort of streams in one call (one batched pass, as
  // ForwardChunks): log_probs [sum of output frames, V] in input order. Each
  // stream gets exactly what ForwardChunkPaged gives it alone; streams may
  // differ in offset, history length and chunk length, and must use distinct
  // blocks for their new rows.
  absl::Status ForwardChunksPaged(std::span<const PagedKvLayer> pool,
                                  std::span<const PagedChunkInput> inputs, float* log_probs) const;

  // The per-stream fixed state the encoder carries between chunks besides its
  // attention history: the conv module's left context, [layers, K - 1, d]
  // float32 (the cnn_cache of both entry points), zero for a new stream.
  Shape ConvStateShape() const;

  // The layer maths over a cohort, for callers that keep history elsewhere.
  // Writes log_probs [M, V] and new_kv [layers, M, 2d] (each row: K of all
  // heads, then V; head-major within each) where M is the sum of the
  // streams' output frames, in stream order, and each stream's new conv
  // cache. Inputs must already be validated (INVALID_ARGUMENT otherwise for
  // the checks that are cheap here).
  absl::Status ForwardCohort(const std::vector<CohortStream>& streams, float* log_probs,
                             float* new_kv) const;

 private:
  ConformerEncoder(const ConformerModel* model, const EncoderOptions& options);

  // Conv2d subsampling of one stream's window into out [frames, d].
  void Subsample(const float* feats, int64_t feat_frames, float* out) const;

  absl::Status ValidateDense(const DenseChunkInput& in, int index) const;
  absl::Status ValidatePaged(std::span<const PagedKvLayer> pool, const PagedChunkInput& in,
                             int index) const;

  // y = x W^T + b (or y += ...) over m rows, split across the pool by
  // output panels when the product is large enough to pay for it.
  void Linear(const PackedLinear& w, const float* x, int64_t m, int64_t ldx, float* y,
              int64_t ldy, bool accumulate = false) const;
  // w_2(swish(w_1 x)) added to y with factor 0.5 (the macaron halves).
  void HalfFeedForward(const PackedLinear& w1, const PackedLinear& w2, const float* x, int64_t m,
                       float* hidden, float* out, float* y) const;

  const ConformerModel* model_;
  EncoderOptions options_;
  // Every Linear of the model, packed for small row counts.
  struct PackedLayer {
    PackedLinear ff_macaron_w1, ff_macaron_w2, ff_w1, ff_w2, qkv, attn_out, pointwise_conv1,
        pointwise_conv2;
  };
  std::vector<PackedLayer> packed_;
  PackedLinear embed_out_;
  PackedLinear ctc_;
  // Depthwise conv weights transposed to [K, d] per layer, for row-wise sums.
  std::vector<std::vector<float>> depthwise_t_;
  std::unique_ptr<RelPositionTable> table_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace oasr::encoder
