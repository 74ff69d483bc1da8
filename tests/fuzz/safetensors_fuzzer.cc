// The weights file's reader (encoder/safetensors_reader.h): the 8-byte
// header length, the JSON header and the data offsets, then every float
// tensor read back. Input: a file's bytes.
#include <cstdlib>

#include "encoder/safetensors_reader.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = oasr::fuzz::WriteScratch(
      "model.safetensors", std::string_view(reinterpret_cast<const char*>(data), size));
  absl::StatusOr<std::unique_ptr<oasr::encoder::SafetensorsReader>> reader =
      oasr::encoder::SafetensorsReader::Open(path);
  if (!reader.ok()) return 0;
  for (const std::string& name : (*reader)->Names()) {
    const oasr::encoder::SafetensorsReader::Entry* entry = (*reader)->Find(name);
    // Every tensor lies inside the file.
    if (entry == nullptr || entry->end < entry->begin || entry->end > size) std::abort();
    absl::StatusOr<oasr::Tensor> tensor = (*reader)->ReadFloat32(name);
    if (tensor.ok() && tensor->numel() != entry->shape.numel()) std::abort();
  }
  return 0;
}
