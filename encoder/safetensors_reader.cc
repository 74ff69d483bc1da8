#include "encoder/safetensors_reader.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace oasr::encoder {
namespace {

bool ParseDType(const std::string& name, DType* dtype) {
  static const std::pair<const char*, DType> kNames[] = {
      {"F32", DType::kFloat32}, {"F16", DType::kFloat16}, {"BF16", DType::kBFloat16},
      {"I32", DType::kInt32},   {"I64", DType::kInt64},   {"U8", DType::kUInt8}};
  for (const auto& [text, value] : kNames) {
    if (name == text) {
      *dtype = value;
      return true;
    }
  }
  return false;
}

// The bytes of a file, or of the parts it was split into, read in order.
class SplitFile {
 public:
  // `path` itself when it exists; else path.part00, path.part01, ... up to
  // the first number missing (tools/train/checkpoint.py split_file writes
  // them so that no file in the repository exceeds 16 MiB). NOT_FOUND when
  // neither is there.
  static absl::StatusOr<SplitFile> Open(const std::string& path) {
    SplitFile file;
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
      file.files_.push_back(path);
    } else {
      for (int i = 0;; ++i) {
        std::string part = absl::StrCat(path, ".part", i < 10 ? "0" : "", i);
        if (!std::filesystem::is_regular_file(part, ec)) break;
        file.files_.push_back(std::move(part));
      }
    }
    if (file.files_.empty()) {
      return absl::NotFoundError(absl::StrCat("cannot open ", path, " (nor ", path, ".part00)"));
    }
    for (const std::string& f : file.files_) {
      const uint64_t size = std::filesystem::file_size(f, ec);
      if (ec) return absl::NotFoundError(absl::StrCat("cannot stat ", f, ": ", ec.message()));
      file.size_ += size;
    }
    return file;
  }

  uint64_t size() const { return size_; }
  int num_parts() const { return static_cast<int>(files_.size()); }

  // Reads the next `n` bytes into `dst`; false on a short read.
  bool Read(void* dst, uint64_t n) {
    char* out = static_cast<char*>(dst);
    while (n > 0) {
      if (!in_.is_open() || in_.peek() == std::char_traits<char>::eof()) {
        if (next_ == files_.size()) return false;
        in_.close();
        in_.clear();
        in_.open(files_[next_++], std::ios::binary);
        if (!in_) return false;
        continue;
      }
      in_.read(out, static_cast<std::streamsize>(n));
      const uint64_t got = static_cast<uint64_t>(in_.gcount());
      out += got;
      n -= got;
      if (n > 0) in_.clear();  // The part ended; the next one continues.
    }
    return true;
  }

 private:
  std::vector<std::string> files_;
  uint64_t size_ = 0;
  size_t next_ = 0;
  std::ifstream in_;
};

}  // namespace

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t out;
  if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13);  // Inf or NaN.
  } else if (exponent != 0) {
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    out = sign;
  } else {
    // Subnormal half: renormalise into a float.
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    out = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &out, sizeof(f));
  return f;
}

float BFloat16ToFloat(uint16_t bits) {
  const uint32_t out = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &out, sizeof(f));
  return f;
}

absl::StatusOr<std::unique_ptr<SafetensorsReader>> SafetensorsReader::Open(
    const std::string& path) {
  OASR_ASSIGN_OR_RETURN(SplitFile in, SplitFile::Open(path));
  const uint64_t file_size = in.size();
  uint8_t len_bytes[8];
  if (file_size < 8 || !in.Read(len_bytes, 8)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": too short for a safetensors file"));
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > file_size - 8) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header length ", header_len,
                                                   " exceeds the file size ", file_size));
  }
  std::string header(header_len, '\0');
  if (!in.Read(header.data(), header_len)) {
    return absl::DataLossError(absl::StrCat(path, ": short read"));
  }
  auto reader = std::unique_ptr<SafetensorsReader>(new SafetensorsReader());
  reader->path_ = path;
  reader->data_.resize(file_size - 8 - header_len);
  if (!in.Read(reader->data_.data(), reader->data_.size())) {
    return absl::DataLossError(absl::StrCat(path, ": short read"));
  }

  nlohmann::json json = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header is not a JSON object"));
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, info] : json.items()) {
    if (name == "__metadata__") continue;
    const std::string where = absl::StrCat(path, ": tensor '", name, "'");
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets") || !info["dtype"].is_string() ||
        !info["shape"].is_array() || !info["data_offsets"].is_array() ||
        info["data_offsets"].size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": malformed header entry"));
    }
    Entry entry;
    if (!ParseDType(info["dtype"].get<std::string>(), &entry.dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unsupported dtype ", info["dtype"].get<std::string>()));
    }
    if (info["shape"].size() > static_cast<size_t>(Shape::kMaxRank)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": rank above ", Shape::kMaxRank));
    }
    // The element count in the order Shape::numel() multiplies, so that no
    // shape it would overflow on (a signed overflow) gets in.
    int64_t numel = 1;
    for (const auto& dim : info["shape"]) {
      if (!dim.is_number_unsigned()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": bad shape"));
      }
      const uint64_t size = dim.get<uint64_t>();
      if (size > static_cast<uint64_t>(INT64_MAX) ||
          __builtin_mul_overflow(numel, static_cast<int64_t>(size), &numel)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": shape ", info["shape"].dump(), " has too many elements"));
      }
      entry.shape.push_back(static_cast<int64_t>(size));
    }
    for (const auto& off : info["data_offsets"]) {
      if (!off.is_number_unsigned()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": bad data_offsets"));
      }
    }
    entry.begin = info["data_offsets"][0].get<uint64_t>();
    entry.end = info["data_offsets"][1].get<uint64_t>();
    uint64_t expected = 0;
    const bool too_large =
        __builtin_mul_overflow(static_cast<uint64_t>(numel), DTypeSize(entry.dtype), &expected);
    if (too_large || entry.end < entry.begin || entry.end > reader->data_.size() ||
        entry.end - entry.begin != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": data_offsets [", entry.begin, ", ", entry.end,
                       ") do not hold ", expected, " bytes inside the ", reader->data_.size(),
                       "-byte data section"));
    }
    if (entry.end > entry.begin) ranges.emplace_back(entry.begin, entry.end);
    reader->entries_.emplace(name, entry);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensors overlap in the data"));
    }
  }
  return reader;
}

std::vector<std::string> SafetensorsReader::Names() const {
  std::vector<std::string> names;
  names.reserve(entries_.size());
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

const SafetensorsReader::Entry* SafetensorsReader::Find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

absl::StatusOr<Tensor> SafetensorsReader::ReadFloat32(const std::string& name) const {
  const Entry* entry = Find(name);
  if (entry == nullptr) {
    return absl::NotFoundError(absl::StrCat(path_, ": missing tensor '", name, "'"));
  }
  OASR_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(entry->shape, DType::kFloat32));
  const uint8_t* src = data_.data() + entry->begin;
  float* dst = out.data<float>();
  const int64_t n = entry->shape.numel();
  switch (entry->dtype) {
    case DType::kFloat32:
      // An empty tensor in a file with no data section has a null source.
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      break;
    case DType::kFloat16:
    case DType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        dst[i] = entry->dtype == DType::kFloat16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
      }
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(path_, ": tensor '", name, "' has dtype ",
                                                     DTypeName(entry->dtype),
                                                     ", expected float32, float16 or bfloat16"));
  }
  return out;
}

}  // namespace oasr::encoder
