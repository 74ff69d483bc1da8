// The streaming Conformer encoder and CTC head (spec sections 2-4) as a
// composition of the ops in kernels/: conv2d subsampling, macaron FFNs,
// relative-position attention over a paged K/V pool, the causal conv module
// over slot-addressed state, after_norm, the CTC projection and log_softmax.
// The same code runs on every backend: the ops are created for the
// ExecutionContext's device (CPU float32; CUDA float32, bfloat16 or float16
// storage with float32 accumulation) and dispatch there.
//
// A cohort is B rows, each one stream's chunk at its own offset, history
// length and frame count. Activations are laid out [B, chunk, ...] so every
// per-frame op is one call over B * chunk rows; attention and the conv module
// read each row's own history (its block-table row) and state (its slot).
// The residual stream stays float32 on every backend.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/execution_context.h"
#include "common/tensor.h"
#include "encoder/conformer_model.h"
#include "encoder/rel_position_table.h"
#include "kernels/conv2d.h"
#include "kernels/linear.h"

namespace oasr::encoder {

struct EncoderOptions {
  // Weights, activations, the K/V pool and the conv state: float32 on the
  // CPU; float32, bfloat16 or float16 on CUDA.
  DType dtype = DType::kFloat32;
  // Positions of the shared linear_pos(pe) table (rounded up to 256); later
  // positions are projected as they are needed. On the CPU rows are filled
  // on demand (d * layers * 4 bytes each); on CUDA the table is computed at
  // load. 16384 positions are about 11 minutes of audio at 40 ms frames.
  int64_t max_table_positions = 16384;
  // CUDA: how the fused subsampling stem computes (kernels::StemKernel).
  // kImplicitGemm (stage 1 on the tensor cores written once, stage 2 an
  // implicit GEMM on the Hopper kernel; elsewhere kTensorCores) makes the
  // chunk step 9-10 % shorter than kTensorCores at B = 2,048-8,192 on an
  // H100 (session 47); kTensorCores (stage 1 on the tensor cores inside
  // stage 2's patch gather, then cuBLASLt) was ~5 % faster than kRecompute
  // (stage 1 in float32 FMAs inside the gather) on an H200. All three pass
  // the kernel harness and encoder parity.
  kernels::StemKernel stem = kernels::StemKernel::kImplicitGemm;
  // CUDA, 16-bit, d_model 256: each feed-forward module -- its norm, both
  // products, swish, the residual add and, after the second, the layer's
  // final norm -- as one kernel (kernels::FeedForwardOp), the hidden
  // activation never in device memory. Off by default: its mma.sync main
  // loop makes the chunk step 16 % slower than cuBLASLt's products with the
  // separate passes (12.4 against 14.5 ms at B = 2048 on an H100).
  bool fused_feed_forward = false;
  // CUDA, 16-bit: which kernel computes the products (kernels::GemmKernel).
  // On a Hopper GPU the layer norms after the residual products run in the
  // products' epilogues (kAuto = kNorms: for cohorts of a wave of tiles and
  // more), and swish's too with kFused or kWgmma.
  kernels::GemmKernel gemm = kernels::GemmKernel::kAuto;
  // The K/V pool in float8 e4m3 instead of dtype: half the pool's memory
  // (a bfloat16 pool is ~90 % of a stream's device memory) and of the
  // attention's reads. Each chunk attends to its own K/V unrounded; they are
  // rounded (to nearest even, saturating at +-448) as they go into the pool.
  // The CPU, and CUDA in 16 bits with head dims a multiple of 16.
  bool kv_fp8 = false;

