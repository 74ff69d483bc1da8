// GPU parity for the residual-add kernel against its CPU reference. Skips
// where the build has no CUDA or the machine no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/device.h"
#include "common/tensor.h"
#include "kernels/residual_add.h"

#if OASR_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace oasr::kernels {
namespace {

TEST(ResidualAddGpuTest, MatchesCpuReference) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA";
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
#if OASR_WITH_CUDA
  // Odd size past one grid of 65535 x 256 so the grid-stride loop is exercised.
  const int64_t n = 65535LL * 256 + 12345;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  std::vector<float> x(n), y(n);
  for (auto& v : x) v = dist(rng);
  for (auto& v : y) v = dist(rng);

  Tensor dx = *Tensor::Empty({n}, DType::kFloat32, Device::Cuda(0));
  Tensor dy = *Tensor::Empty({n}, DType::kFloat32, Device::Cuda(0));
  Tensor hx = *Tensor::Empty({n}, DType::kFloat32);
  Tensor hy = *Tensor::Empty({n}, DType::kFloat32);
  std::copy(x.begin(), x.end(), hx.data<float>());
  std::copy(y.begin(), y.end(), hy.data<float>());
  ASSERT_TRUE(CopyTensor(dx.view(), hx.view()).ok());
  ASSERT_TRUE(CopyTensor(dy.view(), hy.view()).ok());

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  LaunchResidualAdd({dy.data<float>(), dx.data<float>(), 0.5f, n}, stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);

  ResidualAddCpu({y.data(), x.data(), 0.5f, n});
  ASSERT_TRUE(CopyTensor(hy.view(), dy.view()).ok());
  double max_err = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_err = std::max(max_err, static_cast<double>(std::fabs(hy.data<float>()[i] - y[i])));
  }
  EXPECT_LE(max_err, 1e-6);
#endif
}

}  // namespace
}  // namespace oasr::kernels
