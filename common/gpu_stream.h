// The CUDA stream handle type, usable in headers of builds without CUDA.
// cudaStream_t is `CUstream_st*`; declaring the struct lets launcher
// signatures name it without including CUDA headers.
#pragma once

struct CUstream_st;

namespace oasr {

using GpuStream = CUstream_st*;

}  // namespace oasr
