// The small interface a streaming decoder implements so that its per-stream
// states can be pooled (DecoderStatePool) and driven by the engine without
// knowing their type: create, reset, feed and finalise. CtcDecoder is the
// implementation; the pool and the engine never look inside a state.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "common/tensor.h"

namespace oasr::decoder {

// Per-stream decoder state. Concrete decoders derive their own state type and
// downcast the references they are handed back (they created them).
class DecoderState {
 public:
  virtual ~DecoderState() = default;
};

// A decoder whose per-stream state can be pooled and reused.
//
// Thread-safety: the implementation's; the engine calls it from its
// scheduler thread only.
class PooledDecoder {
 public:
  virtual ~PooledDecoder() = default;

  // A fresh state, ready to decode the first chunk of a stream. The caller
  // owns it. Allocates; a pool calls it only when it has no state left.
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

}  // namespace oasr::decoder
