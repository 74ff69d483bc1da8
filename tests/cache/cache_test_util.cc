#include "tests/cache/cache_test_util.h"

#if OASR_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace oasr::cache::testing {

void CacheDeviceTest::SetUp() {
  if (!GetParam().is_cuda()) return;
  if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA";
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
#if OASR_WITH_CUDA
  ASSERT_EQ(cudaSetDevice(GetParam().index), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  stream_ = s;
#endif
}

void CacheDeviceTest::TearDown() {
#if OASR_WITH_CUDA
  if (stream_ != nullptr) {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }
#endif
}

void CacheDeviceTest::Sync() const {
#if OASR_WITH_CUDA
  if (stream_ != nullptr) {
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  }
#endif
}

void CacheDeviceTest::ReadBytes(const TensorView& view, void* host) const {
  Sync();
  const TensorView dst(host, view.dtype(), view.shape(), Device::Cpu());
  const absl::Status s = CopyTensor(dst, view);
  ASSERT_TRUE(s.ok()) << s;
}

void CacheDeviceTest::WriteBytes(const TensorView& view, const void* host) const {
  Sync();
  const TensorView src(const_cast<void*>(host), view.dtype(), view.shape(), Device::Cpu());
  const absl::Status s = CopyTensor(view, src);
  ASSERT_TRUE(s.ok()) << s;
}

CacheConfig CacheDeviceTest::SmallConfig() const {
  CacheConfig c;
  c.num_layers = 2;
  c.n_kv_head = 2;
  c.head_dim = 3;
  c.hidden_dim = 5;
  c.kernel_size = 4;
  c.chunk_size = 4;
  c.block_size_frames = 4;
  c.num_left_chunks = -1;
  c.max_num_blocks = 64;
  c.max_blocks_per_seq = 16;
  c.max_batch_size = 8;
  c.dtype = DType::kFloat32;
  c.device = GetParam();
  return c;
}

}  // namespace oasr::cache::testing
