// A Linear layer whose weight is packed once at load time for the small row
// counts of streaming (one chunk is 4-16 frames; a cohort a few times that).
// A BLAS sgemm repacks the whole weight on every call, which at such row
// counts costs as much as the arithmetic; here the weight is stored in
// 32-output panels ([panel][k][32], zero padded), streamed once per call, and
// each weight vector is reused across a tile of up to 12 rows held in
// registers. AVX-512 and AVX2 kernels are chosen at run time; other CPUs
// use a portable loop over the same layout.
#pragma once

#include <cstdint>

#include "common/tensor.h"
#include "kernels/cpu_math.h"

namespace oasr::kernels {

class PackedLinear {
 public:
  static constexpr int kPanel = 32;

  using Isa = cpu::Isa;

  PackedLinear() = default;
  // Packs `weight` [out, in] (row-major float32) and `bias` [out] (null for
  // none), both multiplied by `scale`. CHECK-fails only on allocation
  // failure at load time.
  PackedLinear(const float* weight, const float* bias, int64_t out, int64_t in, float scale = 1.0f);

  int64_t out_features() const { return out_; }
  int64_t in_features() const { return in_; }

  // y[m, out] = x[m, in] W^T + bias, or y += that with accumulate. x and y
  // are row-major with leading dimensions ldx >= in, ldy >= out and must not
  // overlap. Thread-safe (reads only the packed weight).
  void Forward(const float* x, int64_t m, int64_t ldx, float* y, int64_t ldy,
               bool accumulate = false) const;

  // Splits the output panels [0, panels) into `parts` ranges; Forward over
  // one range (ForwardPanels) touches only those output columns, so ranges
  // may run on different threads.
  int64_t num_panels() const { return (out_ + kPanel - 1) / kPanel; }
  void ForwardPanels(const float* x, int64_t m, int64_t ldx, float* y, int64_t ldy, bool accumulate,
                     int64_t panel_begin, int64_t panel_end,
                     Isa isa = Isa::kAuto) const;  // isa: must be cpu::IsaSupported.

 private:
  int64_t out_ = 0;
  int64_t in_ = 0;
  Tensor panels_;  // [num_panels, in, kPanel]
  Tensor bias_;    // [num_panels * kPanel], zero padded (zeros when absent).
};

}  // namespace oasr::kernels
