// One stage of the Conformer's conv2d subsampling: a k x k convolution with
// stride s and no padding over a [time, frequency, channel] image, bias and
// ReLU, on channel-last (NHWC) activations so that every patch of the next
// stage is contiguous. Computed as im2col + GEMM: on the CPU one image at a
// time into OpenBLAS; on CUDA a group of images per launch pair (the patch
// matrix in the arena, then cuBLASLt with bias and ReLU in its epilogue), or,
// for the fused stem on Hopper (StemKernel::kImplicitGemm), stage 1's
// activation in the arena and stage 2 as an implicit GEMM that gathers its
// patches from it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/execution_context.h"
#include "common/gpu_stream.h"
#include "kernels/linear.h"

namespace oasr::kernels {

struct Conv2dOptions {
  int in_channels = 1;
  int out_channels = 0;
  int kernel = 3;
  int stride = 2;
  // Weights, patches and output: float32 on the CPU; float32, bfloat16 or
  // float16 on CUDA.
  DType dtype = DType::kFloat32;
};

struct Conv2dArgs {
  // [n, h, w, in_channels] channel-last (in_channels 1: [n, h, w]).
  const void* in = nullptr;
  DType in_dtype = DType::kFloat32;  // float32, or the op's dtype.
  int64_t n = 0;
  int64_t h = 0;
  int64_t w = 0;
  // [n, OutSize(h), OutSize(w), out_channels] in the op's dtype.
  void* out = nullptr;
};

// im2col of a group of images: patches[(i, t, f), (a, b, c)] =
// in[i, t * s + a, f * s + b, c], columns past k * k * cin zero (padding
// to `ld`). Exposed for the backend harness.
struct Im2ColParams {
  const void* in = nullptr;
  DType in_dtype = DType::kFloat32;
  int64_t n = 0, h = 0, w = 0, c = 0;
  int kernel = 3, stride = 2;
  void* patches = nullptr;  // [n * h' * w', ld] in patch_dtype.
  DType patch_dtype = DType::kFloat32;
  int64_t ld = 0;  // >= kernel * kernel * c
};

// How a fused stem computes stage 1 inside stage 2's patch gather (CUDA).
enum class StemKernel {
  // For every patch element in float32 FMAs (about 2.25 times per stage-1
  // value); the measured default.
  kRecompute,
  // Once per block on the tensor cores (float16 operands split in two
  // halves each, float32 accumulation: float32-accurate), then copied out as
  // patches; for stage-1 channels 64, 128, 256 or 512 and 16-bit patches,
  // else kRecompute.
  kTensorCores,
  // Stage 1 as kTensorCores, but written once as the NHWC activation
  // [n, h1, w1, c1] (about half the patch matrix's bytes for the stem's
  // 3 x 3 stride-2 stage 2), and stage 2 as an implicit GEMM on the Hopper
  // kernel (LaunchWgmmaConv: its tiles of patches gathered from that
  // activation by the copy engine), so no patch matrix is written or read.
  // Where the wgmma kernel is not available (not sm_90, float32, c1 not a
  // multiple of 64), kTensorCores.
  kImplicitGemm,
};

// The first two stages' data movement in one pass (CUDA): stage 2's patches
// computed straight from the one-channel input, stage 1 (3 x 3 taps, bias,
// ReLU) computed inside the gather (StemKernel), so stage 1's activation
// never reaches memory.
struct FusedStemParams {
  const float* in = nullptr;  // [n, h, w] one channel, float32.
  int64_t n = 0, h = 0, w = 0;
  const float* w1 = nullptr;  // Stage 1: [c1, 3, 3] float32.
  const float* b1 = nullptr;  // [c1]
  int c1 = 0;
  int s1 = 2;
  int k2 = 3, s2 = 2;       // Stage 2's kernel and stride.
  void* patches = nullptr;  // [n * h2 * w2, ld] in patch_dtype.
  DType patch_dtype = DType::kBFloat16;
  int64_t ld = 0;  // >= k2 * k2 * c1
  StemKernel kernel = StemKernel::kRecompute;
};

class Conv2dOp {
 public:
  // `weight` [out_channels, kernel, kernel, in_channels] (input channel
  // fastest) and `bias` [out_channels], float32 host. INVALID_ARGUMENT for
  // bad geometry or a dtype the device does not compute in.
  static absl::StatusOr<Conv2dOp> Create(const float* weight, const float* bias,
                                         const Conv2dOptions& options, ExecutionContext& ctx);

