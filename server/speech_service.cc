#include "server/speech_service.h"

#include "common/device.h"
#include "common/version.h"
#include "server/recognize_call.h"

namespace oasr::server {

void FillBuildInfo(const std::string& device, asr::v1::ServerInfo* info) {
  info->set_version(kVersion);
  info->set_git_revision(kGitRevision);
  info->set_build_type(kBuildType);
  info->set_compiler(kCompiler);
  info->set_cuda_enabled(BuiltWithCuda());
  info->set_cuda_version(kCudaVersion);
  const int gpus = CudaDeviceCount();
  for (int i = 0; i < gpus; ++i) {
    asr::v1::GpuInfo* gpu = info->add_gpus();
    gpu->set_index(i);
    absl::StatusOr<std::string> name = CudaDeviceName(i);
    gpu->set_description(name.ok() ? *name : std::string(name.status().message()));
  }
  info->set_device(device);
}

SpeechService::SpeechService(std::string device, ServiceContext* context)
    : device_(std::move(device)), context_(context), started_(std::chrono::steady_clock::now()) {}

grpc::ServerUnaryReactor* SpeechService::GetServerInfo(
    grpc::CallbackServerContext* context, const asr::v1::GetServerInfoRequest* /*request*/,
    asr::v1::ServerInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status status = AuthenticateCall(context_, *context); !status.ok()) {
    reactor->Finish(status);
    return reactor;
  }
  FillBuildInfo(device_, response);
  response->set_uptime_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* SpeechService::Recognize(grpc::CallbackServerContext* context,
                                                   const asr::v1::RecognizeRequest* request,
                                                   asr::v1::RecognizeResponse* response) {
  return StartRecognize(context, context_, request, response);
}

grpc::ServerUnaryReactor* SpeechService::ListModels(grpc::CallbackServerContext* context,
                                                    const asr::v1::ListModelsRequest* /*request*/,
                                                    asr::v1::ListModelsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status status = AuthenticateCall(context_, *context); !status.ok()) {
    reactor->Finish(status);
    return reactor;
  }
  if (const ServedModel* model = context_->model.load(); model != nullptr) {
    *response->add_models() = model->info();
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace oasr::server
