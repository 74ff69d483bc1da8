#include "scheduler/cohort_decode.h"

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/tensor.h"

namespace oasr::scheduler {

absl::Status DecodeCohort(decoder::CtcDecoder& decoder,
                          std::span<decoder::DecoderState* const> states,
                          std::span<const int32_t> num_frames, const TensorView& log_probs,
                          ExecutionContext* ctx, std::span<absl::Status> status) {
  OASR_CHECK(states.size() == num_frames.size() && states.size() == status.size(),
             "DecodeCohort: states, num_frames and status differ in size");
  const size_t n = states.size();
  if (n == 0) return absl::OkStatus();
  const int64_t vocab = decoder.vocab_size();
  if (log_probs.dtype() != DType::kFloat32 || log_probs.rank() != 3 || log_probs.dim(2) != vocab ||
      log_probs.dim(0) < static_cast<int64_t>(n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("DecodeCohort: log_probs ", DTypeName(log_probs.dtype()),
                     log_probs.shape().ToString(), " for ", n, " rows of ", vocab, " units"));
  }
  const int64_t max_frames = log_probs.dim(1);
  TensorView host = log_probs.Slice(0, static_cast<int64_t>(n));
  size_t mark = 0;
  if (!log_probs.device().is_cpu()) {
    if (ctx == nullptr) {
      return absl::InvalidArgumentError("DecodeCohort: device log_probs need an execution context");
    }
    Arena& staging = ctx->host_workspace();
    mark = staging.mark();
    TensorView staged = staging.AllocateTensor(host.shape(), DType::kFloat32);
    if (staged.empty()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "DecodeCohort: the host workspace cannot stage ", host.nbytes(), " bytes of log-probs"));
    }
    absl::Status copied = CopyTensorAsync(staged, host, ctx->stream());
    if (copied.ok()) copied = ctx->Synchronize();
    if (!copied.ok()) {
      staging.Rewind(mark);
      return copied;
    }
    host = staged;
  }
  const float* base = static_cast<const float*>(host.data());
  size_t row = 0;
  while (row < n) {
    if (states[row] == nullptr) {
      status[row++] = absl::OkStatus();
      continue;
    }
    size_t end = row;
    while (end < n && states[end] != nullptr) ++end;
    const size_t count = end - row;
    const TensorView run(const_cast<float*>(base) + row * max_frames * vocab, DType::kFloat32,
                         Shape{static_cast<int64_t>(count), max_frames, vocab}, Device::Cpu());
    absl::Status batched =
        decoder.DecodeChunks(states.subspan(row, count), run, num_frames.subspan(row, count));
    for (; row < end; ++row) {
      if (batched.ok()) {
        status[row] = absl::OkStatus();
        continue;
      }
      const TensorView rows(const_cast<float*>(base) + row * max_frames * vocab, DType::kFloat32,
                            Shape{num_frames[row], vocab}, Device::Cpu());
      status[row] = decoder.DecodeChunk(*states[row], rows);
    }
  }
  if (!log_probs.device().is_cpu()) ctx->host_workspace().Rewind(mark);
  return absl::OkStatus();
}

}  // namespace oasr::scheduler
