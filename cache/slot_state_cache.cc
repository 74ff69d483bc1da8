#include "cache/slot_state_cache.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "cache/device_copy.h"
#include "common/status.h"

namespace oasr::cache {

namespace {

Shape InsertAxis(const Shape& shape, int axis, int64_t size) {
  Shape out;
  for (int i = 0; i < shape.rank(); ++i) {
    if (i == axis) out.push_back(size);
    out.push_back(shape[i]);
  }
  if (axis == shape.rank()) out.push_back(size);
  return out;
}

// Elements of `shape` before and from `axis`.
int64_t ElementsBefore(const Shape& shape, int axis) {
  int64_t n = 1;
  for (int i = 0; i < axis; ++i) n *= shape[i];
  return n;
}
int64_t ElementsFrom(const Shape& shape, int axis) {
  int64_t n = 1;
  for (int i = axis; i < shape.rank(); ++i) n *= shape[i];
  return n;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SlotStateCache>> SlotStateCache::Create(
    std::vector<StreamStateSpec> specs, int num_slots, Device device) {
  if (num_slots <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SlotStateCache: num_slots = ", num_slots, ": must be positive"));
  }
  absl::flat_hash_set<std::string> names;
  std::vector<Tensor> buffers;
  buffers.reserve(specs.size());
  for (const StreamStateSpec& spec : specs) {
    if (spec.name.empty() || !names.insert(spec.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("SlotStateCache: state name '", spec.name, "' is empty or repeated"));
    }
    const int rank = spec.per_slot_shape.rank();
    if (rank >= Shape::kMaxRank || spec.slot_axis < 0 || spec.slot_axis > rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("SlotStateCache: state '", spec.name, "' per_slot_shape ",
                       spec.per_slot_shape.ToString(), " with slot_axis ", spec.slot_axis,
                       ": slot_axis must be in [0, ", rank, "] and rank below ", Shape::kMaxRank));
    }
    // Zero is the initial value of every state.
    OASR_ASSIGN_OR_RETURN(Tensor t,
                          Tensor::Zeros(InsertAxis(spec.per_slot_shape, spec.slot_axis, num_slots),
                                        spec.dtype, device));
    buffers.push_back(std::move(t));
  }
  return std::unique_ptr<SlotStateCache>(
      new SlotStateCache(std::move(specs), num_slots, device, std::move(buffers)));
}

SlotStateCache::SlotStateCache(std::vector<StreamStateSpec> specs, int num_slots, Device device,
                               std::vector<Tensor> buffers)
    : specs_(std::move(specs)),
      num_slots_(num_slots),
      device_(device),
      buffers_(std::move(buffers)) {}

absl::StatusOr<int> SlotStateCache::SpecIndex(const std::string& name) const {
  for (int i = 0; i < num_specs(); ++i) {
    if (specs_[i].name == name) return i;
  }
  return absl::NotFoundError(absl::StrCat("SlotStateCache: no state named '", name, "'"));
}

Shape SlotStateCache::CohortShape(int spec, int64_t count) const {
  OASR_CHECK(spec >= 0 && spec < num_specs(), absl::StrCat("state spec ", spec));
  return InsertAxis(specs_[spec].per_slot_shape, specs_[spec].slot_axis, count);
}

absl::Status SlotStateCache::CheckSlot(int slot) const {
  if (slot >= 0 && slot < num_slots_) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("SlotStateCache: slot ", slot, " is out of range [0, ", num_slots_, ")"));
}

void SlotStateCache::Zero(int spec, int slot, GpuStream gpu_stream) {
  const Shape& shape = buffers_[spec].shape();
  const int axis = specs_[spec].slot_axis;
  const size_t inner =
      static_cast<size_t>(ElementsFrom(shape, axis + 1)) * DTypeSize(specs_[spec].dtype);
  char* base = static_cast<char*>(buffers_[spec].data());
  ZeroRows(base + slot * inner, inner * num_slots_, inner,
           static_cast<size_t>(ElementsBefore(shape, axis)), device_, gpu_stream);
}

absl::Status SlotStateCache::ZeroSlot(int slot, GpuStream gpu_stream) {
  OASR_RETURN_IF_ERROR(CheckSlot(slot));
  for (int i = 0; i < num_specs(); ++i) Zero(i, slot, gpu_stream);
  return absl::OkStatus();
}

absl::Status SlotStateCache::ResetSlot(int slot, GpuStream gpu_stream) {
  OASR_RETURN_IF_ERROR(CheckSlot(slot));
  for (int i = 0; i < num_specs(); ++i) {
    if (!specs_[i].persistent) Zero(i, slot, gpu_stream);
  }
  return absl::OkStatus();
}

absl::Status SlotStateCache::CheckCohort(int spec, std::span<const int32_t> slots,
                                         const TensorView& dense, const char* what) const {
  if (spec < 0 || spec >= num_specs()) {
    return absl::InvalidArgumentError(absl::StrCat("SlotStateCache::", what, ": spec ", spec,
                                                   " out of range [0, ", num_specs(), ")"));
  }
  const Shape expected = CohortShape(spec, static_cast<int64_t>(slots.size()));
  if (!(dense.shape() == expected) || dense.dtype() != specs_[spec].dtype ||
      !(dense.device() == device_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SlotStateCache::", what, " '", specs_[spec].name, "': got ", DTypeName(dense.dtype()),
        dense.shape().ToString(), " on ", dense.device().ToString(), ", expected ",
        DTypeName(specs_[spec].dtype), expected.ToString(), " on ", device_.ToString()));
  }
  for (const int32_t slot : slots) OASR_RETURN_IF_ERROR(CheckSlot(slot));
  return absl::OkStatus();
}

