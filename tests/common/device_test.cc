#include "common/device.h"

#include <gtest/gtest.h>

namespace oasr {
namespace {

TEST(DeviceTest, ParsesAndPrints) {
  EXPECT_EQ(*ParseDevice("cpu"), Device::Cpu());
  EXPECT_EQ(*ParseDevice("cuda"), Device::Cuda(0));
  EXPECT_EQ(*ParseDevice("cuda:3"), Device::Cuda(3));
  EXPECT_EQ(Device::Cuda(2).ToString(), "cuda:2");
  EXPECT_EQ(Device::Cpu().ToString(), "cpu");
}

TEST(DeviceTest, RejectsBadNamesByValue) {
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", ""}) {
    absl::StatusOr<Device> device = ParseDevice(bad);
    ASSERT_FALSE(device.ok()) << bad;
    EXPECT_NE(device.status().message().find(std::string("'") + bad + "'"), std::string::npos);
  }
}

TEST(DeviceTest, DefaultDeviceFollowsTheMachine) {
  EXPECT_GE(CudaDeviceCount(), 0);
  if (CudaDeviceCount() == 0) {
    EXPECT_EQ(DefaultDevice(), Device::Cpu());
    EXPECT_FALSE(CudaDeviceName(0).ok());
    EXPECT_FALSE(QueryDeviceMemory(Device::Cuda(0)).ok());
  } else {
    EXPECT_EQ(DefaultDevice(), Device::Cuda(0));
    EXPECT_TRUE(CudaDeviceName(0).ok());
  }
  EXPECT_FALSE(QueryDeviceMemory(Device::Cpu()).ok());
}

}  // namespace
}  // namespace oasr
