// 16 kHz samples in int16 range (the scale the front ends use) to 16-bit
// samples and back. The PCM rings the device front end reads hold 16 bits a
// sample (half the bus traffic of float32): exact for audio that arrives at
// 16 kHz as 16-bit PCM, resampled audio rounded to the same grid.
#pragma once

#include <algorithm>
#include <cstdint>

namespace oasr {

// Rounded to the nearest, halves away from zero, saturated (NaN is not
// expected). Clamped first, so the conversion never sees a value out of
// range; rounded by truncation (no libm call: the loop vectorises, and it
// runs on the client's thread for every 16 kHz message).
inline void RoundToPcm16(const float* in, int64_t n, int16_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::min(std::max(in[i], -32768.0f), 32767.0f);
    out[i] = static_cast<int16_t>(static_cast<int32_t>(v + (v < 0.0f ? -0.5f : 0.5f)));
  }
}

inline void Pcm16ToFloat(const int16_t* in, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
}

}  // namespace oasr
