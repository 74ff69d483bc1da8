// What the fuzz targets share: the parsers that read files get the input
// written to a file of their own, and targets that split one input into
// fields take them from its front.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace oasr::fuzz {

// A directory for this process's files (under TMPDIR, else /dev/shm, else
// /tmp), created on first use and kept for the process's life: libFuzzer runs
// every input in one process, so the files are rewritten, not re-created.
// Memory, not a disk, where it can: a target that writes a file an input runs
// six times faster from /dev/shm than from a busy disk's /tmp.
inline const std::filesystem::path& ScratchDir() {
  // Removed when the process exits normally (libFuzzer's -max_total_time,
  // -runs); a crash leaves it for the post-mortem.
  struct Scratch {
    std::filesystem::path path;
    ~Scratch() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Scratch scratch{[] {
    const char* tmp = std::getenv("TMPDIR");
    std::error_code ec;
    const std::filesystem::path base = tmp != nullptr && *tmp                          ? tmp
                                       : std::filesystem::is_directory("/dev/shm", ec) ? "/dev/shm"
                                                                                       : "/tmp";
    std::filesystem::path d = base / ("oasr-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }()};
  return scratch.path;
}

// Writes `bytes` to ScratchDir()/name and returns its path; aborts when it
// cannot (a broken machine, not a finding).
inline std::string WriteScratch(const std::string& name, std::string_view bytes) {
  const std::string path = (ScratchDir() / name).string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
  std::fclose(f);
  return path;
}

// Reads fields off the front of a fuzz input; past its end every field is 0
// or empty.
class InputReader {
 public:
  InputReader(const uint8_t* data, size_t size)
      : rest_(reinterpret_cast<const char*>(data), size) {}

  uint8_t Byte() {
    if (rest_.empty()) return 0;
    const uint8_t b = static_cast<uint8_t>(rest_[0]);
    rest_.remove_prefix(1);
    return b;
  }
  uint32_t U32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(Byte()) << (8 * i);
    return v;
  }
  // The next `n` bytes (fewer at the end).
  std::string_view Bytes(size_t n) {
    const std::string_view out = rest_.substr(0, n);
    rest_.remove_prefix(out.size());
    return out;
  }
  // A field of at most 65535 bytes, its length first (two bytes, little-endian).
  std::string_view Field() {
    const size_t low = Byte();
    const size_t n = low | (static_cast<size_t>(Byte()) << 8);
    return Bytes(n);
  }
  std::string_view Rest() { return Bytes(rest_.size()); }
  bool empty() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

}  // namespace oasr::fuzz
