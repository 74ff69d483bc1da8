#include "common/arena.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace oasr {
namespace {

size_t RoundUp(size_t bytes) {
  return (bytes + Arena::kAlignment - 1) / Arena::kAlignment * Arena::kAlignment;
}

// Measuring arenas hand out offsets from this fake base (never dereferenced).
constexpr uintptr_t kMeasuringBase = uintptr_t{1} << 40;

}  // namespace

absl::Status Arena::Reserve(size_t bytes, Device device, bool pinned) {
  if (used_ != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("Arena::Reserve: ", used_, " bytes are still allocated"));
  }
  const Shape shape{static_cast<int64_t>(RoundUp(std::max<size_t>(bytes, 1)))};
  absl::StatusOr<Tensor> storage = pinned && device.is_cpu()
                                       ? Tensor::EmptyPinned(shape, DType::kUInt8)
                                       : Tensor::Empty(shape, DType::kUInt8, device);
  if (!storage.ok()) return storage.status();
  storage_ = std::move(*storage);
  device_ = device;
  measuring_ = false;
  capacity_ = storage_.nbytes();
  peak_ = 0;
  return absl::OkStatus();
}

Arena Arena::Measuring() {
  Arena arena;
  arena.measuring_ = true;
  arena.capacity_ = SIZE_MAX;
  return arena;
}

Arena::Arena(Arena&& other) noexcept
    : storage_(std::move(other.storage_)),
      device_(other.device_),
      measuring_(other.measuring_),
      capacity_(std::exchange(other.capacity_, 0)),
      used_(std::exchange(other.used_, 0)),
      peak_(std::exchange(other.peak_, 0)) {}

Arena& Arena::operator=(Arena&& other) noexcept {
  if (this != &other) {
    storage_ = std::move(other.storage_);
    device_ = other.device_;
    measuring_ = other.measuring_;
    capacity_ = std::exchange(other.capacity_, 0);
    used_ = std::exchange(other.used_, 0);
    peak_ = std::exchange(other.peak_, 0);
  }
  return *this;
}

void* Arena::Allocate(size_t bytes) {
  const size_t size = RoundUp(std::max<size_t>(bytes, 1));
  if (!measuring_ && size > capacity_ - used_) return nullptr;
  void* p = measuring_ ? reinterpret_cast<void*>(kMeasuringBase + used_)
                       : static_cast<char*>(storage_.data()) + used_;
  used_ += size;
  peak_ = std::max(peak_, used_);
  return p;
}

TensorView Arena::AllocateTensor(const Shape& shape, DType dtype) {
  void* p = Allocate(static_cast<size_t>(shape.numel()) * DTypeSize(dtype));
  if (p == nullptr) return TensorView();
  return TensorView(p, dtype, shape, device_);
}

void Arena::Rewind(size_t mark) {
  OASR_CHECK(mark <= used_, absl::StrCat("Arena::Rewind to ", mark, " above ", used_));
  used_ = mark;
}

}  // namespace oasr
