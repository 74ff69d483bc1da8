#include "scheduler/cohort_decode.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status.h"
#include "common/tensor.h"
#include "kernels/softmax.h"

namespace oasr::scheduler {
namespace {

// Runs `decode(row, count)` over each run of consecutive non-null states;
// a run that fails (its checks change nothing) is decoded again row by row,
// so that only the failing rows fail. Skipped rows get OK.
template <typename Decode>
void DecodeRuns(std::span<decoder::DecoderState* const> states, std::span<absl::Status> status,
                const Decode& decode) {
  const size_t n = states.size();
  size_t row = 0;
  while (row < n) {
    if (states[row] == nullptr) {
      status[row++] = absl::OkStatus();
      continue;
    }
    size_t end = row;
    while (end < n && states[end] != nullptr) ++end;
    const absl::Status batched = decode(row, end - row);
    for (; row < end; ++row) status[row] = batched.ok() ? absl::OkStatus() : decode(row, 1);
  }
}

}  // namespace

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
  DecodeRuns(states, status, [&](size_t row, size_t count) {
    const TensorView run(const_cast<float*>(base) + row * max_frames * vocab, DType::kFloat32,
                         Shape{static_cast<int64_t>(count), max_frames, vocab}, Device::Cpu());
    return decoder.DecodeChunks(states.subspan(row, count), run, num_frames.subspan(row, count));
  });
  if (!log_probs.device().is_cpu()) ctx->host_workspace().Rewind(mark);
  return absl::OkStatus();
}

absl::StatusOr<CohortCandidates> CohortCandidates::Create(int rows, int max_frames, int k,
                                                          int blank_id, Device device,
                                                          bool host_copies) {
  if (rows < 1 || max_frames < 1 || k < 1 || k > kernels::kMaxTopK || blank_id < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cohort candidates: ", rows, " rows of ",
                                                   max_frames, " frames, k ", k, ", blank ",
                                                   blank_id, " (k in [1, 64])"));
  }
  const int64_t words = int64_t{rows} * max_frames * (2 * int64_t{k} + 1);
  static_assert(sizeof(float) == sizeof(int32_t));
  OASR_ASSIGN_OR_RETURN(Tensor dev, Tensor::Zeros({words}, DType::kInt32, device));
  Tensor host;
  if (device.is_cuda()) {
    OASR_ASSIGN_OR_RETURN(host, Tensor::EmptyPinned({2 * words}, DType::kInt32));
  } else if (host_copies) {
    OASR_ASSIGN_OR_RETURN(host, Tensor::Empty({2 * words}, DType::kInt32));
  }
  return CohortCandidates(rows, max_frames, k, blank_id, std::move(dev), std::move(host));
}

CohortCandidates::CohortCandidates(int rows, int max_frames, int k, int blank_id, Tensor device,
                                   Tensor host)
    : rows_(rows),
      max_frames_(max_frames),
      k_(k),
      blank_id_(blank_id),
      device_(std::move(device)),
      host_(std::move(host)) {}

absl::Status CohortCandidates::Select(ExecutionContext& ctx, const TensorView& log_probs,
                                      int rows) const {
  if (log_probs.dtype() != DType::kFloat32 || log_probs.rank() != 3 || rows < 0 || rows > rows_ ||
      log_probs.dim(0) < rows || log_probs.dim(1) != max_frames_ || log_probs.dim(2) <= blank_id_ ||
      log_probs.dim(2) < k_ || !(log_probs.device() == device_.device())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cohort candidates: log_probs ", DTypeName(log_probs.dtype()), log_probs.shape().ToString(),
        " on ", log_probs.device().ToString(), " for ", rows, " of ", rows_, " rows of ",
        max_frames_, " frames, k ", k_, ", blank ", blank_id_));
  }
  int32_t* words = static_cast<int32_t*>(device_.data());
  kernels::TopKParams p;
  p.x = static_cast<const float*>(log_probs.data());
  p.rows = int64_t{rows} * max_frames_;
  p.n = log_probs.dim(2);
  p.ld = p.n;
  p.k = k_;
  p.indices = words + ids_at();
  p.values = reinterpret_cast<float*>(words + log_probs_at());
  p.gathered = reinterpret_cast<float*>(words + blank_at());
  p.gather_column = blank_id_;
  return kernels::TopK(ctx, p);
}

