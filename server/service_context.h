// What every call of the Speech service shares: the served model (set once
// it has loaded), the draining flag, the counters and the call limits.
#pragma once

#include <atomic>
#include <mutex>

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
  // Serialises Engine::OpenStream: it reads the new stream's id after
  // releasing its lock, so two concurrent opens could share an id.
  std::mutex open_mu;
};

}  // namespace oasr::server
