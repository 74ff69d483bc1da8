#include "encoder/npy_io.h"

#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status.h"

namespace oasr::encoder {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

// Value text after 'key': in the header dict, e.g. "'<f4'" or "(3, 4)".
std::string DictValue(const std::string& header, const std::string& key) {
  const std::string needle = "'" + key + "':";
  const size_t at = header.find(needle);
  if (at == std::string::npos) return "";
  size_t begin = at + needle.size();
  while (begin < header.size() && header[begin] == ' ') ++begin;
  size_t end = begin;
  if (begin < header.size() && header[begin] == '(') {
    end = header.find(')', begin);
    return end == std::string::npos ? "" : header.substr(begin, end - begin + 1);
  }
  while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  return header.substr(begin, end - begin);
}

}  // namespace

absl::StatusOr<Tensor> ReadNpyFloat32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  char prefix[10];
  if (!in.read(prefix, 10) || std::memcmp(prefix, kMagic, 6) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a .npy file"));
  }
  const int major = static_cast<uint8_t>(prefix[6]);
  uint32_t header_len = static_cast<uint8_t>(prefix[8]) | (static_cast<uint8_t>(prefix[9]) << 8);
  if (major >= 2) {
    char more[2];
    if (!in.read(more, 2)) return absl::InvalidArgumentError(absl::StrCat(path, ": truncated"));
    header_len |= (static_cast<uint32_t>(static_cast<uint8_t>(more[0])) << 16) |
                  (static_cast<uint32_t>(static_cast<uint8_t>(more[1])) << 24);
  }
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": truncated header"));
  }
  if (DictValue(header, "descr") != "'<f4'") {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": dtype ", DictValue(header, "descr"), ", expected '<f4'"));
  }
  if (DictValue(header, "fortran_order") != "False") {
    return absl::InvalidArgumentError(absl::StrCat(path, ": Fortran order is not supported"));
  }
  std::string dims = DictValue(header, "shape");
  if (dims.size() < 2) return absl::InvalidArgumentError(absl::StrCat(path, ": no shape"));
  dims = dims.substr(1, dims.size() - 2);
  Shape shape;
  for (absl::string_view part : absl::StrSplit(dims, ',', absl::SkipWhitespace())) {
    int64_t dim = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &dim) || dim < 0 ||
        shape.rank() == Shape::kMaxRank) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": bad shape (", dims, ")"));
    }
    shape.push_back(dim);
  }
  OASR_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(shape, DType::kFloat32));
  if (out.nbytes() > 0 &&
      !in.read(static_cast<char*>(out.data()), static_cast<std::streamsize>(out.nbytes()))) {
    return absl::DataLossError(absl::StrCat(path, ": fewer bytes than the shape needs"));
  }
  return out;
}

absl::Status WriteNpyFloat32(const std::string& path, const TensorView& view) {
  if (view.dtype() != DType::kFloat32 || !view.device().is_cpu()) {
    return absl::InvalidArgumentError("WriteNpyFloat32 needs a float32 CPU tensor");
  }
  std::string dims;
  for (int i = 0; i < view.rank(); ++i) absl::StrAppend(&dims, view.dim(i), ", ");
  if (view.rank() > 1) dims.resize(dims.size() - 1);  // "(3, 4)" but "(3,)".
  if (view.rank() > 1) dims.pop_back();
  std::string header =
      absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': (", dims, "), }");
  // Pad with spaces so that magic + length + header + newline is a multiple of 64.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  out.write(kMagic, 6);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(len_bytes, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  if (view.nbytes() > 0) {
    out.write(static_cast<const char*>(view.data()), static_cast<std::streamsize>(view.nbytes()));
  }
  if (!out) return absl::DataLossError(absl::StrCat("short write to ", path));
  return absl::OkStatus();
}

}  // namespace oasr::encoder
