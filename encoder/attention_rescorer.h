// Attention rescoring (WeNet's "attention_rescoring"): scores the CTC n-best
// of one segment with the model's attention decoder over that segment's
// encoder output, teacher-forced, in one pass per direction (the maths:
// docs/model-format.md, "Attention decoder").
//
// It computes on its context's device: the CPU, or CUDA (cuBLASLt in true
// float32 for the linears, kernels/decoder_ops.h for the embedding, the
// attention over each row's span and the target log-probabilities). Every
// buffer of a pass -- the cross-attention K/V of the segment, the
// hypotheses' activations and self-attention K/V, the output logits -- is
// allocated once, on that device, for the longest segment and the largest
// n-best the rescorer is created for; Score allocates nothing there.
// Hypotheses are packed without padding (one row per decoder position) and
// run in groups whose rows fit the buffers, so a group's size never changes
// a score.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/execution_context.h"
#include "common/tensor.h"
#include "encoder/attention_decoder.h"
#include "encoder/conformer_model.h"
#include "kernels/linear.h"

namespace oasr::encoder {

struct RescorerOptions {
  // The longest segment, in encoder frames (its hypotheses have at most this
  // many tokens).
  int64_t max_frames = 750;
  // Decoder positions (tokens + 1 per hypothesis) per group; 0 derives it:
  // max(max_frames + 1, 512). At least max_frames + 1.
  int64_t max_rows = 0;
  // Encoder frames of all the segments one ScoreSegments call takes (their
  // packed memory); 0: max_frames. At least max_frames.
  int64_t max_batch_frames = 0;
  // The linears' dtype: float32, or (CUDA only) bfloat16 or float16 on the
  // tensor cores, the activations between them in that dtype; the residual
  // stream, attention, softmax and the score sums stay float32.
  DType dtype = DType::kFloat32;

  // INVALID_ARGUMENT naming the field: max_frames in [1, 2^20], max_rows 0 or
  // in [max_frames + 1, 2^22], max_batch_frames 0 or in [max_frames, 2^24].
  absl::Status Validate() const;
};

// One segment of a ScoreSegments call: its encoder output is the rows
// [first_frame, first_frame + frames) of the packed memory; its hypotheses'
// scores go to left and (when non-empty) right, as Score's do.
struct RescoreSegment {
  int64_t first_frame = 0;
  int64_t frames = 0;
  std::span<const std::span<const int32_t>> hyps;
  std::span<double> left;
  std::span<double> right;
};

class AttentionRescorer {
 public:
  // For `model`'s attention decoder on `ctx` (both must outlive the
  // rescorer; the weights are prepared for ctx's device). FAILED_PRECONDITION
  // for a model without one; INVALID_ARGUMENT for bad options;
  // RESOURCE_EXHAUSTED when the buffers cannot be had.
  static absl::StatusOr<std::unique_ptr<AttentionRescorer>> Create(const ConformerModel* model,
                                                                   ExecutionContext* ctx,
                                                                   const RescorerOptions& options);
  ~AttentionRescorer();

  const AttentionDecoderConfig& config() const { return model_->attention_decoder()->config; }
  const RescorerOptions& options() const { return options_; }
  int64_t encoder_dim() const { return d_; }

  // Decoder scores of every hypothesis (unit ids without sos / eos) of one
  // segment whose encoder output is `memory` [frames, d] float32 on the
  // rescorer's device (the host for a CPU context; synchronous on CUDA):
  // left[i] = sum_j log P(y_j | sos, y_<j) + log P(eos | sos, y), and,
  // when `right` is non-empty (a bidirectional decoder), the same of the
  // reversed hypothesis under the right-to-left decoder. Sums in float64.
  // INVALID_ARGUMENT for frames outside [1, max_frames], a hypothesis longer
  // than max_frames tokens, a unit id outside the vocabulary, output spans
  // of another size, or `right` without a right-to-left decoder.
  absl::Status Score(const float* memory, int64_t frames,
                     std::span<const std::span<const int32_t>> hyps, std::span<double> left,
                     std::span<double> right);
  // The same for several segments at once, their encoder outputs packed in
  // `memory` [total_frames, d]: the hypotheses of all of them share the
  // groups (so one pass, one wait on CUDA, serves many finals), each row
  // attending to its own segment's frames. Score's errors, and
  // INVALID_ARGUMENT for total_frames above max_batch_frames or a segment
  // outside the memory; a score does not depend on the other segments.
  absl::Status ScoreSegments(const float* memory, int64_t total_frames,
                             std::span<const RescoreSegment> segments);

