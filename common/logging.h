// Process-wide logging setup (spdlog). Libraries log through spdlog's default
// logger; binaries call InitLogging once at start.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace oasr {

// Sets the default logger to a colourless stderr sink with the pattern
// "[time] [level] message" and the given level: trace, debug, info, warn,
// error, critical or off. An unknown level is an INVALID_ARGUMENT naming it.
absl::Status InitLogging(const std::string& level);

}  // namespace oasr
