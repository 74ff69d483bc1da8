// CohortStaging: the per-row arrays of a cohort plan (slots, frames,
// offsets) and the rows' feature windows at fixed addresses: a host buffer
// the scheduler fills (page-locked on CUDA) and its device copy, refreshed by
// one asynchronous copy per tick. On the CPU the device views are the host
// buffer itself and Upload copies nothing.
//
// Layout, one int32/float32 buffer: [slots: capacity][frames: capacity]
// [offsets: capacity][feats: capacity x window_floats], so one copy of a
// prefix moves the arrays and the first `batch` rows' features.
//
// The host side may be refilled only after the previous tick's copy has run
// (the engine waits for every tick's log-probs, which follow the copy on the
// same stream). Thread-safety: none; the scheduler thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

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
  // Room for `capacity` rows of `window_floats` feature values each.
  // RESOURCE_EXHAUSTED when memory cannot be had.
  static absl::StatusOr<std::unique_ptr<CohortStaging>> Create(int capacity, int64_t window_frames,
                                                               int feature_dim, Device device);

  int capacity() const { return capacity_; }
  // Host arrays to fill, row-indexed.
  int32_t* slots() const { return host_ints(); }
  int32_t* frames() const { return host_ints() + capacity_; }
  int32_t* offsets() const { return host_ints() + 2 * capacity_; }
  // Row `row`'s window, [window_frames, feature_dim] floats.
  float* feats(int row) const {
    return reinterpret_cast<float*>(host_ints() + 3 * capacity_) + row * window_floats_;
  }

  // Copies the arrays and the first `batch` rows' features to the device
  // (asynchronously on `stream`; nothing on the CPU).
  absl::Status Upload(int batch, GpuStream stream);

  // Device views of the first `batch` rows: int32 [batch] and float32
  // [batch, window_frames, feature_dim].
  TensorView device_slots(int batch) const { return DeviceInts(0, batch); }
  TensorView device_frames(int batch) const { return DeviceInts(capacity_, batch); }
  TensorView device_offsets(int batch) const { return DeviceInts(2 * capacity_, batch); }
  TensorView device_feats(int batch) const;

 private:
  CohortStaging(int capacity, int64_t window_frames, int feature_dim, Tensor host, Tensor device);
  int32_t* host_ints() const { return static_cast<int32_t*>(host_.data()); }
  TensorView DeviceInts(int64_t at, int batch) const;
  const Tensor& device_buffer() const { return device_.empty() ? host_ : device_; }

  const int capacity_;
  const int64_t window_frames_;
  const int feature_dim_;
  const int64_t window_floats_;
  Tensor host_;
  Tensor device_;  // Empty on the CPU.
};

// The plan of the staging's first `batch` rows over the engine's caches: the
// pool's K/V, the mirror's tables (device and host) and the slot states.
// Every view points at a fixed address, so plans of the same batch made at
// different ticks are identical (what a captured CUDA graph relies on).
// Non-owning: valid while the staging, pool, mirror and states live.
CohortPlan MakeCohortPlan(const CohortStaging& staging, int batch, int chunk,
                          const cache::BlockPool& pool, const cache::BlockTableMirror& tables,
                          std::span<const TensorView> states);

}  // namespace oasr::scheduler
