// CohortStaging: the per-row arrays of a cohort plan (slots, frames,
// offsets, feature frames) and the rows' windows at fixed addresses: a host
// buffer the scheduler fills (page-locked on CUDA) and its device copy,
// refreshed by one asynchronous copy per tick. On the CPU the device views
// are the host buffer itself and Upload copies nothing.
//
// A row's window is its features, or with a device front end (pcm_stride
// > 0) its 16 kHz PCM, whose features the forward writes into a device-only
// feature buffer. With the PCM in rings (pcm_ring: every stream's samples in
// page-locked memory the device reads, scheduler::Engine) no window is
// staged: a row names where its window starts in its ring, and the forward
// gathers the windows into a device-only PCM buffer. Layout, one
// int32/float32 buffer: [slots: capacity][frames: capacity][offsets:
// capacity][feat_frames: capacity][ring starts: capacity][windows: capacity
// x row_floats, none with rings], so one copy of a prefix moves the arrays
// and the first `batch` rows' windows.
//
// The host side may be refilled only after the previous tick's copy has run
// (the engine waits for every tick's log-probs, which follow the copy on the
// same stream). Thread-safety: none; the scheduler thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/block_pool.h"
#include "cache/block_table_mirror.h"
#include "common/gpu_stream.h"
#include "common/tensor.h"
#include "scheduler/streaming_model.h"

namespace oasr::scheduler {

class CohortStaging {
 public:
  // Room for `capacity` rows of `window_frames` x `feature_dim` features,
  // or with pcm_stride > 0, of pcm_stride PCM samples each (and the feature
  // buffer the device front end fills); with pcm_ring, no staged windows
  // but a device buffer of capacity x pcm_stride samples for the gathered
  // ones. RESOURCE_EXHAUSTED when memory cannot be had.
  static absl::StatusOr<std::unique_ptr<CohortStaging>> Create(int capacity, int64_t window_frames,
                                                               int feature_dim, Device device,
                                                               int64_t pcm_stride = 0,
                                                               bool pcm_ring = false);

  int capacity() const { return capacity_; }
  bool has_pcm() const { return pcm_stride_ > 0; }
  bool pcm_ring() const { return !pcm_.empty(); }
  // Host arrays to fill, row-indexed.
  int32_t* slots() const { return host_ints(); }
  int32_t* frames() const { return host_ints() + capacity_; }
  int32_t* offsets() const { return host_ints() + 2 * capacity_; }
  int32_t* feat_frames() const { return host_ints() + 3 * capacity_; }
  // With pcm_ring: the ring row each row's window starts at.
  int32_t* ring_starts() const { return host_ints() + 4 * capacity_; }
  // Row `row`'s window: [window_frames, feature_dim] features (without PCM)
  // or pcm_stride samples (with).
  float* feats(int row) const { return window(row); }
  float* pcm(int row) const { return window(row); }

  // Copies the arrays and the first `batch` rows' windows to the device
  // (asynchronously on `stream`; nothing on the CPU).
  absl::Status Upload(int batch, GpuStream stream);

  // Device views of the first `batch` rows: int32 [batch], float32
  // [batch, window_frames, feature_dim] and (with PCM) float32
  // [batch, pcm_stride].
  TensorView device_slots(int batch) const { return DeviceInts(0, batch); }
  TensorView device_frames(int batch) const { return DeviceInts(capacity_, batch); }
  TensorView device_offsets(int batch) const { return DeviceInts(2 * capacity_, batch); }
  TensorView device_feat_frames(int batch) const { return DeviceInts(3 * capacity_, batch); }
  TensorView device_ring_starts(int batch) const { return DeviceInts(4 * capacity_, batch); }
  TensorView device_feats(int batch) const;
  TensorView device_pcm(int batch) const;

 private:
  static constexpr int kArrays = 5;
  CohortStaging(int capacity, int64_t window_frames, int feature_dim, int64_t pcm_stride,
                int64_t row_floats, Tensor host, Tensor device, Tensor feats, Tensor pcm);
  int32_t* host_ints() const { return static_cast<int32_t*>(host_.data()); }
  float* window(int row) const {
    return reinterpret_cast<float*>(host_ints() + kArrays * capacity_) + row * row_floats_;
  }
  TensorView DeviceInts(int64_t at, int batch) const;
  TensorView DeviceWindows(Shape shape) const;
  const Tensor& device_buffer() const { return device_.empty() ? host_ : device_; }

  const int capacity_;
  const int64_t window_frames_;
  const int feature_dim_;
  const int64_t pcm_stride_;
  const int64_t row_floats_;  // A staged window: features, or PCM (0 with rings).
  Tensor host_;
  Tensor device_;  // Empty on the CPU.
  Tensor feats_;   // With PCM: what the device front end writes.
  Tensor pcm_;     // With rings: the gathered windows (device-only).
};

// The cohort widths CUDA graphs are captured for, ascending, from 1 to
// `capacity`: powers of two up to 64, then steps of about 1.25x (multiples
// of 16), so a cohort padded to the next width runs at most ~25 % padding
// rows once cohorts are wide enough for padding to cost real time (about
// 31 widths for 16,384 rows).
std::vector<int> GraphLadder(int capacity);

// How many of `rows` ready rows a tick runs with `widths` captured
// (ascending): all of them below `fill_from` rows (or with fill_from 0, or
// no widths), padded to the next width; from there on the widest width
// that is at most `rows`, so that no padding row is computed.
size_t FilledRows(std::span<const int> widths, size_t rows, size_t fill_from);

// The plan of the staging's first `batch` rows over the engine's caches: the
// pool's K/V, the mirror's tables (device and host) and the slot states.
// Every view points at a fixed address, so plans of the same batch made at
// different ticks are identical (what a captured CUDA graph relies on).
// Non-owning: valid while the staging, pool, mirror and states live.
// With the staging's pcm_ring, `pcm_ring` (int16 [lanes, ring_rows, 80])
// is where the forward gathers the windows from.
CohortPlan MakeCohortPlan(const CohortStaging& staging, int batch, int chunk,
                          const cache::BlockPool& pool, const cache::BlockTableMirror& tables,
                          std::span<const TensorView> states, const TensorView& pcm_ring = {});

}  // namespace oasr::scheduler
