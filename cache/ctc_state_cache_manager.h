// CtcStateCacheManager: one shared decoder and a pool of per-stream decoder
// states, recycled between streams so admitting a stream never allocates
// decoder memory in the steady state.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/decoder_interface.h"
#include "common/tensor.h"

namespace oasr::cache {

// A (decoder, state) pair that reads like a stand-alone streaming decoder of
// one stream. Non-owning: valid while the stream is allocated in the manager
// that handed it out.
class StreamHandle {
 public:
  StreamHandle(PooledDecoder* decoder, DecoderState* state) : decoder_(decoder), state_(state) {}

  // Decodes one chunk, `log_probs` float32 [T, V] on the host; errors are the
  // decoder's (INVALID_ARGUMENT for a V or dtype mismatch).
  absl::Status DecodeChunk(const TensorView& log_probs) {
    return decoder_->DecodeChunk(*state_, log_probs);
  }
  // Ends the stream's audio; the result in the state becomes final.
  absl::Status FinalizeStream() { return decoder_->FinalizeStream(*state_); }

  PooledDecoder& decoder() const { return *decoder_; }
  // The stream's state; the concrete decoder's type, which its caller may
  // downcast to read the result.
  DecoderState& state() const { return *state_; }

 private:
  PooledDecoder* decoder_;
  DecoderState* state_;
};

// States are created only when the pool is empty, reset (ResetState) when
// taken from it, and returned to it when a stream is freed -- never destroyed
// while the manager lives.
//
// Thread-safety: none; the engine's scheduler thread only.
class CtcStateCacheManager {
 public:
  // `decoder` is not owned and must outlive the manager. `reserve` states
  // are created up front (and stream-map room reserved) so that the first
  // `reserve` admissions allocate nothing either.
  explicit CtcStateCacheManager(PooledDecoder* decoder, int reserve = 0);

  // Hands `stream_id` a fresh state: a pooled one reset, or a new one when the
  // pool is empty. ALREADY_EXISTS for a live id.
  absl::Status AllocateStream(int64_t stream_id);
  // Returns the stream's state to the pool. NOT_FOUND for an unknown or freed id.
  absl::Status FreeStream(int64_t stream_id);
  // The stream's decoder handle. NOT_FOUND for an unknown or freed id.
  absl::StatusOr<StreamHandle> GetDecoder(int64_t stream_id) const;

  int num_streams() const { return static_cast<int>(states_.size()); }
  // States waiting in the pool.
  int num_pooled() const { return static_cast<int>(pool_.size()); }
  // States ever created: num_streams() + num_pooled().
  int num_created() const { return num_created_; }
  PooledDecoder& decoder() const { return *decoder_; }

 private:
  PooledDecoder* const decoder_;
  std::vector<std::unique_ptr<DecoderState>> pool_;
  absl::flat_hash_map<int64_t, std::unique_ptr<DecoderState>> states_;
  int num_created_ = 0;
};

}  // namespace oasr::cache
