// Strided row copies and zero fills on the memory of one device, enqueued on
// a stream on CUDA and done in place on the CPU. They are the only way the
// cache managers move K/V and state bytes, so the CPU and CUDA storage share
// one code path: the device only chooses where the memory lives.
#pragma once

#include <cstddef>

#include "common/device.h"
#include "common/gpu_stream.h"

namespace oasr::cache {

// Copies `rows` rows of `width` bytes from `src` (rows `src_pitch` bytes
// apart) to `dst` (rows `dst_pitch` bytes apart). Both pointers address
// memory of `device`, or host memory when the build has CUDA and `device` is
// a CUDA device (unified addressing). On CUDA the copy is asynchronous on
// `stream` (cudaMemcpy2DAsync); on the CPU it is done before returning and
// `stream` is ignored. Overlapping ranges are not allowed. A CUDA error is a
// broken invariant and aborts.
void CopyRows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
              size_t rows, Device device, GpuStream stream);

// Sets `rows` rows of `width` bytes, `pitch` bytes apart, to zero; same
// device and stream rules as CopyRows.
void ZeroRows(void* dst, size_t pitch, size_t width, size_t rows, Device device, GpuStream stream);

}  // namespace oasr::cache
