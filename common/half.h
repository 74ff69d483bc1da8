// Host conversions between float32 and the 16-bit float formats the GPU
// path stores (bfloat16, IEEE half) and float8 e4m3 (an 8-bit K/V pool),
// bit-exact with the CUDA intrinsics' round-to-nearest-even. Header-only and free of CUDA, so tests
// and loaders on machines without a GPU can prepare and check 16-bit data.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/dtype.h"

namespace oasr {

inline uint16_t FloatToBFloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float BFloat16ToFloat(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // Overflow to inf.
  if (abs < 0x38800000u) {
    // Subnormal (or zero): the value in units of 2^-24, rounded to nearest even.
    float a;
    std::memcpy(&a, &abs, 4);
    const float scaled = a * 16777216.0f;  // 2^24, exact.
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    const float v = static_cast<float>(man) * (1.0f / 16777216.0f);
    std::memcpy(&u, &v, 4);
    u |= sign;
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 112u) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// float32 -> float8 e4m3, round to nearest even, saturating to +-448
// (the CUDA intrinsics' __NV_SATFINITE); NaN stays NaN (0x7f).
inline uint8_t FloatToFloat8E4M3(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);   // NaN
  if (abs >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7eu);  // >= 448: saturate.
  if (abs < 0x3c800000u) {
    // Below 2^-6: subnormal, in units of 2^-9 (8 of them is the smallest
    // normal, whose encoding is 8 too), rounded to nearest even.
    float a;
    std::memcpy(&a, &abs, 4);
    return static_cast<uint8_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 512.0f)));
  }
  const uint32_t rounded = abs + 0x7ffffu + ((abs >> 20) & 1u);
  return static_cast<uint8_t>(sign | ((rounded >> 20) - (120u << 3)));
}

inline float Float8E4M3ToFloat(uint8_t b) {
  const uint32_t exp = (b >> 3) & 0xfu, man = b & 7u;
  float v;
  if (exp == 0) {
    v = static_cast<float>(man) * (1.0f / 512.0f);
  } else if (exp == 15 && man == 7) {
    v = std::nanf("");
  } else {
    v = std::ldexp(1.0f + static_cast<float>(man) * 0.125f, static_cast<int>(exp) - 7);
  }
  return (b & 0x80u) ? -v : v;
}

// Rounds `f` through `dtype` and back (identity for float32).
inline float RoundTo(DType dtype, float f) {
  switch (dtype) {
    case DType::kBFloat16:
      return BFloat16ToFloat(FloatToBFloat16(f));
    case DType::kFloat16:
      return HalfToFloat(FloatToHalf(f));
    case DType::kFloat8E4M3:
      return Float8E4M3ToFloat(FloatToFloat8E4M3(f));
    default:
      return f;
  }
}

// Writes n floats as `dtype` (float32, bfloat16, float16 or float8 e4m3)
// into dst.
inline void ConvertFromFloat(const float* src, int64_t n, DType dtype, void* dst) {
  if (dtype == DType::kFloat32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    return;
  }
  if (dtype == DType::kFloat8E4M3) {
    uint8_t* out = static_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < n; ++i) out[i] = FloatToFloat8E4M3(src[i]);
    return;
  }
  uint16_t* out = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    out[i] = dtype == DType::kBFloat16 ? FloatToBFloat16(src[i]) : FloatToHalf(src[i]);
  }
}

// Reads n values of `dtype` (float32, bfloat16, float16 or float8 e4m3) as
// floats.
inline void ConvertToFloat(const void* src, int64_t n, DType dtype, float* dst) {
  if (dtype == DType::kFloat32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    return;
  }
  if (dtype == DType::kFloat8E4M3) {
    const uint8_t* in = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = Float8E4M3ToFloat(in[i]);
    return;
  }
  const uint16_t* in = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = dtype == DType::kBFloat16 ? BFloat16ToFloat(in[i]) : HalfToFloat(in[i]);
  }
}

}  // namespace oasr
