// A minimal dense tensor: contiguous row-major storage that knows its dtype,
// shape and device. `Tensor` owns its memory (move-only); `TensorView` is a
// non-owning window onto a tensor or any other buffer. Neither allocates on
// the heap except Tensor's one storage allocation, so views are free to make
// on hot paths.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/check.h"
#include "common/device.h"
#include "common/dtype.h"
#include "common/gpu_stream.h"

namespace oasr {

// Dimensions of a tensor, rank at most kMaxRank, stored inline.
class Shape {
 public:
  static constexpr int kMaxRank = 6;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const {
    OASR_DCHECK(i >= 0 && i < rank_);
    return dims_[i];
  }
  int64_t& operator[](int i) {
    OASR_DCHECK(i >= 0 && i < rank_);
    return dims_[i];
  }
  // Product of all dimensions (1 for rank 0).
  int64_t numel() const;
  // Elements between consecutive indices of dimension `i` (row-major).
  int64_t stride(int i) const;
  // Appends a dimension; CHECK-fails beyond kMaxRank.
  void push_back(int64_t dim);
  // "[2, 3, 4]".
  std::string ToString() const;
  bool operator==(const Shape& other) const;

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// A non-owning view of contiguous memory. The viewed memory must outlive it.
class TensorView {
 public:
  TensorView() = default;
  TensorView(void* data, DType dtype, const Shape& shape, Device device)
      : data_(data), dtype_(dtype), shape_(shape), device_(device) {}

  void* data() const { return data_; }
  template <typename T>
  T* data() const {
    OASR_DCHECK(DTypeOf<T>() == dtype_);
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  Device device() const { return device_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }
  bool empty() const { return data_ == nullptr; }

  // Rows [start, start + length) of dimension 0; contiguous, so still a view.
  TensorView Slice(int64_t start, int64_t length) const;
  // The sub-tensor at `index` of dimension 0 (rank drops by one).
  TensorView Select(int64_t index) const;
  // Same memory with another shape of the same element count.
  TensorView Reshape(const Shape& shape) const;

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  Device device_;
};

// An owning tensor. Storage is allocated once at construction (64-byte
// aligned host memory, or cudaMalloc on a CUDA device) and freed on
// destruction. Move-only.
class Tensor {
 public:
  Tensor() = default;
  ~Tensor();
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // Uninitialised storage. Fails with RESOURCE_EXHAUSTED (naming the bytes and
  // device) when the memory cannot be had, INVALID_ARGUMENT for a negative
  // dimension, and UNAVAILABLE for a CUDA device in a build or machine without one.
  static absl::StatusOr<Tensor> Empty(const Shape& shape, DType dtype,
                                      Device device = Device::Cpu());
  // Zero-filled storage; same failures as Empty.
  static absl::StatusOr<Tensor> Zeros(const Shape& shape, DType dtype,
                                      Device device = Device::Cpu());
  // Host storage that the GPU can copy from and to asynchronously: page-locked
  // (cudaHostAlloc) when the build and the machine have CUDA, plain aligned
  // host memory otherwise. Same failures as Empty.
  static absl::StatusOr<Tensor> EmptyPinned(const Shape& shape, DType dtype);
  // Whether the storage is page-locked host memory.
  bool pinned() const { return pinned_; }

  TensorView view() const { return view_; }
  void* data() const { return view_.data(); }
  template <typename T>
  T* data() const {
    return view_.data<T>();
  }
  DType dtype() const { return view_.dtype(); }
  const Shape& shape() const { return view_.shape(); }
  Device device() const { return view_.device(); }
  int64_t dim(int i) const { return view_.dim(i); }
  int64_t numel() const { return view_.numel(); }
  size_t nbytes() const { return view_.nbytes(); }
  bool empty() const { return view_.empty(); }

 private:
  void Release();
  TensorView view_;
  bool pinned_ = false;
};

// Copies src into dst (same dtype and element count; any devices). Synchronous.
absl::Status CopyTensor(const TensorView& dst, const TensorView& src);

// Sets every byte of `dst` to zero (host memset or cudaMemset). Synchronous.
void ZeroTensor(const TensorView& dst);

// Copies src into dst like CopyTensor, enqueued on `stream` when either side
// is on a CUDA device (host sides should be pinned for the copy to be truly
// asynchronous); a host-to-host copy happens at once. Same errors.
absl::Status CopyTensorAsync(const TensorView& dst, const TensorView& src, GpuStream stream);

}  // namespace oasr
