// What every call of the Speech service shares: the served model (set once
// it has loaded), the draining flag, the event dispatcher, the counters and
// the call limits.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>

#include "server/access_control.h"
#include "server/served_model.h"
#include "server/server_metrics.h"

namespace oasr::server {

class EventDispatcher;

struct ServiceContext {
  // The model, once loaded; null while loading or when none is configured.
  // Owned by the Server, which keeps it alive until every call has ended.
  std::atomic<ServedModel*> model{nullptr};
  // Set at SIGTERM: new recognition calls get UNAVAILABLE, and streams the
  // engine cancels end with UNAVAILABLE.
  std::atomic<bool> draining{false};
  // Where the calls handle their engine streams' events (the notify only
  // posts there). Owned by the Server, which keeps it running until the
  // engine has stopped and every call has ended; set before it serves.
  EventDispatcher* dispatcher = nullptr;
  ServerMetrics metrics;
  // Responses a stream may have waiting for a slow reader before the server
  // stops reading its audio (flow control: the engine then has nothing more
  // to decode for it, so nothing more queues up).
  int max_pending_responses = 16;
  // A stream that sends nothing for this long while the server waits for
  // its next message ends with OUT_OF_RANGE (ServerOptions'
  // stream_idle_timeout_seconds); zero disables the check.
  std::chrono::milliseconds stream_idle_timeout{30000};
  // Tokens and limits every recognition and info call passes (not owned;
  // set before the server starts); null admits every call.
  CallAdmission* admission = nullptr;
  // Seconds of audio a stream may send before it ends with finish_reason
  // "length" (ServerOptions' max_stream_duration_seconds); 0: no limit.
  double max_stream_duration_seconds = 0.0;
  // Test seam, empty in production: runs on the dispatcher with a streaming
  // call's lock held each time the call takes its engine stream's events,
  // before it drains them (tests/server/slow_call_test.cc makes one call's handling slow with
  // it). Set before the server starts; never changed while calls run.
  std::function<void(const grpc::ServerContextBase& call)> on_stream_events_for_test;
};

// A call that opens no engine stream: OK, or UNAUTHENTICATED without a
// valid token.
inline grpc::Status AuthenticateCall(ServiceContext* context, const grpc::ServerContextBase& call) {
  return context->admission == nullptr ? grpc::Status::OK : context->admission->Authenticate(call);
}

// A recognition call: OK with `*lease` holding its share of the limits, or
// the refusal.
inline grpc::Status AdmitStreamCall(ServiceContext* context, const grpc::ServerContextBase& call,
                                    CallAdmission::Lease* lease) {
  return context->admission == nullptr ? grpc::Status::OK
                                       : context->admission->AdmitStream(call, lease);
}

}  // namespace oasr::server
