// One StreamingRecognize call: a gRPC callback reactor bridging the client's
// messages to an engine stream and the engine's events back to the client.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>
#include <mutex>

#include "oasr/asr/v1/asr.grpc.pb.h"
#include "scheduler/engine.h"
#include "server/recognition_config.h"
#include "server/service_context.h"

namespace oasr::server {

// Lifetime: created by the service for each call, deletes itself in OnDone.
// Threading: gRPC runs the reactions on its threads, the engine's notify runs
// on the scheduler thread; all of them take link_->mu, and none blocks
// beyond it (work goes to the engine's command queue). At most one read and
// one write are in flight; reading pauses while max_pending_responses
// responses wait for the client, so a slow reader cannot grow memory.
class StreamingCall final : public grpc::ServerBidiReactor<asr::v1::StreamingRecognizeRequest,
                                                           asr::v1::StreamingRecognizeResponse> {
 public:
  // `context` must outlive the call (the Server guarantees it).
  StreamingCall(grpc::CallbackServerContext* call_context, ServiceContext* context);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // What the engine's notify callback reaches; outlives the reactor, since
  // the engine may notify after the call is done.
  struct Link {
    std::recursive_mutex mu;
    StreamingCall* call = nullptr;  // Null once the call is done.
  };

  // Each *Locked method runs with link_->mu held.
  void HandleConfigLocked();
  void HandleAudioLocked();
  void PumpLocked();
  void MaybeReadLocked();
  // Ends the call with `status` (no more responses), cancelling the stream.
  void FailLocked(const grpc::Status& status);
  grpc::Status FinalStatus(const scheduler::StreamEvent& event) const;

  grpc::CallbackServerContext* const call_context_;
  ServiceContext* const context_;
  const std::shared_ptr<Link> link_;
  asr::v1::StreamingRecognizeRequest request_;
  asr::v1::StreamingRecognizeResponse response_;  // The write in flight.
  std::deque<asr::v1::StreamingRecognizeResponse> pending_;
  ParsedConfig config_;
  std::unique_ptr<scheduler::EngineStream> stream_;
  std::vector<int16_t> samples_;  // Scratch for decoded audio.
  grpc::Status final_status_;
  bool reading_ = false;
  bool client_done_ = false;  // The client half-closed (or the call broke).
  bool engine_done_ = false;  // The stream's last event arrived.
  bool writing_ = false;
  bool finished_ = false;  // Finish or StartWriteAndFinish was called.
};

}  // namespace oasr::server
