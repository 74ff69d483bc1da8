#include "server/server_options.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/device.h"

namespace oasr::server {

absl::Status ServerOptions::Validate() const {
  if (address.empty()) return absl::InvalidArgumentError("address: must not be empty");
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port: ", port, " is outside [0, 65535]"));
  }
  if (metrics_port < -1 || metrics_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics_port: ", metrics_port, " is outside [-1, 65535] (-1 disables)"));
  }
  if (metrics_port > 0 && metrics_port == port) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics_port: ", metrics_port, " is the gRPC port too"));
  }
  if (shutdown_grace_seconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shutdown_grace_seconds: ", shutdown_grace_seconds, " is negative (minimum 0)"));
  }
  if (device != "auto") {
    absl::StatusOr<Device> parsed = ParseDevice(device);
    if (!parsed.ok()) return parsed.status();
    if (parsed->is_cuda() && parsed->index >= CudaDeviceCount()) {
      return absl::InvalidArgumentError(absl::StrCat("device: ", device, " is not present (",
                                                     CudaDeviceCount(), " CUDA devices usable)"));
    }
  }
  if (!model_dir.empty() && !std::filesystem::is_directory(model_dir)) {
    return absl::NotFoundError(absl::StrCat("model_dir: '", model_dir, "' is not a directory"));
  }
  return absl::OkStatus();
}

}  // namespace oasr::server
