// Reader of the safetensors format: an 8-byte little-endian header length,
// a JSON header mapping each tensor name to {dtype, shape, data_offsets},
// then the raw little-endian data. Written here so the engine needs no Rust
// or Python runtime to load weights.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"

namespace oasr::encoder {

class SafetensorsReader {
 public:
  struct Entry {
    DType dtype = DType::kFloat32;
    Shape shape;
    uint64_t begin = 0;  // Byte offsets into the data section.
    uint64_t end = 0;
  };

  // Reads and validates the whole file: header length within the file, JSON
  // well formed, every entry with a known dtype, a shape whose byte size
  // equals its offsets, and offsets inside the data section without overlap.
  // Errors name the file and the offending tensor. When `path` does not
  // exist, its parts path.part00, path.part01, ... (consecutive numbers) are
  // read as one file: the bundled model is split so that no file in the
  // repository exceeds 16 MiB. NOT_FOUND when neither exists.
  static absl::StatusOr<std::unique_ptr<SafetensorsReader>> Open(const std::string& path);

  const std::string& path() const { return path_; }
  // All tensor names, sorted.
  std::vector<std::string> Names() const;
  // The entry of `name`, or nullptr when absent. The pointer lives as long
  // as this reader.
  const Entry* Find(const std::string& name) const;

  // Copies tensor `name` into a new float32 CPU tensor, converting float16
  // and bfloat16 exactly. NOT_FOUND names a missing tensor; INVALID_ARGUMENT
  // a non-float dtype. Thread-safe (the reader is immutable once open).
  absl::StatusOr<Tensor> ReadFloat32(const std::string& name) const;

 private:
  SafetensorsReader() = default;

  std::string path_;
  std::vector<uint8_t> data_;  // The data section only.
  std::map<std::string, Entry> entries_;
};

// IEEE half and bfloat16 bit patterns to float (exact).
float HalfToFloat(uint16_t bits);
float BFloat16ToFloat(uint16_t bits);

}  // namespace oasr::encoder
