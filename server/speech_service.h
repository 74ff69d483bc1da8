// The oasr.asr.v1.Speech gRPC service (callback API).
#pragma once

#include <chrono>

#include "oasr/asr/v1/asr.grpc.pb.h"
#include "server/service_context.h"

namespace oasr::server {

// Fills the build and machine facts of a ServerInfo (everything but uptime).
void FillBuildInfo(const std::string& device, asr::v1::ServerInfo* info);

// The service's methods on the callback API, except StreamingRecognize, on
// the async API (the Server's CallQueues run it: streaming_call.h).
using SpeechServiceBase = asr::v1::Speech::WithCallbackMethod_GetServerInfo<
    asr::v1::Speech::WithCallbackMethod_Recognize<asr::v1::Speech::WithCallbackMethod_ListModels<
        asr::v1::Speech::WithAsyncMethod_StreamingRecognize<asr::v1::Speech::Service>>>>;

// Thread-safe; every method returns at once (recognition runs on the
// engine's scheduler thread; the calls answer on the event dispatcher).
class SpeechService final : public SpeechServiceBase {
 public:
  // `device` is the inference device the server runs on ("cpu", "cuda:0").
  // `context` (not owned) must outlive every call.
  SpeechService(std::string device, ServiceContext* context);

  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const asr::v1::GetServerInfoRequest* request,
                                          asr::v1::ServerInfo* response) override;

  grpc::ServerUnaryReactor* Recognize(grpc::CallbackServerContext* context,
                                      const asr::v1::RecognizeRequest* request,
                                      asr::v1::RecognizeResponse* response) override;

  // The served model, or an empty list while none is served.
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const asr::v1::ListModelsRequest* request,
                                       asr::v1::ListModelsResponse* response) override;

 private:
  const std::string device_;
  ServiceContext* const context_;
  const std::chrono::steady_clock::time_point started_;
};

}  // namespace oasr::server
