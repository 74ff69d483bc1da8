// The oasr.asr.v1.Speech gRPC service (callback API).
#pragma once

#include <chrono>

#include "oasr/asr/v1/asr.grpc.pb.h"

namespace oasr::server {

// Fills the build and machine facts of a ServerInfo (everything but uptime).
void FillBuildInfo(const std::string& device, asr::v1::ServerInfo* info);

class SpeechService final : public asr::v1::Speech::CallbackService {
 public:
  // `device` is the inference device the server runs on ("cpu", "cuda:0").
  explicit SpeechService(std::string device);

  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const asr::v1::GetServerInfoRequest* request,
                                          asr::v1::ServerInfo* response) override;

 private:
  const std::string device_;
  const std::chrono::steady_clock::time_point started_;
};

}  // namespace oasr::server
