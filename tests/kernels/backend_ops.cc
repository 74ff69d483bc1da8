#include "tests/kernels/backend_ops.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/half.h"
#include "common/status.h"
#include "common/tensor.h"
#include "kernels/activation.h"
#include "kernels/causal_conv.h"
#include "kernels/conv2d.h"
#include "kernels/linear.h"
#include "kernels/norm.h"
#include "kernels/rel_pos_attention.h"
#include "kernels/residual_add.h"
#include "kernels/softmax.h"
#include "tests/kernels/backend_ops_internal.h"

#if OASR_WITH_CUDA
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#endif

namespace oasr::kernels::testing {

std::vector<Backend> AvailableBackends(bool include_cpu) {
  static std::vector<std::unique_ptr<ExecutionContext>> contexts;
  std::vector<Backend> out;
  if (include_cpu) {
    contexts.push_back(*ExecutionContext::Create({}));
    out.push_back({"cpu", contexts.back().get(), DType::kFloat32});
  }
  if (CudaDeviceCount() > 0) {
    ExecutionContextOptions o;
    o.device = Device::Cuda(0);
    absl::StatusOr<std::unique_ptr<ExecutionContext>> ctx = ExecutionContext::Create(o);
    if (ctx.ok()) {
      contexts.push_back(std::move(*ctx));
      for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
        out.push_back({absl::StrCat("cuda:", DTypeName(t)), contexts.back().get(), t});
      }
    }
  }
  return out;
}

absl::Status Check(const OpCase& c, const Backend& b, uint64_t seed) {
  if (c.cuda_only && !b.ctx->is_cuda()) return absl::OkStatus();
  if (c.supported && !c.supported(b)) return absl::OkStatus();
  Values in = c.inputs(seed);
  for (const std::string& name : c.low) {
    for (float& v : in.at(name)) v = RoundTo(b.dtype, v);
  }
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<OpInstance> inst, c.make(b, in));
  OASR_RETURN_IF_ERROR(inst->Poison());
  OASR_RETURN_IF_ERROR(inst->Run());
  OASR_ASSIGN_OR_RETURN(Values got, inst->Read());
  const Reference want = c.reference(in);
  for (const auto& [name, ref] : want) {
    auto it = got.find(name);
    if (it == got.end()) return absl::InternalError(absl::StrCat("no output ", name));
    const std::vector<float>& g = it->second;
    if (g.size() != ref.size()) {
      return absl::InternalError(absl::StrCat(name, ": ", g.size(), " values, want ", ref.size()));
    }
    double largest = 0, plain_err = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      largest = std::max(largest, std::abs(ref[i]));
      plain_err =
          std::max(plain_err, std::abs(RoundTo(b.dtype, static_cast<float>(ref[i])) - ref[i]));
    }
    // float32: the op's relative tolerance; 16-bit: twice the plain reference's
    // error, plus what float32 arithmetic alone may add and the op's own 16-bit
    // allowance.
    const bool low = b.dtype != DType::kFloat32;
    const double bound =
        (low ? 2.0 * plain_err : 0.0) +
        (c.fp32_tolerance + (low ? c.low_tolerance : 0.0)) * std::max(largest, 1e-30);
    for (size_t i = 0; i < ref.size(); ++i) {
      const double err = std::abs(static_cast<double>(g[i]) - ref[i]);
      if (!(err <= bound)) {  // NaN (an unwritten element) fails too.
        return absl::InternalError(absl::StrCat(c.op, " [", c.name, "] on ", b.name, ": ", name,
                                                "[", i, "] = ", g[i], ", want ", ref[i], " (error ",
                                                err, " > bound ", bound, ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> Time(const OpCase& c, const Backend& b, int reps) {
  if (c.cuda_only && !b.ctx->is_cuda()) return absl::UnimplementedError("CUDA only");
  if (c.supported && !c.supported(b)) return absl::UnimplementedError("not on this backend");
  Values in = c.inputs(1);
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<OpInstance> inst, c.make(b, in));
  for (int i = 0; i < 3; ++i) OASR_RETURN_IF_ERROR(inst->Run(false));
  OASR_RETURN_IF_ERROR(b.ctx->Synchronize());
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
#if OASR_WITH_CUDA
    if (b.ctx->is_cuda()) {
      cudaEvent_t start, stop;
      OASR_CUDA_CHECK(cudaEventCreate(&start));
      OASR_CUDA_CHECK(cudaEventCreate(&stop));
      OASR_CUDA_CHECK(cudaEventRecord(start, b.ctx->stream()));
      OASR_RETURN_IF_ERROR(inst->Run(false));
      OASR_CUDA_CHECK(cudaEventRecord(stop, b.ctx->stream()));
      OASR_CUDA_CHECK(cudaEventSynchronize(stop));
      float elapsed = 0;
      OASR_CUDA_CHECK(cudaEventElapsedTime(&elapsed, start, stop));
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
      ms.push_back(elapsed);
      continue;
    }
#endif
    const auto start = std::chrono::steady_clock::now();
    OASR_RETURN_IF_ERROR(inst->Run(false));
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace oasr::kernels::testing
