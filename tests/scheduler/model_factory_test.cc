// The tools' --device and --dtype parsing (scheduler/model_factory.h).
#include "scheduler/model_factory.h"

#include <gtest/gtest.h>

#include "common/device.h"

namespace oasr::scheduler {
namespace {

TEST(ComputeFlagsTest, DTypesByName) {
  EXPECT_EQ(*ParseComputeDType("float32"), DType::kFloat32);
  EXPECT_EQ(*ParseComputeDType("bfloat16"), DType::kBFloat16);
  EXPECT_EQ(*ParseComputeDType("float16"), DType::kFloat16);
  for (const char* bad : {"", "fp16", "int8", "Float32"}) {
    absl::StatusOr<DType> t = ParseComputeDType(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(ComputeFlagsTest, DevicesResolve) {
  EXPECT_EQ(*ResolveDevice("cpu"), Device::Cpu());
  EXPECT_EQ(*ResolveDevice("auto"), CudaDeviceCount() > 0 ? Device::Cuda(0) : Device::Cpu());
  EXPECT_EQ(ResolveDevice("tpu").status().code(), absl::StatusCode::kInvalidArgument);
  // One past the machine's last GPU is never usable.
  const std::string past = "cuda:" + std::to_string(CudaDeviceCount());
  EXPECT_EQ(ResolveDevice(past).status().code(), absl::StatusCode::kUnavailable);
}

TEST(ComputeFlagsTest, SetComputeFlagsLeavesAnEmptyDTypeToTheDevice) {
  ModelOptions options;
  ASSERT_TRUE(SetComputeFlags("cpu", "", &options).ok());
  EXPECT_EQ(options.device, Device::Cpu());
  EXPECT_FALSE(options.dtype.has_value());
  ASSERT_TRUE(SetComputeFlags("cpu", "float16", &options).ok());
  EXPECT_EQ(options.dtype, DType::kFloat16);
  EXPECT_FALSE(SetComputeFlags("cpu", "half", &options).ok());
  EXPECT_FALSE(SetComputeFlags("cuda:99", "", &options).ok());
}

TEST(ComputeFlagsTest, ParseStemKernelNamesBothKernelsAndRefusesOthers) {
  EXPECT_EQ(ParseStemKernel("recompute").value(), kernels::StemKernel::kRecompute);
  EXPECT_EQ(ParseStemKernel("tensor-cores").value(), kernels::StemKernel::kTensorCores);
  EXPECT_EQ(ParseStemKernel("implicit-gemm").value(), kernels::StemKernel::kImplicitGemm);
  EXPECT_EQ(ParseStemKernel("tc").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ModelOptions{}.stem, kernels::StemKernel::kImplicitGemm);  // The measured default.
  ModelOptions options;
  ASSERT_TRUE(SetComputeFlags("cpu", "", &options, "recompute").ok());
  EXPECT_EQ(options.stem, kernels::StemKernel::kRecompute);
  ASSERT_TRUE(SetComputeFlags("cpu", "", &options, "tensor-cores").ok());
  EXPECT_EQ(options.stem, kernels::StemKernel::kTensorCores);
  EXPECT_FALSE(SetComputeFlags("cpu", "", &options, "tc").ok());
}

TEST(ComputeFlagsTest, GemmFlagNamesEveryKernelAndRefusesOthers) {
  ModelOptions options;
  EXPECT_EQ(options.gemm, kernels::GemmKernel::kAuto);
  for (const char* name : {"cublas", "norms", "fused", "wgmma", "epilogues", "auto"}) {
    ASSERT_TRUE(SetComputeFlags("cpu", "", &options, "tensor-cores", name).ok()) << name;
    EXPECT_STREQ(kernels::GemmKernelName(options.gemm), name);
  }
  EXPECT_EQ(SetComputeFlags("cpu", "", &options, "tensor-cores", "cutlass").code(),
            absl::StatusCode::kInvalidArgument);
  // With the staged epilogue the swish and norm epilogues both pay on an
  // H100 (session 45): auto is kEpilogues.
  EXPECT_EQ(kernels::ResolveGemm(kernels::GemmKernel::kAuto), kernels::GemmKernel::kEpilogues);
}

TEST(ComputeFlagsTest, KvDTypeFlagSelectsTheFloat8Pool) {
  ModelOptions options;
  EXPECT_FALSE(options.kv_fp8);
  for (const char* name : {"float8_e4m3", "fp8"}) {
    ASSERT_TRUE(SetComputeFlags("cpu", "", &options, "tensor-cores", "auto", name).ok()) << name;
    EXPECT_TRUE(options.kv_fp8) << name;
  }
  ASSERT_TRUE(SetComputeFlags("cpu", "", &options, "tensor-cores", "auto", "auto").ok());
  EXPECT_FALSE(options.kv_fp8);
  EXPECT_EQ(SetComputeFlags("cpu", "", &options, "tensor-cores", "auto", "int8").code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace oasr::scheduler
