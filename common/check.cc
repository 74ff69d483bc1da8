#include "common/check.h"

#include <cstdio>
#include <cstdlib>

#include "spdlog/spdlog.h"

namespace oasr::internal {

void CheckFailed(const char* file, int line, const char* expr, const std::string& message) {
  // Flush what the logger holds first so the failure is the last line, then
  // write straight to stderr: the logger may be off or pointed elsewhere.
  spdlog::default_logger_raw()->flush();
  if (message.empty()) {
    std::fprintf(stderr, "%s:%d: Check failed: %s\n", file, line, expr);
  } else {
    std::fprintf(stderr, "%s:%d: Check failed: %s (%s)\n", file, line, expr, message.c_str());
  }
  std::fflush(stderr);
  std::abort();
}

}  // namespace oasr::internal
