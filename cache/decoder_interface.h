// The small decoder-state interface that CtcStateCacheManager pools behind.
// A streaming CTC decoder (decoder/) implements it; the cache layer only
// creates, resets, feeds and finalises states through it and never looks
// inside them.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "common/tensor.h"

namespace oasr::cache {

// Per-stream decoder state. Concrete decoders derive their own state type and
// downcast the pointers they are handed back (they created them).
class DecoderState {
 public:
  virtual ~DecoderState() = default;
};

// A decoder whose per-stream state can be pooled and reused.
//
// Thread-safety: none; called from the engine's scheduler thread only.
class PooledDecoder {
 public:
  virtual ~PooledDecoder() = default;

  // A fresh state, ready to decode the first chunk of a stream. The caller
  // owns it. Allocates; called only when the pool is empty.
  virtual std::unique_ptr<DecoderState> CreateState() = 0;

  // Returns `state` to exactly what CreateState returns, reusing its memory
  // (no reallocation in the steady state).
  virtual void ResetState(DecoderState& state) = 0;

  // Decodes one chunk of CTC log-probabilities, `log_probs` float32 [T, V]
  // on the host. INVALID_ARGUMENT when V or the dtype does not match.
  virtual absl::Status DecodeChunk(DecoderState& state, const TensorView& log_probs) = 0;

  // Marks the end of the stream's audio: no more chunks follow and the
  // result becomes final.
  virtual absl::Status FinalizeStream(DecoderState& state) = 0;
};

}  // namespace oasr::cache