absl::Status CohortCandidates::Download(ExecutionContext& ctx, int rows) const {
  if (host_.empty()) return absl::OkStatus();
  OASR_RETURN_IF_ERROR(EnqueueDownload(ctx, rows, 0));
  return ctx.Synchronize();
}

absl::Status CohortCandidates::EnqueueDownload(ExecutionContext& ctx, int rows, int buffer) const {
  if (host_.empty()) return absl::OkStatus();
  if (buffer < 0 || buffer > 1 || rows < 0 || rows > rows_) {
    return absl::InvalidArgumentError(
        absl::StrCat("cohort candidates: download of ", rows, " rows into copy ", buffer));
  }
  const int64_t n = int64_t{rows} * max_frames_;
  const TensorView dev = device_.view();
  const TensorView host = host_.view().Slice(buffer * words_per_copy(), words_per_copy());
  for (const auto& [at, words] :
       {std::pair{ids_at(), n * k_}, std::pair{log_probs_at(), n * k_}, std::pair{blank_at(), n}}) {
    OASR_RETURN_IF_ERROR(
        CopyTensorAsync(host.Slice(at, words), dev.Slice(at, words), ctx.stream()));
  }
  return absl::OkStatus();
}

decoder::PrunedChunks CohortCandidates::host(int rows, int buffer) const {
  const int32_t* words = static_cast<const int32_t*>(host_words(buffer));
  decoder::PrunedChunks c;
  c.ids = words + ids_at();
  c.log_probs = reinterpret_cast<const float*>(words + log_probs_at());
  c.blank = reinterpret_cast<const float*>(words + blank_at());
  c.batch = rows;
  c.max_frames = max_frames_;
  c.k = k_;
  return c;
}

absl::Status DecodeCohortPruned(decoder::CtcDecoder& decoder,
                                std::span<decoder::DecoderState* const> states,
                                std::span<const int32_t> num_frames,
                                const CohortCandidates& candidates, ExecutionContext* ctx,
                                std::span<absl::Status> status, int buffer, ThreadPool* pool) {
  OASR_CHECK(states.size() == num_frames.size() && states.size() == status.size(),
             "DecodeCohortPruned: states, num_frames and status differ in size");
  const size_t n = states.size();
  if (n == 0) return absl::OkStatus();
  if (static_cast<int>(n) > candidates.rows()) {
    return absl::InvalidArgumentError(absl::StrCat("DecodeCohortPruned: ", n, " rows, the ",
                                                   "candidates hold ", candidates.rows()));
  }
  if (ctx == nullptr) return absl::InvalidArgumentError("DecodeCohortPruned: no context");
  if (buffer < 0) OASR_RETURN_IF_ERROR(candidates.Download(*ctx, static_cast<int>(n)));
  const decoder::PrunedChunks all = candidates.host(static_cast<int>(n), std::max(buffer, 0));
  // Streams decode independently: large cohorts are split into contiguous
  // parts across the pool's (or the context's) host threads.
  const size_t per_part = decoder.config().method == decoder::SearchMethod::kGreedy
                              ? kMinLightRowsPerPart
                              : kMinRowsPerPart;
  ForEachPart(
      pool != nullptr ? *pool : ctx->threads(), n, per_part, 4, [&](size_t begin, size_t end) {
        DecodeRuns(states.subspan(begin, end - begin), status.subspan(begin, end - begin),
                   [&](size_t row, size_t count) {
                     decoder::PrunedChunks run = all;
                     const int64_t frame = static_cast<int64_t>(begin + row) * all.max_frames;
                     run.ids += frame * all.k;
                     run.log_probs += frame * all.k;
                     run.blank += frame;
                     run.batch = static_cast<int64_t>(count);
                     return decoder.DecodeChunksPruned(states.subspan(begin + row, count), run,
                                                       num_frames.subspan(begin + row, count));
                   });
      });
  return absl::OkStatus();
}

}  // namespace oasr::scheduler
