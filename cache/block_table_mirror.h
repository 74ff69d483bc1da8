// BlockTableMirror: the host-side block tables, cache lengths and cohort slot
// list of the paged attention cache, and their copy in device memory that
// kernels read. The host copy is the source of truth; the device copy is
// refreshed by one staged, asynchronous copy per step.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/gpu_stream.h"
#include "common/tensor.h"

namespace oasr::cache {

// One int32 buffer, laid out so that everything a step changes is a prefix:
//   [cohort_slots: cohort_capacity][cache_seqlens: rows][block_table: rows x width]
// Rows are slot-indexed; the cohort lists the slot each batch row reads.
//
// On the CPU the device views alias the host buffer and Sync copies nothing.
// On CUDA, Sync copies the host prefix up to the highest row written since
// the last Sync into one of kStagingDepth pinned staging buffers, enqueues a
// single cudaMemcpyAsync from it on the caller's stream and records an event.
// Staging is what lets the host keep editing the tables while the copy is
// still queued behind earlier kernels; a staging buffer is reused only after
// its copy from kStagingDepth syncs ago has run (a wait on that one event,
// which blocks only when the host runs that many steps ahead of the GPU).
// Never a per-element host-to-device write, never a device-wide sync.
//
// Thread-safety: none; the engine's scheduler thread only.
class BlockTableMirror {
 public:
  static constexpr int kStagingDepth = 4;

  // `rows` x `width` block table, `rows` cache lengths, room for a cohort of
  // `cohort_capacity` slots; everything zero. The device copy lives on
  // `device`. RESOURCE_EXHAUSTED when memory cannot be had.
  static absl::StatusOr<std::unique_ptr<BlockTableMirror>> Create(int rows, int width,
                                                                  int cohort_capacity,
                                                                  Device device);
  ~BlockTableMirror();
  BlockTableMirror(const BlockTableMirror&) = delete;
  BlockTableMirror& operator=(const BlockTableMirror&) = delete;

  int rows() const { return rows_; }
  int width() const { return width_; }
  int cohort_capacity() const { return cohort_capacity_; }

  // Host row `row` of the block table (`width` entries), for writing; marks it
  // for the next Sync.
  int32_t* MutableRow(int row);
  const int32_t* Row(int row) const { return table_host_ + static_cast<int64_t>(row) * width_; }
  void SetSeqlen(int row, int32_t frames);
  int32_t Seqlen(int row) const { return seqlens_host_[row]; }

  // The cohort: the slot each batch row of the next kernel launch reads.
  // CHECK-fails past cohort_capacity (callers validate first).
  void ClearCohort();
  void AppendCohort(int32_t slot);
  int cohort_size() const { return cohort_size_; }
  int32_t CohortSlot(int i) const { return cohort_host_[i]; }

  // Brings the device copy up to date with everything written since the last
  // Sync: at most one cudaMemcpyAsync on `stream` (none when nothing changed,
  // none on the CPU). Kernels enqueued on `stream` afterwards read the new
  // tables. Never allocates.
  void Sync(GpuStream stream);

  // Device (CUDA) or host (CPU) views of the tables, stable for the mirror's
  // lifetime: block_table int32 (rows, width), cache_seqlens int32 (rows),
  // cohort_slots int32 (cohort_size).
  TensorView block_table() const;
  TensorView cache_seqlens() const;
  TensorView cohort_slots() const;
  // The same on the host (identical to the above on the CPU).
  TensorView host_block_table() const;
  TensorView host_cache_seqlens() const;

  // Host-to-device copies issued so far and their bytes (for tests and the
  // benchmark).
  int64_t num_copies() const { return num_copies_; }
  int64_t bytes_copied() const { return bytes_copied_; }

 private:
  BlockTableMirror(int rows, int width, int cohort_capacity, Tensor host, Tensor device);
  TensorView Region(const Tensor& buffer, int64_t offset, const Shape& shape) const;

  const int rows_;
  const int width_;
  const int cohort_capacity_;
  Tensor host_;
  Tensor device_;  // Empty on the CPU: the host buffer is the mirror.
  int32_t* cohort_host_;
  int32_t* seqlens_host_;
  int32_t* table_host_;
  int cohort_size_ = 0;
  bool header_dirty_ = true;  // Cohort or cache lengths changed.
  int dirty_rows_end_ = 0;    // One past the highest table row written.
  int64_t num_copies_ = 0;
  int64_t bytes_copied_ = 0;

  // CUDA staging ring (unused on the CPU).
  std::array<void*, kStagingDepth> staging_{};
  std::array<void*, kStagingDepth> events_{};  // cudaEvent_t
  std::array<bool, kStagingDepth> in_flight_{};
  int next_staging_ = 0;
};

}  // namespace oasr::cache
