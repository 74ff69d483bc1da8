// One StreamingRecognize call: gRPC async operations bridging the client's
// messages to an engine stream and the engine's events back to the client.
// One implementation serves every API that has the call (oasr.asr.v1,
// Riva's, Google's): a small adapter maps the API's first message onto
// oasr.asr.v1's configuration and oasr.asr.v1's responses onto the API's.
#pragma once

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "oasr/asr/v1/asr.grpc.pb.h"
#include "scheduler/engine.h"
#include "server/call_queues.h"
#include "server/event_dispatcher.h"
#include "server/recognition_config.h"
#include "server/service_context.h"

namespace oasr::server {

// What an API adapter provides (NativeStreamingApi is the model; the Riva and
// Google ones are in riva_service.h and google_speech_service.h). One
// instance per call, used under the call's lock.
//   using Request, Response: the API's messages. Request has the oneof
//     streaming_config / audio_content, and streaming_config has config.
//   static constexpr const char* kName: for the logs.
//   absl::StatusOr<asr::v1::StreamingRecognitionConfig> Configure(
//       const Request& first): the first message's configuration in
//       oasr.asr.v1's shape (it has streaming_config with a config), or
//       INVALID_ARGUMENT naming the API's field.
//   void Translate(asr::v1::StreamingRecognizeResponse native,
//                  std::deque<Response>* out): appends what the client gets
//       for one native response: none, one or more responses.
struct NativeStreamingApi {
  using Request = asr::v1::StreamingRecognizeRequest;
  using Response = asr::v1::StreamingRecognizeResponse;
  static constexpr const char* kName = "oasr";

  absl::StatusOr<asr::v1::StreamingRecognitionConfig> Configure(const Request& first) {
    return first.streaming_config();
  }
  void Translate(Response native, std::deque<Response>* out) { out->push_back(std::move(native)); }
};

// Whether every result of `response` is interim (and it has some).
// `Response` is any API's StreamingRecognizeResponse.
template <typename Response>
bool InterimOnly(const Response& response) {
  if (response.results_size() == 0) return false;
  for (const auto& result : response.results()) {
    if (result.is_final()) return false;
  }
  return true;
}

// Responses waiting for a slow reader, after new ones were appended: an
// interim-only response followed by another says nothing the later one does
// not (interim results replace each other), so it is dropped; finals, events
// without results and the order are kept. Returns how many were dropped.
// `response_of` gives an entry's response (entries may carry more).
template <typename Entry, typename ResponseOf>
int CoalesceInterims(std::deque<Entry>* pending, ResponseOf response_of) {
  int dropped = 0;
  while (pending->size() >= 2 && InterimOnly(std::invoke(response_of, pending->back())) &&
         InterimOnly(std::invoke(response_of, *(pending->end() - 2)))) {
    pending->erase(pending->end() - 2);
    ++dropped;
  }
  return dropped;
}
template <typename Response>
int CoalesceInterims(std::deque<Response>* pending) {
  return CoalesceInterims(pending, std::identity{});
}

// The first message of a call, checked as the server checks it before
// anything else: it carries streaming_config, with a config. INVALID_ARGUMENT
// naming the field otherwise. `Request` is any API's StreamingRecognizeRequest.
template <typename Request>
absl::Status CheckFirstMessage(const Request& first) {
  if (!first.has_streaming_config()) {
    return absl::InvalidArgumentError(
        "streaming_config: the first message must carry streaming_config, not audio_content");
  }
  // As Google's API does: a stream must say what audio it sends. An empty
  // RecognitionConfig ("config": {}) is an explicit choice of the defaults.
  if (!first.streaming_config().has_config()) {
    return absl::InvalidArgumentError(
        "streaming_config.config: missing; the RecognitionConfig is required "
        "({} takes the defaults: LINEAR16 at 16000 Hz)");
  }
  return absl::OkStatus();
}

// The configuration of a first message that passed CheckFirstMessage: the
// API's mapping onto oasr.asr.v1 (`api`, the call's adapter), then
// ParseRecognitionConfig against `model` (WAV refused), with interim_results
// and single_utterance applied. Errors are the adapter's or
// ParseRecognitionConfig's (INVALID_ARGUMENT naming the field). No network:
// the server and tests/fuzz both call it.
template <typename Api>
absl::StatusOr<ParsedConfig> ParseStreamingConfig(Api* api, const typename Api::Request& first,
                                                  const ServedModel& model) {
  absl::StatusOr<asr::v1::StreamingRecognitionConfig> streaming = api->Configure(first);
  if (!streaming.ok()) return streaming.status();
  absl::StatusOr<ParsedConfig> parsed =
      ParseRecognitionConfig(streaming->config(), model, /*allow_wav=*/false);
  if (!parsed.ok()) return parsed.status();
  parsed->request.interim_results = streaming->interim_results();
  parsed->request.decode.single_utterance = streaming->single_utterance();
  return parsed;
}

// Lifetime: Accept makes a call object for the next call of the API on a
// queue and posts gRPC's request for it; when a client's call arrives the
// object takes it and posts the request for the one after. The object
// deletes itself once gRPC has returned its last operation (the call is done
// and no read, write or alarm is outstanding).
// Threading: every operation of a call completes on its queue's one thread
// (call_queues.h), which runs the reaction there: a message is decoded and
// pushed to the engine on the thread that polled it. The engine's notify
// runs on its scheduler thread and only posts the call's Link to the
// server's EventDispatcher (context->dispatcher), whose thread then takes
// link_->mu, drains the stream's outbox, builds the responses and starts the
// writes; so the scheduler never waits for a call, and a call whose handling
// is slow holds up one dispatcher thread, not every stream. Everything that
// touches the call's state takes link_->mu, and nothing slow runs under it:
// audio is decoded before the lock (one read is in flight at a time, so its
// message is the reaction's alone), work for the engine goes to its command
// queue. At most one read and one write (initial metadata, a response, the
// status) are in flight; reading pauses while max_pending_responses
// responses wait for the client, so a slow reader cannot grow memory.
// Idle timeout: a gRPC alarm on the call's queue fires at the earliest
// moment the stream could have been idle for context->stream_idle_timeout;
// it ends the call with OUT_OF_RANGE when a read has been waiting that long,
// and otherwise re-arms for the read in flight, so a stream costs one
// pending alarm and no polling.
// `Service` is the API's service class, with gRPC's async
// RequestStreamingRecognize for the call.
template <typename Api, typename Service>
class StreamingCall {
 public:
  using Request = typename Api::Request;
  using Response = typename Api::Response;

