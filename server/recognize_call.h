// One Recognize call: a whole file decoded by an engine stream, answered on
// the server's event dispatcher once the engine's notify posts the last
// event there (no thread waits for it).
#pragma once

#include <grpcpp/grpcpp.h>

#include "oasr/asr/v1/asr.grpc.pb.h"
#include "server/service_context.h"

namespace oasr::server {

// Starts recognizing `request` and returns the reactor gRPC waits on; the
// response is written and the call finished when the engine is done (or at
// once for a bad request). `context` must outlive the call.
grpc::ServerUnaryReactor* StartRecognize(grpc::CallbackServerContext* call_context,
                                         ServiceContext* context,
                                         const asr::v1::RecognizeRequest* request,
                                         asr::v1::RecognizeResponse* response);

}  // namespace oasr::server
