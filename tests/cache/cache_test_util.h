// Shared fixtures for the cache tests. The device-parameterised suites are
// compiled into two binaries: cache_test instantiates them on the CPU and
// cache_gpu_test on cuda:0 (skipping cleanly where no GPU is present), so
// both storage variants run the same test bodies.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "cache/cache_config.h"
#include "common/device.h"
#include "common/gpu_stream.h"
#include "common/tensor.h"

#ifndef OASR_CACHE_TEST_CUDA
#error "OASR_CACHE_TEST_CUDA must be 0 (CPU storage) or 1 (CUDA storage)"
#endif

namespace oasr {
// Readable test parameters ("cpu", "cuda:0") in gtest output.
inline void PrintTo(const Device& device, std::ostream* os) { *os << device.ToString(); }
}  // namespace oasr

namespace oasr::cache::testing {

// The storage this binary tests.
inline Device TestDevice() { return OASR_CACHE_TEST_CUDA ? Device::Cuda(0) : Device::Cpu(); }

// Base fixture: skips without a GPU for CUDA storage, owns a non-blocking
// CUDA stream (nullptr on the CPU), and moves bytes between host vectors and
// device views.
class CacheDeviceTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override;
  void TearDown() override;

  Device device() const { return GetParam(); }
  bool on_cuda() const { return GetParam().is_cuda(); }
  GpuStream stream() const { return stream_; }
  // Waits for everything enqueued on stream().
  void Sync() const;

  // The contents of `view` (any device) after Sync().
  template <typename T>
  std::vector<T> Read(const TensorView& view) const {
    std::vector<T> out(static_cast<size_t>(view.numel()));
    ReadBytes(view, out.data());
    return out;
  }
  // Overwrites `view` with `data` (after Sync(), so it is ordered after the
  // stream's work).
  template <typename T>
  void Write(const TensorView& view, const std::vector<T>& data) const {
    ASSERT_EQ(static_cast<int64_t>(data.size()), view.numel());
    WriteBytes(view, data.data());
  }
  void ReadBytes(const TensorView& view, void* host) const;
  void WriteBytes(const TensorView& view, const void* host) const;

  // A small float32 geometry on the tested device: 2 layers, 2 KV heads of
  // dim 3, hidden 5, kernel 4, chunk = block = 4, 8 streams, 64 blocks.
  CacheConfig SmallConfig() const;

 private:
  GpuStream stream_ = nullptr;
};

// Instantiates a CacheDeviceTest suite on this binary's device.
#define OASR_INSTANTIATE_CACHE_DEVICE_TEST(Suite)                                                  \
  INSTANTIATE_TEST_SUITE_P(Device, Suite, ::testing::Values(::oasr::cache::testing::TestDevice()), \
                           [](const ::testing::TestParamInfo<::oasr::Device>& info) {              \
                             return info.param.is_cuda() ? std::string("cuda")                     \
                                                         : std::string("cpu");                     \
                           })

}  // namespace oasr::cache::testing
