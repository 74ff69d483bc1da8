// SlotStateCache: fixed-extent, slot-addressed streaming state -- one
// persistent tensor per declared state with the stream's slot as one of its
// axes, overwritten in place every chunk (seed section 10, "two storage
// disciplines": this is the first).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/dtype.h"
#include "common/gpu_stream.h"
#include "common/tensor.h"

namespace oasr::cache {

// A declared per-stream state.
struct StreamStateSpec {
  std::string name;
  // The state of one stream, without the slot axis.
  Shape per_slot_shape;
  // Where the slot axis sits in the stored tensor (0 <= slot_axis <= rank):
  // the conv cache keeps its historical (layers, slots, frames, dim) layout
  // with slot_axis 1.
  int slot_axis = 0;
  // A state that describes the request, not the audio (a language prompt id):
  // ResetSlot keeps it.
  bool persistent = false;
  DType dtype = DType::kFloat32;
};

class SlotStateCache;

// A cohort's view of one declared state: what a chunk forward reads
// (Gather) and writes back (Scatter), in place, with no allocation. Holds
// non-owning pointers; valid while the cache and the slot list live.
class SlotStateView {
 public:
  SlotStateView(SlotStateCache* cache, int spec, std::span<const int32_t> slots)
      : cache_(cache), spec_(spec), slots_(slots) {}
  // The dense shape of the cohort's state: the stored shape with
  // slots.size() on the slot axis.
  Shape shape() const;
  // See SlotStateCache::Gather / Scatter.
  absl::Status Gather(const TensorView& out, GpuStream gpu_stream) const;
  absl::Status Scatter(const TensorView& in, GpuStream gpu_stream) const;

 private:
  SlotStateCache* cache_;
  int spec_;
  std::span<const int32_t> slots_;
};

// One tensor per spec, shaped per_slot_shape with an axis of num_slots
// inserted at slot_axis, allocated once and zeroed. Zero is every state's
// initial value: a zero left context is exactly the padding an offline pass
// applies, so a stream's first chunk computes what the offline pass would.
//
// Gather/Scatter move a cohort's rows between the stored tensor and a dense
// tensor whose slot axis has the cohort's length; runs of consecutive slots
// become one strided copy each. Device work is enqueued on the caller's
// stream (done in place on the CPU). Never allocates after Create.
//
// Thread-safety: none; the engine's scheduler thread only.
class SlotStateCache {
 public:
  // INVALID_ARGUMENT for an empty or repeated name, a slot_axis outside
  // [0, rank], a rank that leaves no room for the slot axis, a negative
  // dimension or num_slots <= 0; RESOURCE_EXHAUSTED when memory cannot be had.
  static absl::StatusOr<std::unique_ptr<SlotStateCache>> Create(std::vector<StreamStateSpec> specs,
                                                                int num_slots, Device device);

  // Zeroes every state of `slot` (a new stream). INVALID_ARGUMENT for a slot
  // out of range.
  absl::Status ZeroSlot(int slot, GpuStream gpu_stream);
  // Zeroes the non-persistent states of `slot` (a turn reset that keeps what
  // describes the request). INVALID_ARGUMENT for a slot out of range.
  absl::Status ResetSlot(int slot, GpuStream gpu_stream);

  // Copies the states of `slots` (in order) of spec `spec` into `out`, shaped
  // like the stored tensor with slots.size() on the slot axis, same dtype, on
  // the cache's device. INVALID_ARGUMENT naming expected and actual shapes on
  // a mismatch, or for a slot out of range.
  absl::Status Gather(int spec, std::span<const int32_t> slots, const TensorView& out,
                      GpuStream gpu_stream) const;
  // The reverse: writes `in` into the states of `slots`. Same errors.
  absl::Status Scatter(int spec, std::span<const int32_t> slots, const TensorView& in,
                       GpuStream gpu_stream);

  // The cohort view of spec `spec` over `slots` (checked when used).
  SlotStateView View(int spec, std::span<const int32_t> slots) { return {this, spec, slots}; }

  // The index of the spec called `name`; NOT_FOUND naming it.
  absl::StatusOr<int> SpecIndex(const std::string& name) const;
  int num_specs() const { return static_cast<int>(specs_.size()); }
  const StreamStateSpec& spec(int i) const { return specs_[i]; }
  int num_slots() const { return num_slots_; }
  Device device() const { return device_; }
  // The stored tensor of spec `i`: stable address for the cache's lifetime.
  TensorView buffer(int i) const { return buffers_[i].view(); }
  // The shape Gather/Scatter expect for a cohort of `count` slots.
  Shape CohortShape(int spec, int64_t count) const;

 private:
  SlotStateCache(std::vector<StreamStateSpec> specs, int num_slots, Device device,
                 std::vector<Tensor> buffers);
  absl::Status CheckSlot(int slot) const;
  absl::Status CheckCohort(int spec, std::span<const int32_t> slots, const TensorView& dense,
                           const char* what) const;
  // Moves a cohort between the stored tensor and `dense`, either way.
  void Move(int spec, std::span<const int32_t> slots, void* dense, bool to_dense,
            GpuStream gpu_stream) const;
  void Zero(int spec, int slot, GpuStream gpu_stream);

  const std::vector<StreamStateSpec> specs_;
  const int num_slots_;
  const Device device_;
  std::vector<Tensor> buffers_;
};

}  // namespace oasr::cache
