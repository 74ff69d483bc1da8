// One Recognize call: a whole file decoded by an engine stream, answered on
// the server's event dispatcher once the engine's notify posts the last
// event there (no thread waits for it). Every API that has the call
// (oasr.asr.v1, Riva's, Google's) goes through StartRecognize with its
// request in oasr.asr.v1's shape.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <string_view>

#include "absl/status/statusor.h"
#include "oasr/asr/v1/asr.grpc.pb.h"
#include "server/service_context.h"

namespace oasr::server {

// A Recognize request in oasr.asr.v1's shape.
struct RecognizeInput {
  asr::v1::RecognitionConfig config;
  // Raw samples in config.encoding, or a WAV file; points into the API's
  // request, which gRPC keeps until the call is finished.
  std::string_view audio;
};

// Moves the native response into the API's; runs once, just before the call
// finishes with OK.
using RecognizeDelivery = std::function<void(asr::v1::RecognizeResponse& native)>;

// Starts recognizing `input` and returns the reactor gRPC waits on; the
// response is delivered and the call finished when the engine is done, or at
// once for a bad request: UNAVAILABLE while draining or without a model, then
// `input`'s own error (an API adapter's refusal), then the native checks.
// `context` must outlive the call.
grpc::ServerUnaryReactor* StartRecognize(grpc::CallbackServerContext* call_context,
                                         ServiceContext* context,
                                         absl::StatusOr<RecognizeInput> input,
                                         RecognizeDelivery deliver);

// The oasr.asr.v1 call.
grpc::ServerUnaryReactor* StartRecognize(grpc::CallbackServerContext* call_context,
                                         ServiceContext* context,
                                         const asr::v1::RecognizeRequest* request,
                                         asr::v1::RecognizeResponse* response);

}  // namespace oasr::server
