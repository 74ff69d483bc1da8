// What every call of the Speech service shares: the served model (set once
// it has loaded), the draining flag, the counters and the call limits.
#pragma once

#include <atomic>
#include <chrono>

#include "server/served_model.h"
#include "server/server_metrics.h"

namespace oasr::server {

struct ServiceContext {
  // The model, once loaded; null while loading or when none is configured.
  // Owned by the Server, which keeps it alive until every call has ended.
  std::atomic<ServedModel*> model{nullptr};
  // Set at SIGTERM: new recognition calls get UNAVAILABLE, and streams the
  // engine cancels end with UNAVAILABLE.
  std::atomic<bool> draining{false};
  ServerMetrics metrics;
  // Responses a stream may have waiting for a slow reader before the server
  // stops reading its audio (flow control: the engine then has nothing more
  // to decode for it, so nothing more queues up).
  int max_pending_responses = 16;
  // A stream that sends nothing for this long while the server waits for
  // its next message ends with OUT_OF_RANGE (ServerOptions'
  // stream_idle_timeout_seconds); zero disables the check.
  std::chrono::milliseconds stream_idle_timeout{30000};
};

}  // namespace oasr::server
