#include "common/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#if OASR_WITH_CUDA
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#endif

namespace oasr {

namespace {
constexpr size_t kHostAlignment = 64;
}  // namespace

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) push_back(d);
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

int64_t Shape::stride(int i) const {
  OASR_DCHECK(i >= 0 && i < rank_);
  int64_t s = 1;
  for (int j = i + 1; j < rank_; ++j) s *= dims_[j];
  return s;
}

void Shape::push_back(int64_t dim) {
  OASR_CHECK(rank_ < kMaxRank, "Shape rank above kMaxRank");
  dims_[rank_++] = dim;
}

std::string Shape::ToString() const {
  return absl::StrCat("[", absl::StrJoin(dims_.begin(), dims_.begin() + rank_, ", "), "]");
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] != other.dims_[i]) return false;
  }
  return true;
}

TensorView TensorView::Slice(int64_t start, int64_t length) const {
  OASR_CHECK(rank() >= 1);
  OASR_CHECK(start >= 0 && length >= 0 && start + length <= dim(0),
             absl::StrCat("Slice [", start, ", ", start + length, ") of ", shape_.ToString()));
  Shape shape = shape_;
  shape[0] = length;
  const size_t offset = static_cast<size_t>(start * shape_.stride(0)) * DTypeSize(dtype_);
  return TensorView(static_cast<char*>(data_) + offset, dtype_, shape, device_);
}

TensorView TensorView::Select(int64_t index) const {
  OASR_CHECK(rank() >= 1);
  OASR_CHECK(index >= 0 && index < dim(0),
             absl::StrCat("Select ", index, " of ", shape_.ToString()));
  Shape shape;
  for (int i = 1; i < rank(); ++i) shape.push_back(shape_[i]);
  const size_t offset = static_cast<size_t>(index * shape_.stride(0)) * DTypeSize(dtype_);
  return TensorView(static_cast<char*>(data_) + offset, dtype_, shape, device_);
}

TensorView TensorView::Reshape(const Shape& shape) const {
  OASR_CHECK(shape.numel() == numel(),
             absl::StrCat("Reshape ", shape_.ToString(), " to ", shape.ToString()));
  return TensorView(data_, dtype_, shape, device_);
}

Tensor::~Tensor() { Release(); }

Tensor::Tensor(Tensor&& other) noexcept
    : view_(std::exchange(other.view_, TensorView())),
      pinned_(std::exchange(other.pinned_, false)) {}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    Release();
    view_ = std::exchange(other.view_, TensorView());
    pinned_ = std::exchange(other.pinned_, false);
  }
  return *this;
}

void Tensor::Release() {
  if (view_.data() == nullptr) return;
  if (view_.device().is_cuda()) {
#if OASR_WITH_CUDA
    cudaFree(view_.data());
#endif
  } else if (pinned_) {
#if OASR_WITH_CUDA
    cudaFreeHost(view_.data());
#endif
  } else {
    std::free(view_.data());
  }
  view_ = TensorView();
  pinned_ = false;
}

absl::StatusOr<Tensor> Tensor::EmptyPinned(const Shape& shape, DType dtype) {
#if OASR_WITH_CUDA
  if (CudaDeviceCount() > 0) {
    for (int i = 0; i < shape.rank(); ++i) {
      if (shape[i] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor shape ", shape.ToString(), ": dimension ", i, " is negative"));
      }
    }
    const size_t bytes =
        std::max<size_t>(static_cast<size_t>(shape.numel()) * DTypeSize(dtype), kHostAlignment);
    void* data = nullptr;
    const cudaError_t err = cudaHostAlloc(&data, bytes, cudaHostAllocPortable);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(
          absl::StrCat("cudaHostAlloc of ", bytes, " bytes failed: ", cudaGetErrorString(err)));
    }
    Tensor tensor;
    tensor.view_ = TensorView(data, dtype, shape, Device::Cpu());
    tensor.pinned_ = true;
    return tensor;
  }
#endif
  return Empty(shape, dtype, Device::Cpu());
}