 private:
  struct Layer;
  struct Direction;
  AttentionRescorer(const ConformerModel* model, ExecutionContext* ctx,
                    const RescorerOptions& options);
  absl::Status Init();
  absl::Status PrepareDirection(const DecoderDirectionWeights& w, Direction* out);
  // A hypothesis of a ScoreSegments call: its segment and index there.
  struct Item {
    uint32_t segment;
    uint32_t hyp;
  };
  // Runs items [first, last) packed into rows [0, rows), adding each
  // hypothesis' score to its segment's left (or, with `reverse`, right).
  absl::Status RunGroup(const Direction& dir, std::span<const RescoreSegment> segments,
                        std::span<const Item> items, bool reverse);
  void Attend(const float* q, int64_t ldq, const float* k, const float* v, int64_t ldkv,
              int64_t queries, int64_t keys, bool causal, float* out);
  // `n` floats of the model's (host) weights as the ops on ctx_ read them:
  // the host pointer itself on the CPU, a copy on the device on CUDA.
  absl::StatusOr<const float*> OnDevice(const float* host, int64_t n);
  // Allocates a float32 buffer on ctx_'s device.
  absl::StatusOr<Tensor> Buffer(const Shape& shape, DType dtype = DType::kFloat32) const;

  const ConformerModel* model_;
  ExecutionContext* ctx_;
  RescorerOptions options_;
  int64_t d_ = 0, heads_ = 0, dk_ = 0, units_ = 0, vocab_ = 0;
  std::vector<std::unique_ptr<Direction>> directions_;  // left, then right
  std::vector<Tensor> device_weights_;                  // What OnDevice copied (CUDA).
  // Work buffers on ctx_'s device (see the file comment), float32.
  Tensor pe_;                          // [max_frames + 1, d] sinusoid positions
  Tensor cross_kv_;                    // [layers, max_frames, 2d]
  Tensor x_, y_, qkv_, att_, hidden_;  // rows x d / 3d / d / U (y_, hidden_ in dtype)
  Tensor att_lo_, memory_lo_;          // att_ and the memory cast to dtype (not float32 only)
  Tensor logits_;                      // [logit_rows_, V]
  // Attention weights: CPU [max_frames + 1, max_frames + 1] (one head of one
  // hypothesis at a time); CUDA [max_rows * heads, max_frames + 1] (every
  // row's span at once).
  Tensor scores_;
  Tensor row_log_probs_;    // [max_rows]: each row's target log-probability
  int64_t logit_rows_ = 0;  // Output-layer rows per pass.
  // Per row of a group, on the host: the unit it reads, its position, the
  // unit it predicts, its self-attention span [begin, end), its cross-
  // attention span [0, frames), and its hypothesis.
  enum Index { kTokens, kSteps, kTargets, kSelfBegin, kSelfEnd, kCrossBegin, kCrossEnd, kIndices };
  std::vector<int32_t> index_;  // [kIndices, max_rows]
  Tensor index_device_;         // The same on the device (CUDA).
  std::vector<Item> owner_;     // Per row: its hypothesis.
  std::vector<Item> items_;     // ScoreSegments' hypotheses of one direction.
  std::vector<float> row_log_probs_host_;
};

}  // namespace oasr::encoder