  static int64_t OutSize(int64_t in, int kernel, int stride) {
    return in < kernel ? 0 : (in - kernel) / stride + 1;
  }
  int64_t OutSize(int64_t in) const { return OutSize(in, options_.kernel, options_.stride); }

  // Runs over args.n images, taking its scratch from ctx.workspace() and
  // giving it back (WorkspaceBytes of it). INVALID_ARGUMENT for images
  // smaller than the kernel, dtype mismatches or too little scratch.
  absl::Status Run(ExecutionContext& ctx, const Conv2dArgs& args) const;
  // Scratch Run needs for n images of h x w.
  size_t WorkspaceBytes(const ExecutionContext& ctx, int64_t n, int64_t h, int64_t w) const;

  const Conv2dOptions& options() const { return options_; }

  // CUDA only: makes this stage (which must take `first`'s channels) read
  // the one-channel input of `first` (a 3 x 3 stage) and recompute `first`
  // inside its patch gather (FusedStemParams); Run then takes the raw
  // [n, h, w] input with its dims, and `first` is not run. INVALID_ARGUMENT
  // when the shapes do not chain or the context is not CUDA.
  absl::Status FuseFirstStage(const float* weight, const float* bias, const Conv2dOptions& first,
                              ExecutionContext& ctx, StemKernel kernel = StemKernel::kRecompute);
  bool fused_first_stage() const { return fused_.has_value(); }
  // Whether Run takes StemKernel::kImplicitGemm's path: asked for, and the
  // device, dtype and channels allow it (else kTensorCores'); settled by
  // FuseFirstStage.
  bool implicit_gemm_stem() const { return fused_ && fused_->implicit; }

 private:
  struct FusedFirst {
    Tensor weight;  // [c1, 9] float32 on the device.
    Tensor bias;    // [c1]
    Conv2dOptions options;
    StemKernel kernel = StemKernel::kRecompute;
    bool implicit = false;  // kImplicitGemm, and the op can take it.
  };
  // The input dims of this stage for Run's dims (the first stage's output
  // when fused).
  int64_t StageIn(int64_t dim) const {
    return fused_ ? OutSize(dim, fused_->options.kernel, fused_->options.stride) : dim;
  }
  // Scratch elements an image needs for this stage's input dims (after
  // StageIn): its patches, or the implicit-GEMM stem's stage-1 activation.
  int64_t ScratchPerImage(int64_t h_in, int64_t w_in) const {
    return implicit_gemm_stem() ? h_in * w_in * options_.in_channels
                                : OutSize(h_in) * OutSize(w_in) * ld_;
  }
  // Images per scratch + GEMM pair on CUDA (Run's dims).
  int64_t GroupSize(int64_t n, int64_t h, int64_t w) const;
  int64_t patch() const {
    return int64_t{options_.kernel} * options_.kernel * options_.in_channels;
  }

  Conv2dOptions options_;
  int64_t ld_ = 0;             // Patch columns, padded to a multiple of 8.
  std::vector<float> weight_;  // CPU: [out, patch].
  std::vector<float> bias_;    // CPU: [out].
  LinearOp gemm_;              // CUDA: [out, ld] with bias and ReLU.
  std::optional<FusedFirst> fused_;
};

// The im2col on ctx's device (the CPU: float32).
absl::Status Im2Col(ExecutionContext& ctx, const Im2ColParams& p);
void Im2ColCpu(const Im2ColParams& p);
#if OASR_WITH_CUDA
void LaunchIm2Col(const Im2ColParams& p, GpuStream stream);
void LaunchFusedStem(const FusedStemParams& p, GpuStream stream);
// Stage 1 alone on the tensor cores (kTensorCores' arithmetic, so the same
// values), into p.patches as the activation [n, h1, w1, c1] in patch_dtype
// (p.ld and k2/s2 only shape the blocks' work); the shapes and dtypes of
// StemKernel::kTensorCores.
void LaunchStemStage1(const FusedStemParams& p, GpuStream stream);
#endif

}  // namespace oasr::kernels
