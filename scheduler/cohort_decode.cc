#include "scheduler/cohort_decode.h"

#include "common/check.h"
#include "common/tensor.h"

namespace oasr::scheduler {

void DecodeCohort(decoder::CtcDecoder& decoder, std::span<cache::DecoderState* const> states,
                  std::span<const int32_t> num_frames, const float* log_probs, int64_t max_frames,
                  std::span<absl::Status> status) {
  OASR_CHECK(states.size() == num_frames.size() && states.size() == status.size(),
             "DecodeCohort: states, num_frames and status differ in size");
  const int64_t vocab = decoder.vocab_size();
  auto rows_at = [&](int64_t frame, int64_t frames) {
    return TensorView(const_cast<float*>(log_probs) + frame * vocab, DType::kFloat32,
                      Shape{frames, vocab}, Device::Cpu());
  };
  const size_t n = states.size();
  size_t row = 0;
  int64_t frame = 0;  // Packed offset of `row`, in frames.
  while (row < n) {
    if (states[row] == nullptr) {
      status[row] = absl::OkStatus();
      frame += num_frames[row++];
      continue;
    }
    // The run: rows up to and including the first one shorter than max_frames.
    size_t end = row;
    while (end < n && states[end] != nullptr) {
      if (num_frames[end++] != max_frames) break;
    }
    const size_t count = end - row;
    const TensorView run(const_cast<float*>(log_probs) + frame * vocab, DType::kFloat32,
                         Shape{static_cast<int64_t>(count), max_frames, vocab}, Device::Cpu());
    absl::Status batched =
        decoder.DecodeChunks(states.subspan(row, count), run, num_frames.subspan(row, count));
    for (; row < end; ++row) {
      status[row] = batched.ok()
                        ? absl::OkStatus()
                        : decoder.DecodeChunk(*states[row], rows_at(frame, num_frames[row]));
      frame += num_frames[row];
    }
  }
}

}  // namespace oasr::scheduler
