#include "decoder/decoder_state_pool.h"

#include <utility>

#include "common/check.h"

namespace oasr::decoder {

DecoderStatePool::DecoderStatePool(PooledDecoder* decoder, int reserve) : decoder_(decoder) {
  OASR_CHECK(decoder != nullptr);
  OASR_CHECK_GE(reserve, 0);
  free_.reserve(reserve);
  for (int i = 0; i < reserve; ++i) {
    free_.push_back(decoder_->CreateState());
    OASR_CHECK(free_.back() != nullptr, "PooledDecoder::CreateState returned null");
    ++num_created_;
  }
}

std::unique_ptr<DecoderState> DecoderStatePool::Acquire() {
  if (free_.empty()) {
    std::unique_ptr<DecoderState> state = decoder_->CreateState();
    OASR_CHECK(state != nullptr, "PooledDecoder::CreateState returned null");
    ++num_created_;
    // Room for it to come back without the free list growing then.
    free_.reserve(num_created_);
    return state;
  }
  std::unique_ptr<DecoderState> state = std::move(free_.back());
  free_.pop_back();
  return state;
}

void DecoderStatePool::Release(std::unique_ptr<DecoderState> state) {
  if (state == nullptr) return;
  // Reset now, not at the next Acquire: a pooled state holds nothing of the
  // stream that used it (its options, phrase graph or results).
  decoder_->ResetState(*state);
  free_.push_back(std::move(state));
}

}  // namespace oasr::decoder
