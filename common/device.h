// Where memory lives and what the build and the machine can do.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace oasr {

enum class DeviceType : uint8_t { kCpu, kCuda };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;  // CUDA ordinal; always 0 for the CPU.

  static constexpr Device Cpu() { return {DeviceType::kCpu, 0}; }
  static constexpr Device Cuda(int index = 0) { return {DeviceType::kCuda, index}; }
  constexpr bool is_cpu() const { return type == DeviceType::kCpu; }
  constexpr bool is_cuda() const { return type == DeviceType::kCuda; }
  constexpr bool operator==(const Device&) const = default;
  // "cpu" or "cuda:N".
  std::string ToString() const;
};

// Parses "cpu", "cuda" or "cuda:N". Errors name the bad value.
absl::StatusOr<Device> ParseDevice(const std::string& text);

// True when this binary was compiled with CUDA support.
bool BuiltWithCuda();

// Number of usable CUDA devices: 0 when the build has no CUDA, when no driver
// is installed, or when the driver reports no device. Never fails.
int CudaDeviceCount();

// A one-line description of device `index` ("NVIDIA H200, 139.8 GiB, sm_90"),
// or an error when there is no such device.
absl::StatusOr<std::string> CudaDeviceName(int index);

// Free and total bytes of device memory (CUDA), or an error on the CPU.
struct DeviceMemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};
absl::StatusOr<DeviceMemoryInfo> QueryDeviceMemory(Device device);

// The default device for serving: cuda:0 when a GPU is usable, else cpu.
Device DefaultDevice();

}  // namespace oasr
