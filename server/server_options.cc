#include "server/server_options.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/device.h"
#include "scheduler/engine_config.h"
#include "scheduler/model_factory.h"

namespace oasr::server {
namespace {

// A day: beyond it the timeout (or the stream duration) guards nothing, and
// the value is likely a typo of milliseconds.
constexpr double kMaxIdleTimeout = 86400.0;

}  // namespace

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
  // A GPU holds tens of thousands (each slot's cache is allocated at start:
  // a count the device cannot hold fails there, naming the memory).
  constexpr int kMaxSlots = scheduler::EngineConfig::kMaxSlots;
  if (max_active_streams < 1 || max_active_streams > kMaxSlots) {
    return absl::InvalidArgumentError(absl::StrCat("max_active_streams: ", max_active_streams,
                                                   " is outside [1, ", kMaxSlots,
                                                   "] (the engine's slots)"));
  }
  if (max_waiting_streams < 0 || max_waiting_streams > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_waiting_streams: ", max_waiting_streams, " is outside [0, 1000000]"));
  }
  if (!(max_buffered_audio_seconds > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_buffered_audio_seconds: ", max_buffered_audio_seconds, " must be > 0"));
  }
  if (!(lm_weight <= 10.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lm_weight: ", lm_weight, " is above 10 (negative: the model's)"));
  }
  if (!(min_word_confidence <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("min_word_confidence: ", min_word_confidence,
                                                   " is above 1 (negative: the model's)"));
  }
  if (num_threads < 1 || num_threads > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_threads: ", num_threads, " is outside [1, 256]"));
  }
  if (!(rescoring_memory_mib >= 0 && rescoring_memory_mib <= 1 << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rescoring_memory_mib: ", rescoring_memory_mib, " is outside [0, 2^24]"));
  }
  if (!(rescoring_max_segment_seconds > 0 && rescoring_max_segment_seconds <= 3600)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rescoring_max_segment_seconds: ", rescoring_max_segment_seconds, " is outside (0, 3600]"));
  }
  if (frontend_threads < 0 || frontend_threads > 256) {
    return absl::InvalidArgumentError(absl::StrCat("frontend_threads: ", frontend_threads,
                                                   " is outside [0, 256] (0 runs it inline)"));
  }
  if (grpc_threads < 0 || grpc_threads > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "grpc_threads: ", grpc_threads, " is outside [0, 64] (0 sizes it to the machine)"));
  }
  if (event_threads < 0 || event_threads > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "event_threads: ", event_threads, " is outside [0, 64] (0 sizes it to the machine)"));
  }
  if (max_pending_responses < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_pending_responses: ", max_pending_responses, " is below 1"));
  }
  if (!(stream_idle_timeout_seconds >= 0 && stream_idle_timeout_seconds <= kMaxIdleTimeout)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream_idle_timeout_seconds: ", stream_idle_timeout_seconds,
                     " is outside [0, ", kMaxIdleTimeout, "] (0 disables)"));
  }
  if (max_message_bytes < 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_message_bytes: ", max_message_bytes, " is below 1024"));
  }
  if (keepalive_time_seconds < 1 || keepalive_timeout_seconds < 1 || min_client_ping_seconds < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("keepalive_time_seconds, keepalive_timeout_seconds, min_client_ping_seconds: ",
                     keepalive_time_seconds, ", ", keepalive_timeout_seconds, ", ",
                     min_client_ping_seconds, " (each must be at least 1)"));
  }
  if (tls_cert.empty() != tls_key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("tls_cert, tls_key: '", tls_cert, "', '",
                                                   tls_key, "' (give both or neither)"));
  }
  if (!tls_client_ca.empty() && tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "tls_client_ca: mutual TLS needs the server's own tls_cert and tls_key");
  }
  if (max_streams_per_token < 0 || max_streams_per_peer < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_streams_per_token, max_streams_per_peer: ", max_streams_per_token, ", ",
                     max_streams_per_peer, " (each must be >= 0; 0: no limit)"));
  }
  if (max_streams_per_token > 0 && tokens_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("max_streams_per_token: ", max_streams_per_token,
                                                   " needs a tokens_file to count by"));
  }
  if (!(max_stream_duration_seconds >= 0 && max_stream_duration_seconds <= kMaxIdleTimeout)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_stream_duration_seconds: ", max_stream_duration_seconds,
                     " is outside [0, ", kMaxIdleTimeout, "] (0: no limit)"));
  }
  if (!(stream_open_rate >= 0 && stream_open_burst >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream_open_rate, stream_open_burst: ", stream_open_rate, ", ",
                     stream_open_burst, " (each must be >= 0; 0: no limit / the default)"));
  }
  if (device != "auto") {
    absl::StatusOr<Device> parsed = ParseDevice(device);
    if (!parsed.ok()) return parsed.status();
    if (parsed->is_cuda() && parsed->index >= CudaDeviceCount()) {
      return absl::InvalidArgumentError(absl::StrCat("device: ", device, " is not present (",
                                                     CudaDeviceCount(), " CUDA devices usable)"));
    }
  }
  if (!dtype.empty() && dtype != "float32" && dtype != "bfloat16" && dtype != "float16") {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype: '", dtype, "' is not one of float32, bfloat16, float16"));
  }
  if (!scheduler::ParseKvDType(kv_dtype).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_dtype: '", kv_dtype, "' is not one of auto, float8_e4m3 (fp8)"));
  }
  if (!model_dir.empty() && !std::filesystem::is_directory(model_dir)) {
    return absl::NotFoundError(absl::StrCat("model_dir: '", model_dir, "' is not a directory"));
  }
  return absl::OkStatus();
}

}  // namespace oasr::server
