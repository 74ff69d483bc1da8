// Element types the engine stores in tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace oasr {

// kFloat8E4M3: 8-bit floats (1 sign, 4 exponent bits of bias 7, 3 mantissa
// bits; no infinities, largest 448), the storage of an 8-bit K/V pool.
enum class DType : uint8_t {
  kFloat32,
  kFloat16,
  kBFloat16,
  kInt32,
  kInt64,
  kUInt8,
  kInt16,
  kFloat8E4M3
};

// Bytes per element.
constexpr size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16:
      return 2;
    case DType::kInt64:
      return 8;
    case DType::kUInt8:
    case DType::kFloat8E4M3:
      return 1;
  }
  return 0;
}

constexpr const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt16:
      return "int16";
    case DType::kFloat8E4M3:
      return "float8_e4m3";
  }
  return "unknown";
}

// The DType of a C++ element type, for typed accessors (16-bit floats are
// accessed as uint16_t storage and have no mapping here).
template <typename T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<float>() { return DType::kFloat32; }
template <>
constexpr DType DTypeOf<int32_t>() { return DType::kInt32; }
template <>
constexpr DType DTypeOf<int64_t>() { return DType::kInt64; }
template <>
constexpr DType DTypeOf<uint8_t>() { return DType::kUInt8; }
template <>
constexpr DType DTypeOf<int16_t>() { return DType::kInt16; }

}  // namespace oasr