  // Ranges: max_table_positions in [256, 2^24]; dtype one of the three.
  absl::Status Validate() const;
};

// One tick's cohort on the encoder's device. Non-owning.
struct CohortInputs {
  int batch = 0;  // Rows B.
  int chunk = 0;  // Encoder frames a full row produces (the row capacity).
  // [B, WindowFrames(chunk), input_dim] float32, CMVN applied; a row's frames
  // past its window (a short last chunk) must be zero.
  const float* feats = nullptr;
  // [B] int32 on the device, and the same values on the host.
  const int32_t* slots = nullptr;    // Block-table row and conv-state slot.
  const int32_t* frames = nullptr;   // Encoder frames the row produces, in [1, chunk].
  const int32_t* offsets = nullptr;  // Encoder frames of the stream before the chunk.
  const int32_t* host_slots = nullptr;
  const int32_t* host_frames = nullptr;
  const int32_t* host_offsets = nullptr;
};

// The paged K/V pool (flash-attention's contract) and its tables. Non-owning.
struct PagedKv {
  // [layers, num_blocks, block_size, heads, d_k] in the encoder's kv_dtype().
  void* k = nullptr;
  void* v = nullptr;
  int64_t num_blocks = 0;  // Physical blocks (scratch blocks included).
  int block_size = 0;
  // [rows, table_stride] and [rows] by slot, on the device and on the host.
  // Row b's history position p is in block table[slot][p / block_size]; the
  // blocks for [cache_len, cache_len + frames) must already be reserved.
  const int32_t* block_table = nullptr;
  const int32_t* cache_lens = nullptr;
  const int32_t* host_block_table = nullptr;
  const int32_t* host_cache_lens = nullptr;
  int64_t table_stride = 0;
};

// The conv module's left context of every slot: [layers, num_slots, K - 1, d]
// in the encoder's dtype (slot axis 1). Zero is a new stream's state.
struct ConvStates {
  void* data = nullptr;
  int64_t num_slots = 0;
};

// One chunk of one stream with dense caches, for tests and tools (the
// serving path is ForwardCohort). Host tensors.
struct DenseChunkInput {
  // [T, input_dim] float32, CMVN-normalised fbank; T >= right_context + 1.
  TensorView feats;
  // Encoder frames this stream produced before this chunk (>= t1).
  int64_t offset = 0;
  // [layers, heads, t1, 2 * d_k] float32, K then V on the last axis (WeNet's
  // att_cache layout); t1 = 0 (data may be null) for the first chunk.
  TensorView att_cache;
  // [layers, K - 1, d] float32: the encoder's conv state (ConvStateShape);
  // zeros for a new stream.
  TensorView cnn_cache;
};

struct DenseChunkOutput {
  Tensor log_probs;  // [c, V] CTC log-probabilities of the chunk's frames.
  Tensor encoder_out;  // [c, d] the encoder output they were computed from.
  Tensor att_cache;  // [layers, heads, t1', 2 * d_k], t1' = min(t1 + c, required).
  Tensor cnn_cache;  // [layers, K - 1, d]
};

class ConformerEncoder {
 public:
  // `model` and `ctx` must outlive the encoder; the weights are prepared for
  // ctx's device once, here. INVALID_ARGUMENT for invalid options or a dtype
  // the device does not compute in; RESOURCE_EXHAUSTED when device memory
  // cannot be had.
  static absl::StatusOr<std::unique_ptr<ConformerEncoder>> Create(const ConformerModel* model,
                                                                  ExecutionContext* ctx,
                                                                  const EncoderOptions& options);
  ~ConformerEncoder();

  const ModelConfig& config() const { return model_->config(); }
  DType dtype() const { return options_.dtype; }
  // The K/V pool's dtype: float8 e4m3 with EncoderOptions::kv_fp8, else dtype().
  DType kv_dtype() const { return options_.kv_fp8 ? DType::kFloat8E4M3 : options_.dtype; }
  ExecutionContext& context() const { return *ctx_; }

  // Encoder frames a window of `feature_frames` produces (0 when too short).
  int64_t OutputFrames(int64_t feature_frames) const;

  // One stream's conv state, [layers, K - 1, d] (stored with a slot axis
  // after the layer axis).
  Shape ConvStateShape() const;

