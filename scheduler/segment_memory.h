// What attention rescoring needs of each stream between chunks: the encoder
// output of its current segment (WeNet rescores a segment's n-best over all
// of its frames), held on the engine's device in pages. One pool of blocks
// of block_frames rows [block_frames, dim] float32 serves every slot; a
// slot takes blocks as its segment grows and gives them back as segments
// end, so memory follows the segments actually open rather than every
// slot's ceiling (the seed's paged pools; docs/model-format.md, "Attention
// decoder").
//
// A slot holds the frames [start, end) of its stream, frame f at row
// f % block_frames of its block f / block_frames. Chunks are appended in
// order; a chunk that would pass the ceiling (max_frames a segment), or
// that finds the pool empty, starts the slot over at that chunk, so such a
// segment is not held whole (it is then not rescored) while the segments
// after it are. Forget drops a finished segment's frames, giving back the
// blocks that hold nothing newer.
//
// Appends are queued and carried out by one Flush per cohort (one launch on
// CUDA, from the cohort's encoder output); Gather copies a held segment
// into a contiguous buffer for the rescorer. Both are enqueued on the
// context's stream on CUDA, so they are ordered with the forward that
// writes the encoder output and the rescoring that reads the gathered copy.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/execution_context.h"
#include "common/tensor.h"

namespace oasr::scheduler {

struct SegmentMemoryOptions {
  int slots = 0;
  int64_t max_frames = 0;    // The longest segment held (the rescoring window).
  int64_t dim = 0;           // Floats a frame.
  int64_t block_frames = 0;  // Frames a block (the model's chunk: one block a chunk).
  // Frames the pool holds in all; 0: every slot its whole window (what the
  // fixed extents of before reserved).
  int64_t pool_frames = 0;
  // Copies one Flush or Gather launches at once (more go in several).
  int64_t max_runs = 4096;

  // Blocks one slot's window can need (a segment may start mid-block).
  int64_t BlocksPerSlot() const { return (max_frames + block_frames - 1) / block_frames + 1; }
  // The pool's blocks: pool_frames' worth, at least one window's.
  int64_t PoolBlocks() const;
};

class SegmentMemory {
 public:
  // On ctx's device (the context must outlive the memory). INVALID_ARGUMENT
  // for non-positive sizes or a pool of more than 2^31 rows;
  // RESOURCE_EXHAUSTED when the pool cannot be had.
  static absl::StatusOr<SegmentMemory> Create(const SegmentMemoryOptions& options,
                                              ExecutionContext* ctx);

  int64_t max_frames() const { return options_.max_frames; }
  int64_t dim() const { return options_.dim; }
  int64_t blocks_total() const { return options_.PoolBlocks(); }
  int64_t blocks_free() const { return static_cast<int64_t>(free_.size()); }
  size_t pool_bytes() const { return pool_.nbytes(); }
  // Appends that found the pool empty (their segments not held whole).
  int64_t exhausted() const { return exhausted_; }

  // A new stream in `slot` (or its end): nothing held, its blocks given back.
  void Reset(int slot);

  // Queues the frames [frame, frame + n) of the stream in `slot`, rows
  // [src_row, src_row + n) of the buffer the next Flush copies from. A gap
  // (frame past the end held), the ceiling or an empty pool starts the slot
  // over at `frame`; n above max_frames (or no block even then) leaves it
  // empty from frame + n.
  void Append(int slot, int64_t frame, int64_t src_row, int64_t n);
  // Carries out the queued appends from `src` ([rows, dim] float32 on the
  // device; asynchronous on CUDA).
  absl::Status Flush(const float* src);

  // Whether every frame of [begin, end) of `slot` is held (false when empty).
  bool Held(int slot, int64_t begin, int64_t end) const;
  // Copies the held frames [begin, end) of `slot` into `dst` ([end - begin,
  // dim] float32 on the device; asynchronous on CUDA). FAILED_PRECONDITION
  // when they are not all held.
  absl::Status Gather(int slot, int64_t begin, int64_t end, float* dst);

  // Drops the frames before `frame`, giving back the blocks before the one
  // holding the first frame kept.
  void Forget(int slot, int64_t frame);

 private:
  struct Extent {
    int64_t start = 0;            // First frame held.
    int64_t end = 0;              // One past the last.
    int64_t first_block = 0;      // The stream block (frame / block_frames) of blocks[0].
    std::vector<int32_t> blocks;  // Pool blocks, in stream order.
  };
  SegmentMemory(const SegmentMemoryOptions& options, ExecutionContext* ctx)
      : options_(options), ctx_(ctx) {}
  void StartOver(Extent& e, int64_t frame);
  // Takes blocks until the extent covers stream block `block`; false (and
  // nothing taken past what it had) when the pool runs out.
  bool CoverThrough(Extent& e, int64_t block);
  // Copies runs_ (source row, destination row, rows) from src to dst.
  absl::Status CopyRuns(const float* src, float* dst);

  SegmentMemoryOptions options_;
  ExecutionContext* ctx_ = nullptr;
  Tensor pool_;         // [blocks * block_frames, dim] on the device
  Tensor runs_device_;  // [max_runs, 3] int32 (CUDA)
  std::vector<int32_t> free_;
  std::vector<Extent> extents_;
  std::vector<int32_t> runs_;  // Queued copies, 3 ints each.
  int64_t exhausted_ = 0;
};

}  // namespace oasr::scheduler