absl::StatusOr<Tensor> Tensor::Empty(const Shape& shape, DType dtype, Device device) {
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor shape ", shape.ToString(), ": dimension ", i, " is negative"));
    }
  }
  const size_t bytes = static_cast<size_t>(shape.numel()) * DTypeSize(dtype);
  // Never hand out a null pointer for a zero-sized tensor: empty() means "no tensor".
  const size_t alloc_bytes = bytes == 0 ? kHostAlignment : bytes;
  void* data = nullptr;
  if (device.is_cuda()) {
#if OASR_WITH_CUDA
    if (device.index >= CudaDeviceCount()) {
      return absl::UnavailableError(absl::StrCat(device.ToString(), " is not present"));
    }
    int previous = 0;
    OASR_CUDA_CHECK(cudaGetDevice(&previous));
    OASR_CUDA_CHECK(cudaSetDevice(device.index));
    const cudaError_t err = cudaMalloc(&data, alloc_bytes);
    OASR_CUDA_CHECK(cudaSetDevice(previous));
    if (err != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat("cudaMalloc of ", alloc_bytes, " bytes on ",
                                                       device.ToString(),
                                                       " failed: ", cudaGetErrorString(err)));
    }
#else
    return absl::UnavailableError(
        absl::StrCat("cannot allocate on ", device.ToString(), ": built without CUDA"));
#endif
  } else {
    const size_t rounded = (alloc_bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    data = std::aligned_alloc(kHostAlignment, rounded);
    if (data == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("host allocation of ", rounded, " bytes failed"));
    }
  }
  Tensor tensor;
  tensor.view_ = TensorView(data, dtype, shape, device);
  return tensor;
}

absl::StatusOr<Tensor> Tensor::Zeros(const Shape& shape, DType dtype, Device device) {
  absl::StatusOr<Tensor> tensor = Empty(shape, dtype, device);
  if (tensor.ok()) ZeroTensor(tensor->view());
  return tensor;
}

absl::Status CopyTensor(const TensorView& dst, const TensorView& src) {
  if (dst.dtype() != src.dtype() || dst.numel() != src.numel()) {
    return absl::InvalidArgumentError(absl::StrCat("CopyTensor: dst ", DTypeName(dst.dtype()),
                                                   dst.shape().ToString(), " vs src ",
                                                   DTypeName(src.dtype()), src.shape().ToString()));
  }
  if (dst.nbytes() == 0) return absl::OkStatus();
  if (dst.device().is_cpu() && src.device().is_cpu()) {
    std::memmove(dst.data(), src.data(), dst.nbytes());
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  OASR_CUDA_CHECK(cudaMemcpy(dst.data(), src.data(), dst.nbytes(), cudaMemcpyDefault));
  return absl::OkStatus();
#else
  return absl::UnavailableError("CopyTensor: CUDA tensors in a build without CUDA");
#endif
}

absl::Status CopyTensorAsync(const TensorView& dst, const TensorView& src, GpuStream stream) {
  if (dst.dtype() != src.dtype() || dst.numel() != src.numel()) {
    return absl::InvalidArgumentError(absl::StrCat("CopyTensorAsync: dst ", DTypeName(dst.dtype()),
                                                   dst.shape().ToString(), " vs src ",
                                                   DTypeName(src.dtype()), src.shape().ToString()));
  }
  if (dst.nbytes() == 0) return absl::OkStatus();
  if (dst.device().is_cpu() && src.device().is_cpu()) {
    std::memmove(dst.data(), src.data(), dst.nbytes());
    return absl::OkStatus();
  }
#if OASR_WITH_CUDA
  OASR_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), dst.nbytes(), cudaMemcpyDefault, stream));
  return absl::OkStatus();
#else
  (void)stream;
  return absl::UnavailableError("CopyTensorAsync: CUDA tensors in a build without CUDA");
#endif
}

void ZeroTensor(const TensorView& dst) {
  if (dst.nbytes() == 0) return;
  if (dst.device().is_cpu()) {
    std::memset(dst.data(), 0, dst.nbytes());
    return;
  }
#if OASR_WITH_CUDA
  OASR_CUDA_CHECK(cudaMemset(dst.data(), 0, dst.nbytes()));
#else
  OASR_CHECK(false, "ZeroTensor on a CUDA tensor in a build without CUDA");
#endif
}

}  // namespace oasr
