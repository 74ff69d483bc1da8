#include "scheduler/segment_memory.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/decoder_ops.h"

namespace oasr::scheduler {

int64_t SegmentMemoryOptions::PoolBlocks() const {
  const int64_t window = BlocksPerSlot();
  if (pool_frames <= 0) return int64_t{slots} * window;
  return std::max(window, (pool_frames + block_frames - 1) / block_frames);
}

absl::StatusOr<SegmentMemory> SegmentMemory::Create(const SegmentMemoryOptions& options,
                                                    ExecutionContext* ctx) {
  if (ctx == nullptr || options.slots < 1 || options.max_frames < 1 || options.dim < 1 ||
      options.block_frames < 1 || options.pool_frames < 0 || options.max_runs < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment memory: slots=", options.slots, ", max_frames=", options.max_frames, ", dim=",
        options.dim, ", block_frames=", options.block_frames, ", pool_frames=", options.pool_frames,
        ", max_runs=", options.max_runs, " (each positive, pool_frames 0 or more, and a context)"));
  }
  const int64_t blocks = options.PoolBlocks();
  if (blocks * options.block_frames > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("segment memory: ", blocks, " blocks of ",
                                                   options.block_frames, " frames pass 2^31 rows"));
  }
  SegmentMemory m(options, ctx);
  OASR_ASSIGN_OR_RETURN(m.pool_, Tensor::Empty({blocks * options.block_frames, options.dim},
                                               DType::kFloat32, ctx->device()));
  if (ctx->is_cuda()) {
    OASR_ASSIGN_OR_RETURN(m.runs_device_,
                          Tensor::Empty({options.max_runs, 3}, DType::kInt32, ctx->device()));
  }
  m.free_.reserve(static_cast<size_t>(blocks));
  for (int64_t b = blocks - 1; b >= 0; --b) m.free_.push_back(static_cast<int32_t>(b));
  m.extents_.resize(static_cast<size_t>(options.slots));
  for (Extent& e : m.extents_) e.blocks.reserve(static_cast<size_t>(options.BlocksPerSlot()));
  m.runs_.reserve(static_cast<size_t>(3 * options.max_runs));
  return m;
}

void SegmentMemory::StartOver(Extent& e, int64_t frame) {
  free_.insert(free_.end(), e.blocks.rbegin(), e.blocks.rend());
  e.blocks.clear();
  e.start = e.end = frame;
  e.first_block = frame / options_.block_frames;
}

void SegmentMemory::Reset(int slot) { StartOver(extents_[slot], 0); }

bool SegmentMemory::CoverThrough(Extent& e, int64_t block) {
  const auto need = static_cast<size_t>(block - e.first_block + 1);
  if (need <= e.blocks.size()) return true;
  if (need - e.blocks.size() > free_.size()) return false;
  while (e.blocks.size() < need) {
    e.blocks.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void SegmentMemory::Append(int slot, int64_t frame, int64_t src_row, int64_t n) {
  if (n <= 0) return;
  Extent& e = extents_[slot];
  const int64_t B = options_.block_frames;
  if (frame != e.end || e.end - e.start + n > options_.max_frames) StartOver(e, frame);
  if (n > options_.max_frames) {
    StartOver(e, frame + n);
    return;
  }
  const int64_t last_block = (frame + n - 1) / B;
  if (!CoverThrough(e, last_block)) {
    // The pool is short: this segment cannot be held whole. Its own blocks
    // go back first, so that it may at least start over here.
    ++exhausted_;
    StartOver(e, frame);
    if (!CoverThrough(e, last_block)) {
      StartOver(e, frame + n);
      return;
    }
  }
  for (int64_t f = frame; f < frame + n;) {
    const int64_t row = f % B;
    const int64_t count = std::min(B - row, frame + n - f);
    const int64_t block = e.blocks[static_cast<size_t>(f / B - e.first_block)];
    runs_.push_back(static_cast<int32_t>(src_row + (f - frame)));
    runs_.push_back(static_cast<int32_t>(block * B + row));
    runs_.push_back(static_cast<int32_t>(count));
    f += count;
  }
  e.end = frame + n;
}

absl::Status SegmentMemory::CopyRuns(const float* src, float* dst) {
  const int64_t total = static_cast<int64_t>(runs_.size()) / 3;
  for (int64_t first = 0; first < total; first += options_.max_runs) {
    const int64_t count = std::min(options_.max_runs, total - first);
    kernels::CopyRowRunsParams p;
    p.src = src;
    p.dst = dst;
    p.width = options_.dim;
    p.runs = runs_.data() + 3 * first;
    p.num_runs = count;
    if (ctx_->is_cuda()) {
      // Copied from pageable memory: the runs may be reused once it returns.
      OASR_RETURN_IF_ERROR(CopyTensorAsync(
          TensorView(runs_device_.data(), DType::kInt32, {count, 3}, ctx_->device()),
          TensorView(runs_.data() + 3 * first, DType::kInt32, {count, 3}, Device::Cpu()),
          ctx_->stream()));
      p.runs = runs_device_.data<int32_t>();
    }
    OASR_RETURN_IF_ERROR(kernels::CopyRowRuns(*ctx_, p));
  }
  runs_.clear();
  return absl::OkStatus();
}

absl::Status SegmentMemory::Flush(const float* src) {
  if (runs_.empty()) return absl::OkStatus();
  return CopyRuns(src, pool_.data<float>());
}

bool SegmentMemory::Held(int slot, int64_t begin, int64_t end) const {
  const Extent& e = extents_[slot];
  return begin < end && begin >= e.start && end <= e.end;
}

absl::Status SegmentMemory::Gather(int slot, int64_t begin, int64_t end, float* dst) {
  if (!Held(slot, begin, end)) {
    return absl::FailedPreconditionError(absl::StrCat("segment memory: frames [", begin, ", ", end,
                                                      ") of slot ", slot, " are not all held"));
  }
  if (!runs_.empty()) {
    return absl::FailedPreconditionError("segment memory: a gather before the appends' flush");
  }
  const Extent& e = extents_[slot];
  const int64_t B = options_.block_frames;
  for (int64_t f = begin; f < end;) {
    const int64_t row = f % B;
    const int64_t count = std::min(B - row, end - f);
    const int64_t block = e.blocks[static_cast<size_t>(f / B - e.first_block)];
    runs_.push_back(static_cast<int32_t>(block * B + row));
    runs_.push_back(static_cast<int32_t>(f - begin));
    runs_.push_back(static_cast<int32_t>(count));
    f += count;
  }
  return CopyRuns(pool_.data<float>(), dst);
}

void SegmentMemory::Forget(int slot, int64_t frame) {
  Extent& e = extents_[slot];
  e.start = std::min(std::max(e.start, frame), e.end);
  const int64_t B = options_.block_frames;
  size_t drop = 0;
  while (drop < e.blocks.size() &&
         (e.first_block + static_cast<int64_t>(drop) + 1) * B <= e.start) {
    ++drop;
  }
  if (drop == 0) return;
  free_.insert(free_.end(), e.blocks.rend() - static_cast<std::ptrdiff_t>(drop), e.blocks.rend());
  e.blocks.erase(e.blocks.begin(), e.blocks.begin() + static_cast<std::ptrdiff_t>(drop));
  e.first_block += static_cast<int64_t>(drop);
}

}  // namespace oasr::scheduler
