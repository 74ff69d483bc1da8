// The Kaldi log-mel filterbank of a batch of PCM windows (the GPU front end):
// for row r and frame t, the 400 samples starting at pcm[r, 160 t], DC
// removed, pre-emphasis 0.97, the window, a 512-point power spectrum (an
// FFT: on the GPU two frames a complex FFT), the mel weights, log floored at float epsilon,
// then (x - mean) * istd. Frames at or past frames[r] are written as zeros.
// The tables come from the front end that defines the features
// (encoder::Fbank), so this op and the CPU front end compute the same thing.
//
// Everything up to the power spectrum is in double, as the CPU front end
// computes it: a mel band with almost no energy (above 4 kHz in audio
// resampled from 8 kHz) is the small difference of large terms, and float
// rounding there alone moves its log by 1e-2.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/execution_context.h"
#include "common/gpu_stream.h"
#include "common/thread_pool.h"

namespace oasr::kernels {

inline constexpr int kLogMelFrameLength = 400;
inline constexpr int kLogMelFrameShift = 160;
inline constexpr int kLogMelFftBins = 257;                          // 512-point power spectrum.
inline constexpr int kLogMelWindowFloats = 2 * kLogMelFrameLength;  // LogMelParams::window

struct LogMelParams {
  const float* pcm = nullptr;       // [rows, pcm_stride] samples in int16 range.
  int64_t pcm_stride = 0;           // >= (max_frames - 1) * 160 + 400.
  const int32_t* frames = nullptr;  // [rows] frames to compute, in [0, max_frames].
  int rows = 0;
  int max_frames = 0;
  int bins = 80;                  // Mel bins, in [1, 128].
  const float* window = nullptr;  // [2, 400]: high parts, then low parts
  const float* mel = nullptr;     // [bins, 257] weights (dense)
  // [bins, 2]: each mel row's nonzero span [first, last) in `mel`
  // (MelSpans), or null: found from `mel` (on CUDA by every block, a scan
  // of the whole table).
  const int32_t* mel_spans = nullptr;
  const float* mean = nullptr;  // [bins] or null (no CMVN)
  const float* istd = nullptr;  // [bins] or null
  float* out = nullptr;         // [rows, max_frames, bins]
};

// On ctx's device (asynchronous on CUDA; every pointer there). INVALID_ARGUMENT
// for null pointers, a short stride or bins outside [1, 128].
absl::Status LogMel(ExecutionContext& ctx, const LogMelParams& p);

// The PCM windows of a cohort gathered from every stream's ring of samples
// (the GPU front end's input without a host staging copy): lane slots[r] of
// `ring` holds ring_rows rows of `width` samples, row i of a stream's audio
// at ring row i % ring_rows, and row r's window is the window_rows rows from
// ring row starts[r] on (wrapping), written to out[r, 0 : window_rows x
// width] as float32. Rows with feat_frames[r] == 0 (padding) are not
// written. The ring holds 16-bit samples (16 kHz PCM in int16 range, half
// the bytes of float32 over the bus); on CUDA it is page-locked host memory
// the kernel reads directly (mapped).
struct GatherPcmParams {
  const int16_t* ring = nullptr;  // [lanes, ring_rows, width]
  int64_t ring_rows = 0;
  int width = 0;                         // Samples a row; a multiple of 8.
  const int32_t* slots = nullptr;        // [rows] lanes
  const int32_t* starts = nullptr;       // [rows] in [0, ring_rows)
  const int32_t* feat_frames = nullptr;  // [rows]
  int rows = 0;
  int window_rows = 0;     // <= ring_rows
  float* out = nullptr;    // [rows, out_stride]
  int64_t out_stride = 0;  // >= window_rows x width
};

// On ctx's device (asynchronous on CUDA; out and the int arrays there, the
// ring readable by it). INVALID_ARGUMENT for null pointers or sizes that do
// not fit.
absl::Status GatherPcm(ExecutionContext& ctx, const GatherPcmParams& p);

// Each mel row's nonzero span [first, last) of `mel` ([bins, 257] dense
// triangles), as LogMelParams::mel_spans takes them: first at 2 m, last at
// 2 m + 1; a row of zeros is [257, 257).
std::vector<int32_t> MelSpans(const float* mel, int bins);

// The CPU implementation (a 512-point FFT in double; rows over `pool` when
// given).
void LogMelCpu(const LogMelParams& p, ThreadPool* pool = nullptr);
#if OASR_WITH_CUDA
void LaunchLogMel(const LogMelParams& p, GpuStream stream);
void LaunchGatherPcm(const GatherPcmParams& p, GpuStream stream);
#endif

}  // namespace oasr::kernels
