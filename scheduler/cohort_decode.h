// The engine's batched decode: one CtcDecoder::DecodeChunks call over a
// cohort's log-probs (or DecodeChunksPruned over their per-frame candidates)
// wherever the states allow, with each stream's failure kept to that stream.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/execution_context.h"
#include "common/tensor.h"
#include "decoder/ctc_decoder.h"

namespace oasr::scheduler {

// Rows below which splitting a cohort's host work across the context's
// threads costs more than it saves: beam search (tens of microseconds a
// row), and light work (greedy search, a row's staging copy, reading its
// results: a few microseconds a row, which on the scheduler thread alone
// limit how many rows a second the engine serves).
inline constexpr size_t kMinRowsPerPart = 32;
inline constexpr size_t kMinLightRowsPerPart = 8;

// Calls fn(begin, end) over [0, n) in contiguous parts: one part (on the
// caller) below 2 x min_rows rows or on a one-thread pool, else n / min_rows
// parts, at most parts_per_thread per thread, spread over the pool. A single
// part is a plain call: a steady-state tick allocates nothing.
template <typename Fn>
void ForEachPart(ThreadPool& pool, size_t n, size_t min_rows, int parts_per_thread, const Fn& fn) {
  const size_t parts =
      n < 2 * min_rows || pool.threads() == 1
          ? 1
          : std::min<size_t>(n / min_rows, static_cast<size_t>(parts_per_thread) * pool.threads());
  if (parts == 1) {
    if (n > 0) fn(size_t{0}, n);
    return;
  }
  pool.ParallelFor(static_cast<int64_t>(parts), [&](int64_t part) {
    fn(n * static_cast<size_t>(part) / parts, n * static_cast<size_t>(part + 1) / parts);
  });
}

// Decodes row i's num_frames[i] frames of `log_probs` into states[i].
//
// `log_probs`: float32 [rows, max_frames, vocab] (rows >= states.size()), the
// layout of StreamingModel::ForwardCohort's output: row i's frames are
// [0, num_frames[i]) of slice i. On the host, or on ctx's device (then copied
// once, whole, into ctx->host_workspace(), which must hold it). A run of
// consecutive non-null states is one DecodeChunks call; a null state skips
// its row and ends a run. DecodeChunks checks before it changes anything, so
// when it fails the run's rows are decoded one by one with DecodeChunk and
// only the failing rows fail.
//
// status[i] receives row i's outcome (OK for skipped rows). Returns an error
// (and decodes nothing) only when the log-probs cannot be read: a device
// tensor without ctx or without room to stage it, or a failed copy.
// Requires states, num_frames and status of one size. Thread-safety: the
// decoder's (calls on one state must not overlap).
absl::Status DecodeCohort(decoder::CtcDecoder& decoder,
                          std::span<decoder::DecoderState* const> states,
                          std::span<const int32_t> num_frames, const TensorView& log_probs,
                          ExecutionContext* ctx, std::span<absl::Status> status);

// Every frame's candidates for pruned decoding (decoder::PrunedChunks) of up
// to `rows` cohort rows of max_frames frames: ids and log-probs [rows,
// max_frames, k] and the blank's log-prob [rows, max_frames], in one buffer
// on a device, with a host copy (page-locked on CUDA) the decode reads. On
// the CPU both are the same memory. Select runs on the model's device, so on
// CUDA only (2k + 1) x 4 bytes per frame cross to the host instead of the
// whole vocabulary's log-probs. Thread-safety: none.
class CohortCandidates {
 public:
  // INVALID_ARGUMENT for k outside [1, 64] or non-positive sizes;
  // RESOURCE_EXHAUSTED when the memory cannot be had.
  // With `host_copies` the two host copies exist on the CPU too (an engine
  // overlapping ticks there decodes one cohort while the next is selected);
  // on CUDA they always do.
  static absl::StatusOr<CohortCandidates> Create(int rows, int max_frames, int k, int blank_id,
                                                 Device device, bool host_copies = false);

  // Selects the candidates of the first `rows` rows of `log_probs` (float32
  // [>= rows, max_frames, V] on ctx's device), every frame of them: the k
  // largest log-probs (kernels::TopK) and the blank's. Enqueued on ctx's
  // stream (capturable in a CUDA graph). INVALID_ARGUMENT for a shape
  // mismatch or too many rows.
  absl::Status Select(ExecutionContext& ctx, const TensorView& log_probs, int rows) const;

  // Copies the first `rows` rows' candidates to the host copy and waits
  // (nothing to copy without host copies); then host(rows) is readable.
  absl::Status Download(ExecutionContext& ctx, int rows) const;
  // The same into host copy `buffer` (0 or 1: two ticks may be in flight),
  // enqueued on ctx's stream without waiting: host(rows, buffer) is
  // readable once the stream has run the copy.
  absl::Status EnqueueDownload(ExecutionContext& ctx, int rows, int buffer) const;
  decoder::PrunedChunks host(int rows, int buffer = 0) const;

  int k() const { return k_; }
  int rows() const { return rows_; }

 private:
  CohortCandidates(int rows, int max_frames, int k, int blank_id, Tensor device, Tensor host);
  // Word offsets of the three arrays in either buffer.
  int64_t frames() const { return int64_t{rows_} * max_frames_; }
  int64_t ids_at() const { return 0; }
  int64_t log_probs_at() const { return frames() * k_; }
  int64_t blank_at() const { return 2 * frames() * k_; }
  const void* host_words(int buffer) const {
    if (host_.empty()) return device_.data();
    return static_cast<const int32_t*>(host_.data()) + buffer * words_per_copy();
  }
  int64_t words_per_copy() const { return frames() * (2 * int64_t{k_} + 1); }

  int rows_ = 0;
  int max_frames_ = 0;
  int k_ = 0;
  int blank_id_ = 0;
  Tensor device_;  // int32/float32 words on the model's device.
  Tensor host_;    // Two host copies (empty on the CPU without host_copies).
};

// DecodeCohort from `candidates` (already selected for these rows):
// downloads the first states.size() rows' candidates (with `buffer` >= 0,
// reads host copy `buffer`, which the caller has downloaded), then one
// DecodeChunksPruned per run of non-null states, a failing run retried row by
// row; a large cohort's rows are decoded in parts on `pool` (null: ctx's
// host threads, ctx->threads()). Same contract as DecodeCohort otherwise;
// ctx is required.
absl::Status DecodeCohortPruned(decoder::CtcDecoder& decoder,
                                std::span<decoder::DecoderState* const> states,
                                std::span<const int32_t> num_frames,
                                const CohortCandidates& candidates, ExecutionContext* ctx,
                                std::span<absl::Status> status, int buffer = -1,
                                ThreadPool* pool = nullptr);

}  // namespace oasr::scheduler