  // Bytes of ctx.workspace() a forward of `batch` rows of `chunk` frames
  // takes (measured by running its allocations on a measuring arena).
  size_t WorkspaceBytes(int batch, int chunk) const;

  // Runs every row's chunk in one batched pass on ctx: writes log_probs
  // [B, chunk, V] float32 on the device (a row's frames past its count are
  // garbage), each row's new K/V into its reserved blocks and its new conv
  // state over its slot. Does not advance the cache lengths (the cache
  // manager's commit). Asynchronous on CUDA. INVALID_ARGUMENT naming the row
  // and field (frames, offsets below the cache length, block ids outside the
  // pool, too little workspace) before anything is written. With
  // `encoder_out` (optional, [B, chunk, d] float32 on the device) the
  // encoder output (after after_norm, what the CTC head and an attention
  // decoder read) is written there too.
  absl::Status ForwardCohort(const CohortInputs& in, const PagedKv& kv, const ConvStates& conv,
                             float* log_probs, float* encoder_out = nullptr);

  // --- Dense caches (tests and tools) -------------------------------------
  // Runs one chunk of one stream. required_cache_size < 0 keeps all history,
  // >= 0 keeps that many frames (chunk_size * num_left_chunks), as WeNet's
  // forward_chunk. Copies through a private pool on ctx's device (allocates).
  // INVALID_ARGUMENT names the input whose shape, dtype, device or offset is
  // wrong.
  absl::StatusOr<DenseChunkOutput> ForwardChunk(const DenseChunkInput& input,
                                                int required_cache_size);
  // The same for several streams in one cohort; each stream's output equals
  // what ForwardChunk gives it alone. Inputs may differ in offset, history
  // length and chunk length.
  absl::StatusOr<std::vector<DenseChunkOutput>> ForwardChunks(
      const std::vector<DenseChunkInput>& inputs, int required_cache_size);

 private:
  struct Layer;
  struct Buffers;
  ConformerEncoder(const ConformerModel* model, ExecutionContext* ctx,
                   const EncoderOptions& options);
  absl::Status Init();
  // Device copy of `n` floats (the host pointer itself on the CPU).
  absl::StatusOr<const float*> Upload(const float* host, int64_t n);
  absl::Status BuildPositionTable();
  // Carves the activations of a cohort from `arena` (nullptrs when it is
  // too small; a measuring arena records the need).
  Buffers AllocateBuffers(Arena& arena, int batch, int chunk) const;
  absl::Status CheckInputs(const CohortInputs& in, const PagedKv& kv, const ConvStates& conv) const;
  absl::Status ValidateDense(const DenseChunkInput& in, int index) const;

  const ConformerModel* model_;
  ExecutionContext* ctx_;
  EncoderOptions options_;
  std::vector<Layer> layers_;
  std::vector<kernels::Conv2dOp> subsampling_;
  // Stages before this one run fused into it (CUDA: the first, one-channel
  // stage inside the second's patch gather); 0 runs every stage.
  size_t first_stage_ = 0;
  // CUDA, 16-bit, the wgmma kernel: every layer norm but the first is
  // computed in the epilogue of the residual product before it
  // (kernels::LinearArgs' norms), no pass of its own.
  bool fused_norms_ = false;
  kernels::LinearOp embed_out_;  // With sqrt(d) folded in.
  kernels::LinearOp ctc_;
  const float* after_norm_scale_ = nullptr;
  const float* after_norm_shift_ = nullptr;
  std::vector<Tensor> device_tensors_;  // Uploaded weights (CUDA).
  // linear_pos(pe) rows: on the CPU filled on demand, on CUDA [layers, P, d]
  // computed at load.
  std::unique_ptr<RelPositionTable> cpu_table_;
  Tensor device_table_;
  int64_t table_rows_ = 0;
};

}  // namespace oasr::encoder