  // Posts the request for the next call on `queue`. `service`, `queues` and
  // `context` must outlive every call (the Server guarantees it).
  static void Accept(Service* service, grpc::ServerCompletionQueue* queue, CallQueues* queues,
                     ServiceContext* context);

  StreamingCall(const StreamingCall&) = delete;
  StreamingCall& operator=(const StreamingCall&) = delete;

 private:
  // What the engine's notify posts to the dispatcher; outlives the call,
  // since the engine may notify (and the dispatcher run it) after the call
  // is done.
  struct Link final : EventDispatcher::Task {
    std::mutex mu;
    StreamingCall* call = nullptr;  // Null once the call is done.

   private:
    // On a dispatcher thread: the call's events, under mu.
    void Run() override;
  };

  // One kind of operation's tag: its completion runs `reaction`.
  struct Op final : CallTag {
    Op(StreamingCall* call, void (StreamingCall::*reaction)(bool))
        : call(call), reaction(reaction) {}
    void Proceed(bool ok) override { (call->*reaction)(ok); }
    StreamingCall* const call;
    void (StreamingCall::*const reaction)(bool);
  };

  StreamingCall(Service* service, grpc::ServerCompletionQueue* queue, CallQueues* queues,
                ServiceContext* context);
  ~StreamingCall();

  // The reactions, on the queue's thread.
  void OnAccepted(bool ok);
  void OnReadDone(bool ok);
  void OnWriteDone(bool ok);  // Initial metadata, a response or the status.
  void OnDone(bool ok);       // gRPC's notice that the call is over.
  void OnAlarm(bool fired);
  // The queue's turn after a read that failed: the audio ends here unless
  // the done notice said meanwhile that the call broke.
  void OnReadsEnded(bool fired);

