#include "common/logging.h"

#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace oasr {

absl::Status InitLogging(const std::string& level) {
  const spdlog::level::level_enum parsed = spdlog::level::from_str(level);
  // from_str maps anything unknown to "off"; only accept "off" when asked.
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "log level: '", level, "' is not one of trace, debug, info, warn, error, critical, off"));
  }
  auto logger = spdlog::stderr_logger_mt("oasr");
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return absl::OkStatus();
}

}  // namespace oasr
