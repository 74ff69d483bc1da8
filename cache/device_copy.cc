#include "cache/device_copy.h"

#include <cstring>

#include "common/check.h"

#if OASR_WITH_CUDA
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#endif

namespace oasr::cache {

#if OASR_WITH_CUDA
namespace {
// The 2D copy and memset calls reject pitches past the device's maximum
// (cudaDevAttrMaxPitch, 2 GiB on current GPUs); a pool layer can be wider, so
// past a conservative 1 GiB the rows are copied one call each.
constexpr size_t kMaxCudaPitch = size_t{1} << 30;
}  // namespace
#endif

void CopyRows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
              size_t rows, Device device, GpuStream stream) {
  if (width == 0 || rows == 0) return;
  if (device.is_cpu()) {
    if (dst_pitch == width && src_pitch == width) {
      std::memcpy(dst, src, width * rows);
      return;
    }
    auto* d = static_cast<char*>(dst);
    const auto* s = static_cast<const char*>(src);
    for (size_t r = 0; r < rows; ++r) std::memcpy(d + r * dst_pitch, s + r * src_pitch, width);
    return;
  }
#if OASR_WITH_CUDA
  if (dst_pitch > kMaxCudaPitch || src_pitch > kMaxCudaPitch) {
    for (size_t r = 0; r < rows; ++r) {
      OASR_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + r * dst_pitch,
                                      static_cast<const char*>(src) + r * src_pitch, width,
                                      cudaMemcpyDefault, stream));
    }
    return;
  }
  OASR_CUDA_CHECK(
      cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDefault, stream));
#else
  (void)stream;
  OASR_CHECK(false, "CopyRows on " + device.ToString() + " in a build without CUDA");
#endif
}

void ZeroRows(void* dst, size_t pitch, size_t width, size_t rows, Device device, GpuStream stream) {
  if (width == 0 || rows == 0) return;
  if (device.is_cpu()) {
    if (pitch == width) {
      std::memset(dst, 0, width * rows);
      return;
    }
    auto* d = static_cast<char*>(dst);
    for (size_t r = 0; r < rows; ++r) std::memset(d + r * pitch, 0, width);
    return;
  }
#if OASR_WITH_CUDA
  if (pitch > kMaxCudaPitch) {
    for (size_t r = 0; r < rows; ++r) {
      OASR_CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(dst) + r * pitch, 0, width, stream));
    }
    return;
  }
  OASR_CUDA_CHECK(cudaMemset2DAsync(dst, pitch, 0, width, rows, stream));
#else
  (void)stream;
  OASR_CHECK(false, "ZeroRows on " + device.ToString() + " in a build without CUDA");
#endif
}

}  // namespace oasr::cache
