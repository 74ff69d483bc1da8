// The engine's batched decode: one CtcDecoder::DecodeChunks call over a
// cohort's log-probs wherever the states allow, with each stream's failure
// kept to that stream.
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "common/execution_context.h"
#include "decoder/ctc_decoder.h"

namespace oasr::scheduler {

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

}  // namespace oasr::scheduler
