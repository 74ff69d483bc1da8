// The engine's batched decode: one CtcDecoder::DecodeChunks call over a
// cohort's packed log-probs wherever the layout allows, with each stream's
// failure kept to that stream.
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "cache/decoder_interface.h"
#include "decoder/ctc_decoder.h"

namespace oasr::scheduler {

// Decodes row i's num_frames[i] frames of `log_probs` into states[i].
//
// `log_probs`: float32 [sum(num_frames), vocab] on the host, the rows packed
// in order (ForwardCohort's output), in a buffer of at least
// states.size() * max_frames * vocab floats. A run of consecutive rows in
// which every row but the last has exactly `max_frames` frames is that
// buffer viewed as [n, max_frames, vocab], so it is decoded by one
// DecodeChunks call; in steady state (full chunks) the whole cohort is one
// run. A null state skips its row (its frames are still counted in the
// packing) and ends a run. DecodeChunks checks before it changes anything,
// so when it fails the run's rows are decoded one by one with DecodeChunk
// and only the failing rows fail.
//
// status[i] receives row i's outcome (OK for skipped rows). Requires
// states, num_frames and status of one size. Thread-safety: the decoder's
// (calls on one state must not overlap).
void DecodeCohort(decoder::CtcDecoder& decoder, std::span<cache::DecoderState* const> states,
                  std::span<const int32_t> num_frames, const float* log_probs, int64_t max_frames,
                  std::span<absl::Status> status);

}  // namespace oasr::scheduler
