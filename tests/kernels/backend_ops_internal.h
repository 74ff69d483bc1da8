// Internal to the backend harness: buffers on a backend, the generic op
// instance the cases build, and random inputs.
#pragma once

#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "common/status.h"
#include "common/tensor.h"
#include "tests/kernels/backend_ops.h"

namespace oasr::kernels::testing {

// --- Buffers on a backend -----------------------------------------------------

struct Buf {
  Tensor t;
  DType dtype = DType::kFloat32;
  int64_t n = 0;
  void* data() const { return t.data(); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(t.data());
  }
};

inline absl::StatusOr<Buf> Upload(ExecutionContext& ctx, const std::vector<float>& host,
                                  DType dtype) {
  Buf b;
  b.dtype = dtype;
  b.n = static_cast<int64_t>(host.size());
  const int64_t n = std::max<int64_t>(b.n, 1);
  OASR_ASSIGN_OR_RETURN(Tensor staged, Tensor::Zeros({n}, dtype));
  ConvertFromFloat(host.data(), b.n, dtype, staged.data());
  OASR_ASSIGN_OR_RETURN(b.t, Tensor::Empty({n}, dtype, ctx.device()));
  OASR_RETURN_IF_ERROR(CopyTensor(b.t.view(), staged.view()));
  return b;
}

inline absl::StatusOr<Buf> UploadInts(ExecutionContext& ctx, const std::vector<int32_t>& host) {
  Buf b;
  b.dtype = DType::kInt32;
  b.n = static_cast<int64_t>(host.size());
  OASR_ASSIGN_OR_RETURN(b.t,
                        Tensor::Empty({std::max<int64_t>(b.n, 1)}, DType::kInt32, ctx.device()));
  if (b.n > 0) {
    OASR_RETURN_IF_ERROR(CopyTensor(
        b.t.view().Slice(0, b.n),
        TensorView(const_cast<int32_t*>(host.data()), DType::kInt32, {b.n}, Device::Cpu())));
  }
  return b;
}

inline absl::StatusOr<std::vector<float>> Download(const Buf& b) {
  OASR_ASSIGN_OR_RETURN(Tensor staged, Tensor::Empty({std::max<int64_t>(b.n, 1)}, b.dtype));
  OASR_RETURN_IF_ERROR(CopyTensor(staged.view(), b.t.view()));
  std::vector<float> out(static_cast<size_t>(b.n));
  if (b.dtype == DType::kInt32) {
    for (int64_t i = 0; i < b.n; ++i) out[i] = static_cast<float>(staged.data<int32_t>()[i]);
  } else {
    ConvertToFloat(staged.data(), b.n, b.dtype, out.data());
  }
  return out;
}

// An op on a backend: its buffers, the outputs to read, and the launch.
class Instance final : public OpInstance {
 public:
  explicit Instance(const Backend& b) : backend_(b) {}
  std::map<std::string, Buf> bufs;
  std::vector<std::string> outputs;
  std::function<absl::Status(bool restore)> run;

  absl::Status Poison() override {
    for (const std::string& name : outputs) {
      Buf& b = bufs.at(name);
      if (b.dtype == DType::kInt32) {
        std::vector<int32_t> junk(static_cast<size_t>(b.n), -12345);
        OASR_ASSIGN_OR_RETURN(Buf fresh, UploadInts(*backend_.ctx, junk));
        OASR_RETURN_IF_ERROR(CopyTensor(b.t.view(), fresh.t.view()));
      } else {
        std::vector<float> nan(static_cast<size_t>(b.n), std::numeric_limits<float>::quiet_NaN());
        OASR_ASSIGN_OR_RETURN(Buf fresh, Upload(*backend_.ctx, nan, b.dtype));
        OASR_RETURN_IF_ERROR(CopyTensor(b.t.view(), fresh.t.view()));
      }
    }
    return absl::OkStatus();
  }
  absl::Status Run(bool restore_inputs) override { return run(restore_inputs); }
  absl::StatusOr<Values> Read() override {
    OASR_RETURN_IF_ERROR(backend_.ctx->Synchronize());
    Values out;
    for (const std::string& name : outputs) {
      OASR_ASSIGN_OR_RETURN(out[name], Download(bufs.at(name)));
    }
    return out;
  }
  // Adds input `name` in `dtype` (float32 unless it is stored low).
  absl::Status Add(const std::string& name, const std::vector<float>& v, DType dtype) {
    OASR_ASSIGN_OR_RETURN(bufs[name], Upload(*backend_.ctx, v, dtype));
    return absl::OkStatus();
  }
  absl::Status AddInts(const std::string& name, const std::vector<int32_t>& v) {
    OASR_ASSIGN_OR_RETURN(bufs[name], UploadInts(*backend_.ctx, v));
    return absl::OkStatus();
  }
  absl::Status AddOutput(const std::string& name, int64_t n, DType dtype) {
    OASR_RETURN_IF_ERROR(Add(name, std::vector<float>(static_cast<size_t>(n), 0.0f), dtype));
    outputs.push_back(name);
    return absl::OkStatus();
  }
  float* f32(const std::string& name) { return bufs.at(name).as<float>(); }
  void* ptr(const std::string& name) { return bufs.at(name).data(); }
  const int32_t* ints(const std::string& name) { return bufs.at(name).as<int32_t>(); }

 private:
  Backend backend_;
};

inline std::vector<float> Random(std::mt19937_64& rng, int64_t n, float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

inline double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

inline std::vector<double> ToDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The paged attention cases (backend_op_attention.cc).
struct AttentionShape {
  std::vector<int32_t> history;  // t1 per row.
  std::vector<int32_t> frames;   // Chunk frames per row.
  std::vector<int32_t> offsets;  // Stream offsets per row (>= t1).
  int chunk = 16;
  int heads = 4;
  int block_size = 16;
  int64_t pos_rows = 4096;  // Positions in the table; later ones are projected.
  // The pool in float8 e4m3 (PagedAttentionParams::pool_fp8): the CPU, and
  // 16-bit on CUDA.
  bool fp8_pool = false;
};
OpCase PagedAttentionCase(const std::string& name, AttentionShape s);

}  // namespace oasr::kernels::testing
