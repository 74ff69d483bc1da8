#include "common/device.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#if OASR_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace oasr {

std::string Device::ToString() const {
  return is_cpu() ? std::string("cpu") : absl::StrCat("cuda:", index);
}

absl::StatusOr<Device> ParseDevice(const std::string& text) {
  if (text == "cpu") return Device::Cpu();
  if (text == "cuda") return Device::Cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    int index = -1;
    if (absl::SimpleAtoi(text.substr(5), &index) && index >= 0) return Device::Cuda(index);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("device: '", text, "' is not one of cpu, cuda, cuda:N"));
}

bool BuiltWithCuda() { return OASR_WITH_CUDA != 0; }

int CudaDeviceCount() {
#if OASR_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // Clear the sticky "no driver" error.
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

absl::StatusOr<std::string> CudaDeviceName(int index) {
  if (index < 0 || index >= CudaDeviceCount()) {
    return absl::NotFoundError(absl::StrCat("cuda:", index, " is not present (",
                                            CudaDeviceCount(), " CUDA devices)"));
  }
#if OASR_WITH_CUDA
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaGetDeviceProperties(", index, ") failed"));
  }
  return absl::StrFormat("%s, %.1f GiB, sm_%d%d", prop.name,
                         static_cast<double>(prop.totalGlobalMem) / (1 << 30), prop.major,
                         prop.minor);
#else
  return absl::UnimplementedError("built without CUDA");
#endif
}

absl::StatusOr<DeviceMemoryInfo> QueryDeviceMemory(Device device) {
  if (!device.is_cuda()) {
    return absl::InvalidArgumentError("QueryDeviceMemory: device memory exists only on CUDA");
  }
#if OASR_WITH_CUDA
  if (device.index >= CudaDeviceCount()) {
    return absl::NotFoundError(absl::StrCat(device.ToString(), " is not present"));
  }
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(device.index);
  DeviceMemoryInfo info;
  const cudaError_t err = cudaMemGetInfo(&info.free_bytes, &info.total_bytes);
  cudaSetDevice(previous);
  if (err != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaMemGetInfo: ", cudaGetErrorString(err)));
  }
  return info;
#else
  return absl::UnimplementedError("built without CUDA");
#endif
}

Device DefaultDevice() { return CudaDeviceCount() > 0 ? Device::Cuda(0) : Device::Cpu(); }

}  // namespace oasr
