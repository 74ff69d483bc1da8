// Helpers shared by the encoder tests: the golden fixtures the PyTorch
// reference writes at test time (tools/reference/make_fixtures.py), and a
// small safetensors writer for building broken model files.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/execution_context.h"
#include "common/tensor.h"
#include "encoder/conformer_encoder.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace oasr::encoder::testing {

#ifndef OASR_TEST_CUDA
#define OASR_TEST_CUDA 0
#endif

// The device this test binary computes on: CUDA in the *_gpu_test builds
// (OASR_TEST_CUDA=1), the CPU otherwise.
inline Device TestDevice() { return OASR_TEST_CUDA ? Device::Cuda(0) : Device::Cpu(); }
// Whether TestDevice() can run here (GPU builds skip without a GPU).
inline bool TestDeviceUsable() { return TestDevice().is_cpu() || CudaDeviceCount() > 0; }
#define OASR_SKIP_WITHOUT_TEST_DEVICE()                                                  \
  do {                                                                                   \
    if (!::oasr::encoder::testing::TestDeviceUsable()) GTEST_SKIP() << "no CUDA device"; \
  } while (false)

// An encoder with an execution context of its own.
struct CpuEncoder {
  std::unique_ptr<ExecutionContext> ctx;
  std::unique_ptr<ConformerEncoder> encoder;
  ConformerEncoder* operator->() const { return encoder.get(); }
  ConformerEncoder& operator*() const { return *encoder; }
};

// Reserves the workspace a cohort of `batch` rows of `chunk` frames needs.
inline void EnsureWorkspace(ConformerEncoder& encoder, int batch, int chunk) {
  Arena& arena = encoder.context().workspace();
  const size_t need = encoder.WorkspaceBytes(batch, chunk);
  if (arena.capacity() < need) {
    ASSERT_TRUE(encoder.context().ReserveWorkspace(need, 0).ok());
  }
}

// An encoder on TestDevice() computing in `dtype`.
inline absl::StatusOr<CpuEncoder> MakeTestEncoder(
    const ConformerModel* model, int threads = 1, int64_t max_table_positions = 16384,
    DType dtype = DType::kFloat32, kernels::StemKernel stem = EncoderOptions{}.stem,
    bool fused_feed_forward = EncoderOptions{}.fused_feed_forward,
    kernels::GemmKernel gemm = EncoderOptions{}.gemm) {
  ExecutionContextOptions o;
  o.cpu_threads = threads;
  o.device = TestDevice();
  absl::StatusOr<std::unique_ptr<ExecutionContext>> ctx = ExecutionContext::Create(o);
  if (!ctx.ok()) return ctx.status();
  EncoderOptions options;
  options.max_table_positions = max_table_positions;
  options.dtype = dtype;
  options.stem = stem;
  options.fused_feed_forward = fused_feed_forward;
  options.gemm = gemm;
  absl::StatusOr<std::unique_ptr<ConformerEncoder>> enc =
      ConformerEncoder::Create(model, ctx->get(), options);
  if (!enc.ok()) return enc.status();
  return CpuEncoder{std::move(*ctx), std::move(*enc)};
}

// An encoder on the CPU, whatever the test device.
inline absl::StatusOr<CpuEncoder> MakeCpuEncoder(const ConformerModel* model, int threads = 1,
                                                 int64_t max_table_positions = 16384) {
  ExecutionContextOptions o;
  o.cpu_threads = threads;
  absl::StatusOr<std::unique_ptr<ExecutionContext>> ctx = ExecutionContext::Create(o);
  if (!ctx.ok()) return ctx.status();
  EncoderOptions options;
  options.max_table_positions = max_table_positions;
  absl::StatusOr<std::unique_ptr<ConformerEncoder>> enc =
      ConformerEncoder::Create(model, ctx->get(), options);
  if (!enc.ok()) return enc.status();
  return CpuEncoder{std::move(*ctx), std::move(*enc)};
}

#ifdef OASR_ENCODER_FIXTURES
// The fixture folder made by the ctest fixture `encoder_golden`.
inline std::string FixtureDir() { return OASR_ENCODER_FIXTURES; }

inline nlohmann::json LoadManifest() {
  std::ifstream in(FixtureDir() + "/manifest.json");
  EXPECT_TRUE(in.good()) << "missing " << FixtureDir()
                         << "/manifest.json: run the encoder_golden_fixtures test first";
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str(), nullptr, false);
}
#endif

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A tensor to write: dtype name as in safetensors ("F32", "F16", "I64"...).
struct RawTensor {
  std::string dtype = "F32";
  std::vector<int64_t> shape;
  std::string bytes;
};

inline RawTensor FloatTensor(std::vector<int64_t> shape, const std::vector<float>& values) {
  RawTensor t{"F32", std::move(shape), std::string(values.size() * 4, '\0')};
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

inline void WriteSafetensors(const std::string& path,
                             const std::map<std::string, RawTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", t.dtype},
                    {"shape", t.shape},
                    {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  WriteFile(path, out + text + data);
}

// Copies a model directory to a fresh temporary one named after the test and
// the process (tests run side by side).
inline std::string CopyModelDir(const std::string& src, const std::string& name) {
  const std::filesystem::path dst = std::filesystem::temp_directory_path() /
                                    ("oasr_encoder_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dst);
  std::filesystem::copy(src, dst, std::filesystem::copy_options::recursive);
  return dst.string();
}

inline float MaxAbsDiff(const float* a, const float* b, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace oasr::encoder::testing