void SlotStateCache::Move(int spec, std::span<const int32_t> slots, void* dense, bool to_dense,
                          GpuStream gpu_stream) const {
  const Shape& shape = buffers_[spec].shape();
  const int axis = specs_[spec].slot_axis;
  const size_t inner =
      static_cast<size_t>(ElementsFrom(shape, axis + 1)) * DTypeSize(specs_[spec].dtype);
  const size_t outer = static_cast<size_t>(ElementsBefore(shape, axis));
  const size_t count = slots.size();
  char* stored = static_cast<char*>(buffers_[spec].data());
  char* packed = static_cast<char*>(dense);
  for (size_t b = 0; b < count;) {
    // A run of consecutive slots is one strided copy.
    size_t run = 1;
    while (b + run < count && slots[b + run] == slots[b] + static_cast<int32_t>(run)) ++run;
    char* s = stored + slots[b] * inner;
    char* d = packed + b * inner;
    if (to_dense) {
      CopyRows(d, count * inner, s, num_slots_ * inner, run * inner, outer, device_, gpu_stream);
    } else {
      CopyRows(s, num_slots_ * inner, d, count * inner, run * inner, outer, device_, gpu_stream);
    }
    b += run;
  }
}

absl::Status SlotStateCache::Gather(int spec, std::span<const int32_t> slots, const TensorView& out,
                                    GpuStream gpu_stream) const {
  OASR_RETURN_IF_ERROR(CheckCohort(spec, slots, out, "Gather"));
  Move(spec, slots, out.data(), /*to_dense=*/true, gpu_stream);
  return absl::OkStatus();
}

absl::Status SlotStateCache::Scatter(int spec, std::span<const int32_t> slots, const TensorView& in,
                                     GpuStream gpu_stream) {
  OASR_RETURN_IF_ERROR(CheckCohort(spec, slots, in, "Scatter"));
  Move(spec, slots, in.data(), /*to_dense=*/false, gpu_stream);
  return absl::OkStatus();
}

Shape SlotStateView::shape() const {
  return cache_->CohortShape(spec_, static_cast<int64_t>(slots_.size()));
}

absl::Status SlotStateView::Gather(const TensorView& out, GpuStream gpu_stream) const {
  return cache_->Gather(spec_, slots_, out, gpu_stream);
}

absl::Status SlotStateView::Scatter(const TensorView& in, GpuStream gpu_stream) const {
  return cache_->Scatter(spec_, slots_, in, gpu_stream);
}

}  // namespace oasr::cache
