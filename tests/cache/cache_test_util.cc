#include "tests/cache/cache_test_util.h"

#include <algorithm>

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

std::unique_ptr<DecoderState> GreedyCtcDecoder::CreateState() {
  ++created_;
  auto state = std::make_unique<GreedyCtcState>();
  state->tokens.reserve(256);
  return state;
}

void GreedyCtcDecoder::ResetState(DecoderState& state) {
  auto& s = static_cast<GreedyCtcState&>(state);
  const int resets = s.resets + 1;
  s.frames = 0;
  s.last_token = 0;
  s.tokens.clear();  // Keeps the capacity: no reallocation on reuse.
  s.finalized = false;
  s.resets = resets;
}

absl::Status GreedyCtcDecoder::DecodeChunk(DecoderState& state, const TensorView& log_probs) {
  auto& s = static_cast<GreedyCtcState&>(state);
  if (log_probs.dtype() != DType::kFloat32 || log_probs.rank() != 2 ||
      log_probs.dim(1) != vocab_size_ || !log_probs.device().is_cpu()) {
    return absl::InvalidArgumentError("GreedyCtcDecoder: log_probs must be float32 [T, V] on cpu");
  }
  if (s.finalized) return absl::FailedPreconditionError("GreedyCtcDecoder: stream finalized");
  const float* p = log_probs.data<float>();
  for (int64_t t = 0; t < log_probs.dim(0); ++t) {
    const float* row = p + t * vocab_size_;
    const int best = static_cast<int>(std::max_element(row, row + vocab_size_) - row);
    if (best != 0 && best != s.last_token) s.tokens.push_back(best);
    s.last_token = best;
    ++s.frames;
  }
  return absl::OkStatus();
}

absl::Status GreedyCtcDecoder::FinalizeStream(DecoderState& state) {
  static_cast<GreedyCtcState&>(state).finalized = true;
  return absl::OkStatus();
}

}  // namespace oasr::cache::testing
