// DecoderStatePool: one shared decoder's per-stream states, recycled between
// streams so that admitting a stream never allocates decoder memory in the
// steady state.
#pragma once

#include <memory>
#include <vector>

#include "decoder/pooled_decoder.h"

namespace oasr::decoder {

// A free list of states, not a map: whoever takes a state holds it (the
// engine's stream, from admission to its end) and hands it back, so the pool
// keeps no stream ids and needs no lookup. States are created only when the
// free list is empty, reset (ResetState) when they come back -- dropping what
// the stream configured, its phrase graph included -- and never destroyed
// while they circulate.
//
// Thread-safety: none; the engine's scheduler thread only.
class DecoderStatePool {
 public:
  // `decoder` is not owned and must outlive the pool and every state taken
  // from it. `reserve` states are created up front (and the free list sized
  // for them), so that the first `reserve` streams at once allocate nothing
  // either.
  explicit DecoderStatePool(PooledDecoder* decoder, int reserve = 0);

  // A state as fresh as CreateState's: a pooled one, or a new one when none
  // is left. The caller owns it until it gives it back with Release.
  std::unique_ptr<DecoderState> Acquire();

  // Resets `state` and keeps it for the next Acquire. `state` must be one
  // that Acquire returned (its decoder checks that it made it); null is
  // ignored. Never allocates: the free list has room for every state created.
  void Release(std::unique_ptr<DecoderState> state);

  // States waiting in the pool.
  int num_pooled() const { return static_cast<int>(free_.size()); }
  // States ever created: those handed out plus num_pooled().
  int num_created() const { return num_created_; }
  // States handed out and not yet released.
  int num_in_use() const { return num_created_ - num_pooled(); }
  PooledDecoder& decoder() const { return *decoder_; }

 private:
  PooledDecoder* const decoder_;
  std::vector<std::unique_ptr<DecoderState>> free_;
  int num_created_ = 0;
};

}  // namespace oasr::decoder