  // Each *Locked method runs with link_->mu held.
  void HandleConfigLocked();
  // `decoded`: how decoding the message's audio into samples_ went.
  void HandleAudioLocked(const absl::Status& decoded);
  // Turns the events waiting in the outbox into responses and starts the
  // next write.
  void PumpLocked();
  // The dispatcher's turn: the test seam, then PumpLocked.
  void OnEventsLocked();
  void MaybeReadLocked();
  // Ends the call with `status` (no more responses), cancelling the stream.
  void FailLocked(const grpc::Status& status);
  // Sends `status` now, or after the write in flight.
  void FinishLocked(const grpc::Status& status);
  // Arms the idle alarm to fire after `delay` (none may be pending).
  void ArmIdleAlarmLocked(std::chrono::steady_clock::duration delay);
  // The idle alarm fired: ends an idle stream with OUT_OF_RANGE, or re-arms.
  void CheckIdleLocked();
  grpc::Status FinalStatus(const scheduler::StreamEvent& event) const;
  // Pushes the decoded audio, cut at the stream's duration limit; the stream
  // that reaches it gets EndAudio and will finish with "length".
  void PushAudioLocked();
  // An operation came back: true when it was the call's last (then the
  // Link is cut, and the caller deletes the call after the lock).
  bool SettleLocked();

  Service* const service_;
  grpc::ServerCompletionQueue* const queue_;
  CallQueues* const queues_;
  ServiceContext* const context_;
  const std::shared_ptr<Link> link_;
  grpc::ServerContext call_context_;
  grpc::ServerAsyncReaderWriter<Response, Request> stream_io_;
  Op accept_op_{this, &StreamingCall::OnAccepted};
  Op read_op_{this, &StreamingCall::OnReadDone};
  Op write_op_{this, &StreamingCall::OnWriteDone};
  Op done_op_{this, &StreamingCall::OnDone};
  Op alarm_op_{this, &StreamingCall::OnAlarm};
  Op reads_ended_op_{this, &StreamingCall::OnReadsEnded};
  // Operations gRPC has not returned yet (the done notice included).
  int outstanding_ = 0;
  Api api_;
  Request request_;
  Response response_;  // The write in flight.
  // When the response write in flight started (epoch: none, or another write).
  std::chrono::steady_clock::time_point response_started_{};
  // When the engine pushed the event the response in flight came from.
  std::chrono::steady_clock::time_point response_pushed_{};
  // A response waiting for the write in flight, and its event's
  // StreamEvent::pushed.
  struct Pending {
    Response response;
    std::chrono::steady_clock::time_point pushed;
  };
  std::deque<Pending> pending_;
  std::deque<Response> translated_;  // Scratch: one event's responses (Api::Translate).
  ParsedConfig config_;
  std::unique_ptr<scheduler::EngineStream> stream_;
  std::vector<int16_t> samples_;  // Scratch for decoded audio (the read's alone).
  grpc::Status final_status_;
  // The call's share of the tokens' and peers' limits, held until it is done.
  CallAdmission::Lease lease_;
  // Samples (at the client's rate) the stream may still push before
  // --max-stream-duration; negative: no limit.
  int64_t samples_left_ = -1;
  // The stream reached --max-stream-duration: its audio is ended, the rest
  // ignored, and its finish_reason is "length".
  bool duration_reached_ = false;
  grpc::Alarm idle_alarm_;
  // Set once, due at once, when reads end (OnReadsEnded).
  grpc::Alarm reads_ended_alarm_;
  bool alarm_pending_ = false;
  // When the read in flight was started: the client has been silent since.
  std::chrono::steady_clock::time_point read_started_;
  // A read is in flight, or its message is being handled (no next read yet).
  bool reading_ = false;
  bool client_done_ = false;  // The client half-closed (or the call broke).
  bool engine_done_ = false;  // The stream's last event arrived.
  bool writing_ = false;
  bool finished_ = false;  // The call's status is decided (sent or to be).
  // The status waits for the write in flight.
  bool finish_deferred_ = false;
  grpc::Status deferred_status_;
};

}  // namespace oasr::server
