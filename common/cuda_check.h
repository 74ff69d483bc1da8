// OASR_CUDA_CHECK for CUDA runtime calls and OASR_CUDA_LAUNCH_CHECK after
// kernel launches. A failing CUDA call inside the engine is a broken invariant
// (device lost, illegal address), so these abort with the CUDA error string.
// Only include this from code compiled with CUDA (OASR_WITH_CUDA).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "common/check.h"

#define OASR_CUDA_CHECK(expr)                                                   \
  do {                                                                          \
    const cudaError_t oasr_err_ = (expr);                                       \
    if (__builtin_expect(oasr_err_ != cudaSuccess, 0)) {                        \
      ::oasr::internal::CheckFailed(__FILE__, __LINE__, #expr,                  \
                                    ::std::string(cudaGetErrorName(oasr_err_)) + \
                                        ": " + cudaGetErrorString(oasr_err_));  \
    }                                                                           \
  } while (false)

#define OASR_CUDA_LAUNCH_CHECK() OASR_CUDA_CHECK(cudaGetLastError())
