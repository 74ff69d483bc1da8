// One StreamingRecognize call: a gRPC callback reactor bridging the client's
// messages to an engine stream and the engine's events back to the client.
#pragma once

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
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
// Idle timeout: a gRPC alarm (callback on gRPC's executor, never a thread of
// the call's own) fires at the earliest moment the stream could have been
// idle for context->stream_idle_timeout; it ends the call with OUT_OF_RANGE
// when a read has been waiting that long, and otherwise re-arms for the
// read in flight, so a stream costs one pending alarm and no polling.
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
  // Arms the idle alarm to fire after `delay` (replacing a fired one).
  void ArmIdleAlarmLocked(std::chrono::steady_clock::duration delay);
  // The idle alarm fired: ends an idle stream with OUT_OF_RANGE, or re-arms.
  void CheckIdleLocked();
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
  // Null when the idle timeout is off; one alarm pending at a time.
  std::unique_ptr<grpc::Alarm> idle_alarm_;
  // When the read in flight was started: the client has been silent since.
  std::chrono::steady_clock::time_point read_started_;
  bool reading_ = false;
  bool client_done_ = false;  // The client half-closed (or the call broke).
  bool engine_done_ = false;  // The stream's last event arrived.
  bool writing_ = false;
  bool finished_ = false;  // Finish or StartWriteAndFinish was called.
};

}  // namespace oasr::server
