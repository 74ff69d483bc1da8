// Arena: the scratch memory of one execution context, reserved once at
// start-up and handed out by bumping an offset, so that a chunk step never
// allocates. A forward takes what it needs in a fixed order and rewinds to
// its starting mark when done; the same order run against a measuring arena
// (which hands out addresses without memory) tells how much to reserve, so
// the reservation and the use cannot drift apart.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"
#include "common/tensor.h"

namespace oasr {

class Arena {
 public:
  // Every allocation starts on a multiple of this (vector loads, cuBLASLt).
  static constexpr size_t kAlignment = 256;

  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Reserves `bytes` on `device` (page-locked host memory when `pinned` and
  // the device is the CPU). Replaces an earlier reservation, which must be
  // unused (used() == 0). RESOURCE_EXHAUSTED when the memory cannot be had;
  // FAILED_PRECONDITION while allocations are outstanding.
  absl::Status Reserve(size_t bytes, Device device, bool pinned = false);

  // An arena that owns no memory: Allocate returns distinct, aligned,
  // never-dereferenceable addresses and records the peak, so that a caller
  // can measure what a sequence of allocations needs.
  static Arena Measuring();
  Arena(Arena&& other) noexcept;
  Arena& operator=(Arena&& other) noexcept;

  // `bytes` rounded up to kAlignment, or nullptr when they do not fit (never
  // on a measuring arena). Not thread-safe.
  void* Allocate(size_t bytes);
  // A tensor view of `shape` and `dtype` carved from the arena on its
  // device; empty when it does not fit.
  TensorView AllocateTensor(const Shape& shape, DType dtype);

  // The current offset, to rewind to later.
  size_t mark() const { return used_; }
  // Drops every allocation made after `mark`.
  void Rewind(size_t mark);

  bool measuring() const { return measuring_; }
  Device device() const { return device_; }
  size_t capacity() const { return capacity_; }
  size_t used() const { return used_; }
  // The most ever in use at once (the requirement, on a measuring arena).
  size_t peak() const { return peak_; }

 private:
  Tensor storage_;
  Device device_ = Device::Cpu();
  bool measuring_ = false;
  size_t capacity_ = 0;
  size_t used_ = 0;
  size_t peak_ = 0;
};

}  // namespace oasr
