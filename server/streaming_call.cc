#include "server/streaming_call.h"

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "server/google_speech_service.h"
#include "server/grpc_status.h"
#include "server/riva_service.h"
#include "server/speech_service.h"
#include "spdlog/spdlog.h"

namespace oasr::server {
namespace {

int64_t Nanoseconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

}  // namespace

template <typename Api, typename Service>
void StreamingCall<Api, Service>::Accept(Service* service, grpc::ServerCompletionQueue* queue,
                                         CallQueues* queues, ServiceContext* context) {
  // The object is the request's until a call arrives (or the server shuts
  // down and the request fails); no other thread knows it before.
  auto* call = new StreamingCall(service, queue, queues, context);
  if (!queues->PostIfRunning([call] {
        call->call_context_.AsyncNotifyWhenDone(&call->done_op_);
        call->service_->RequestStreamingRecognize(&call->call_context_, &call->stream_io_,
                                                  call->queue_, call->queue_, &call->accept_op_);
      })) {
    delete call;
  }
}

template <typename Api, typename Service>
StreamingCall<Api, Service>::StreamingCall(Service* service, grpc::ServerCompletionQueue* queue,
                                           CallQueues* queues, ServiceContext* context)
    : service_(service),
      queue_(queue),
      queues_(queues),
      context_(context),
      link_(std::make_shared<Link>()),
      stream_io_(&call_context_) {
  OASR_CHECK(context_->dispatcher != nullptr, "a streaming call needs the event dispatcher");
  queues_->Enter();
  // The request; the done notice is counted once the call has arrived (a
  // request that fails never gets one).
  outstanding_ = 1;
}

template <typename Api, typename Service>
StreamingCall<Api, Service>::~StreamingCall() {
  queues_->Leave();
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::OnAccepted(bool ok) {
  if (!ok) {
    // The server is shutting down: no call came for this request.
    delete this;
    return;
  }
  // The next call of this API on this queue.
  Accept(service_, queue_, queues_, context_);
  link_->call = this;
  context_->metrics.streaming_calls_active.fetch_add(1);
  context_->metrics.streaming_calls_total.fetch_add(1);
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(link_->mu);
    // The request came back (SettleLocked below); the done notice is now owed.
    ++outstanding_;
    if (grpc::Status admitted = AdmitStreamCall(context_, call_context_, &lease_); !admitted.ok()) {
      FailLocked(admitted);
    } else {
      // Initial metadata now tells the client the call was admitted (a
      // client may wait for it before sending audio).
      writing_ = true;
      ++outstanding_;
      stream_io_.SendInitialMetadata(&write_op_);
      MaybeReadLocked();
      if (context_->stream_idle_timeout.count() > 0) {
        ArmIdleAlarmLocked(context_->stream_idle_timeout);
      }
    }
    last = SettleLocked();
  }
  if (last) delete this;
}

template <typename Api, typename Service>
bool StreamingCall<Api, Service>::SettleLocked() {
  --outstanding_;
  if (outstanding_ > 0) return false;
  // Nothing of gRPC's refers to the call any more: cut it from the engine
  // and the dispatcher.
  link_->call = nullptr;
  if (stream_ != nullptr && !engine_done_) stream_->Cancel();
  context_->metrics.streaming_calls_active.fetch_sub(1);
  return true;
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::ArmIdleAlarmLocked(std::chrono::steady_clock::duration delay) {
  // grpc::Alarm takes system_clock deadlines; the delay is measured on the
  // steady clock, so a wall-clock step only shifts when the check runs.
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::duration_cast<std::chrono::system_clock::duration>(delay);
  alarm_pending_ = true;
  ++outstanding_;
  idle_alarm_.Set(queue_, deadline, &alarm_op_);
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::OnAlarm(bool fired) {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(link_->mu);
    alarm_pending_ = false;
    // Not fired: cancelled, because the call is finishing.
    if (fired) CheckIdleLocked();
    last = SettleLocked();
  }
  if (last) delete this;
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::OnReadsEnded(bool /*fired*/) {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(link_->mu);
    if (!finished_ && !engine_done_ && !duration_reached_) (void)stream_->EndAudio();
    last = SettleLocked();
  }
  if (last) delete this;
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::CheckIdleLocked() {
  // After a half-close or the end of the call there is nothing to wait for.
  if (finished_ || client_done_) return;
  const auto timeout = context_->stream_idle_timeout;
  if (!reading_) {
    // Flow control paused reading (the client is behind, not idle): look
    // again a full timeout later. (A message being handled cannot be here:
    // the alarm runs on the call's queue thread, as the read's reaction.)
    ArmIdleAlarmLocked(timeout);
    return;
  }
  const auto idle = std::chrono::steady_clock::now() - read_started_;
  if (idle < timeout) {
    ArmIdleAlarmLocked(timeout - idle);
    return;
  }
  context_->metrics.streams_idle_timed_out.fetch_add(1);
  const double seconds = std::chrono::duration<double>(timeout).count();
  FailLocked(grpc::Status(
      grpc::StatusCode::OUT_OF_RANGE,
      absl::StrCat("stream idle timeout: nothing received from the client for ", seconds,
                   " s (--stream-idle-timeout); send audio at least that often, or half-close "
                   "the stream when the audio ends")));
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::MaybeReadLocked() {
  if (reading_ || client_done_ || finished_) return;
  if (static_cast<int>(pending_.size()) >= context_->max_pending_responses) return;
  reading_ = true;
  read_started_ = std::chrono::steady_clock::now();
  ++outstanding_;
  stream_io_.Read(&request_, &read_op_);
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::OnReadDone(bool ok) {
  const auto delivered = std::chrono::steady_clock::now();
  if (ok) context_->metrics.stage(Stage::kReadWait).Add(Nanoseconds(delivered - read_started_));
  // Audio (up to max_message_bytes) is decoded before the lock, so the
  // dispatcher never waits behind it. That is safe: one read is in flight
  // at a time and the next starts only from MaybeReadLocked at the end of
  // this reaction (reading_ stays set until then), so request_ and samples_
  // are this reaction's alone; stream_ and config_ were set by the first
  // message's reaction before this read was started, and never change after.
  absl::Status decoded;
  if (ok && stream_ != nullptr && !request_.has_streaming_config()) {
    samples_.clear();
    decoded = DecodeSamples(config_.encoding, request_.audio_content(), &samples_);
  }
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(link_->mu);
    reading_ = false;
    if (!finished_) {
      if (!ok) {
        // The client half-closed (or the call broke: the done notice then
        // says it was cancelled and frees the stream).
        client_done_ = true;
        if (stream_ == nullptr) {
          FailLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  "streaming_config: the stream ended before its first message "
                                  "(which must carry streaming_config)"));
        } else if (!engine_done_ && !duration_reached_) {
          // A failed read is a half-close or a broken call (a client killed
          // or gone). gRPC queues a broken call's done notice beside the
          // failed read, so the audio ends one turn of the queue later: a
          // broken call is then cancelled at once (finish_reason
          // "cancelled") rather than decoded to a final no one receives.
          ++outstanding_;
          reads_ended_alarm_.Set(queue_, std::chrono::system_clock::now(), &reads_ended_op_);
        }
      } else {
        if (stream_ == nullptr) {
          HandleConfigLocked();
        } else {
          HandleAudioLocked(decoded);
        }
        MaybeReadLocked();
        context_->metrics.stage(Stage::kReaction)
            .Add(Nanoseconds(std::chrono::steady_clock::now() - delivered));
      }
    }
    last = SettleLocked();
  }
  if (last) delete this;
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::HandleConfigLocked() {
  if (absl::Status first = CheckFirstMessage(request_); !first.ok()) {
    FailLocked(ToGrpcStatus(first));
    return;
  }
  ServedModel* model = context_->model.load();
  if (context_->draining.load()) {
    FailLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
    return;
  }
  if (model == nullptr) {
    FailLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "no model is served (loading, or the server runs without one)"));
    return;
  }
  // The API's configuration in oasr.asr.v1's shape, then checked as the
  // native API's is.
  absl::StatusOr<ParsedConfig> parsed = ParseStreamingConfig(&api_, request_, *model);
  if (!parsed.ok()) {
    FailLocked(ToGrpcStatus(parsed.status()));
    return;
  }
  config_ = std::move(*parsed);
  // The notify runs on the scheduler thread: it only posts the Link (an
  // atomic increment, at most one queue entry per call), never waits for
  // link_->mu nor builds a response.
  EventDispatcher* dispatcher = context_->dispatcher;
  std::shared_ptr<EventDispatcher::Task> task = link_;
  absl::StatusOr<std::unique_ptr<scheduler::EngineStream>> opened =
      model->engine().OpenStream(config_.request, [dispatcher, task] { dispatcher->Post(task); });
  if (!opened.ok()) {
    FailLocked(ToGrpcStatus(opened.status()));
    return;
  }
  stream_ = std::move(*opened);
  if (context_->max_stream_duration_seconds > 0) {
    samples_left_ =
        static_cast<int64_t>(context_->max_stream_duration_seconds * config_.request.sample_rate);
  }
  spdlog::debug("stream {}: opened from {} ({} API, {} Hz, interim {}, single utterance {})",
                stream_->id(), call_context_.peer(), Api::kName, config_.request.sample_rate,
                config_.request.interim_results, config_.request.decode.single_utterance);
  // Events that arrive before this returns wait for link_->mu on the
  // dispatcher, and find stream_ set.
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::HandleAudioLocked(const absl::Status& decoded) {
  if (request_.has_streaming_config()) {
    FailLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "streaming_config: sent again; only the first message may carry it"));
    return;
  }
  if (!decoded.ok()) {
    FailLocked(ToGrpcStatus(decoded));
    return;
  }
  // After an endpoint ended a single utterance (or the stream reached its
  // duration) the rest is ignored.
  if (engine_done_ || duration_reached_ || samples_.empty()) return;
  PushAudioLocked();
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::PushAudioLocked() {
  const bool reaches = samples_left_ >= 0 && static_cast<int64_t>(samples_.size()) >= samples_left_;
  if (reaches) samples_.resize(static_cast<size_t>(samples_left_));
  if (samples_left_ >= 0) samples_left_ -= static_cast<int64_t>(samples_.size());
  absl::Status pushed = samples_.empty() ? absl::OkStatus() : stream_->PushAudio(samples_);
  if (reaches && pushed.ok()) {
    // The transcript of the audio up to the limit, then "length" (the
    // client may go on sending; it is read and dropped until the end).
    duration_reached_ = true;
    context_->metrics.streams_max_duration.fetch_add(1);
    (void)stream_->EndAudio();
    return;
  }
  // RESOURCE_EXHAUSTED (buffer full) cancels the stream with that error; its
  // last event then ends the call with it. FAILED_PRECONDITION means the
  // engine ended the stream already (its last event is on the way).
  if (!pushed.ok() && pushed.code() != absl::StatusCode::kResourceExhausted &&
      pushed.code() != absl::StatusCode::kFailedPrecondition) {
    FailLocked(ToGrpcStatus(pushed));
  }
}

template <typename Api, typename Service>
grpc::Status StreamingCall<Api, Service>::FinalStatus(const scheduler::StreamEvent& event) const {
  switch (*event.finish) {
    case scheduler::FinishReason::kStop:
    case scheduler::FinishReason::kEndpoint:
    case scheduler::FinishReason::kLength:
      return grpc::Status::OK;
    case scheduler::FinishReason::kCancelled:
      if (context_->draining.load()) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "the server is shutting down; the stream was cancelled");
      }
      return grpc::Status(grpc::StatusCode::CANCELLED, "the stream was cancelled");
    case scheduler::FinishReason::kError:
      return event.error.ok() ? grpc::Status(grpc::StatusCode::INTERNAL, "the stream failed")
                              : ToGrpcStatus(event.error);
  }
  return grpc::Status(grpc::StatusCode::INTERNAL, "unknown finish reason");
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::Link::Run() {
  std::lock_guard<std::mutex> lock(mu);
  // The call may be done (and deleted): the Link is the dispatcher's until
  // this returns, the call only while it is linked.
  if (call != nullptr) call->OnEventsLocked();
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::OnEventsLocked() {
  if (context_->on_stream_events_for_test) context_->on_stream_events_for_test(call_context_);
  PumpLocked();
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::PumpLocked() {
  if (finished_ || stream_ == nullptr) return;
  scheduler::StreamEvent event;
  while (!engine_done_ && stream_->outbox().TryPop(&event)) {
    asr::v1::StreamingRecognizeResponse response;
    for (const decoder::DecodeResult& result : event.results) {
      FillStreamingResult(result, config_, event.audio_processed_s, response.add_results());
    }
    if (event.finish.has_value()) {
      engine_done_ = true;
      // The audio ended because it reached --max-stream-duration.
      if (duration_reached_ && *event.finish == scheduler::FinishReason::kStop) {
        event.finish = scheduler::FinishReason::kLength;
      }
      final_status_ = FinalStatus(event);
      if (response.results_size() == 0) {
        // The closing result carries finish_reason even with nothing to say.
        asr::v1::StreamingRecognitionResult* closing = response.add_results();
        closing->set_is_final(true);
        closing->set_stability(1.0f);
        closing->set_audio_processed(static_cast<float>(event.audio_processed_s));
        SetDurationMs(static_cast<int64_t>(event.audio_processed_s * 1000),
                      closing->mutable_result_end_time());
      }
      response.mutable_results()->rbegin()->set_finish_reason(
          scheduler::FinishReasonName(*event.finish));
      spdlog::debug("stream {}: finished ({}{}{})", stream_->id(),
                    scheduler::FinishReasonName(*event.finish), event.error.ok() ? "" : ": ",
                    std::string(event.error.message()));
    }
    api_.Translate(std::move(response), &translated_);
    for (Response& translated : translated_)
      pending_.push_back({std::move(translated), event.pushed});
    translated_.clear();
    // A client behind on reading gets the newest interim result, not every one.
    if (const int dropped = CoalesceInterims(&pending_, &Pending::response); dropped > 0) {
      context_->metrics.interim_results_coalesced.fetch_add(dropped, std::memory_order_relaxed);
    }
  }
  if (writing_) return;
  if (pending_.empty()) {
    // An API without a closing result may have nothing left to say.
    if (engine_done_) {
      finished_ = true;
      context_->metrics.CountStatus(final_status_);
      lease_.Release();
      FinishLocked(final_status_);
    }
    return;
  }
  response_ = std::move(pending_.front().response);
  response_pushed_ = pending_.front().pushed;
  pending_.pop_front();
  writing_ = true;
  ++outstanding_;
  response_started_ = std::chrono::steady_clock::now();
  if (engine_done_ && pending_.empty()) {
    finished_ = true;
    context_->metrics.CountStatus(final_status_);
    lease_.Release();
    stream_io_.WriteAndFinish(response_, grpc::WriteOptions(), final_status_, &write_op_);
    return;
  }
  stream_io_.Write(response_, &write_op_);
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::OnWriteDone(bool ok) {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(link_->mu);
    writing_ = false;
    if (response_started_ != std::chrono::steady_clock::time_point{}) {
      // A response's write (not the metadata's or a bare status).
      const auto now = std::chrono::steady_clock::now();
      context_->metrics.stage(Stage::kWriteWait).Add(Nanoseconds(now - response_started_));
      if (ok && response_pushed_ != std::chrono::steady_clock::time_point{}) {
        context_->metrics.response_delivery_s.Observe(
            std::chrono::duration<double>(now - response_pushed_).count());
      }
      response_started_ = {};
    }
    if (finish_deferred_) {
      finish_deferred_ = false;
      FinishLocked(deferred_status_);
    } else if (!finished_) {
      if (!ok) {
        // The client is gone; the done notice follows.
        FailLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
      } else {
        PumpLocked();
        MaybeReadLocked();
      }
    }
    last = SettleLocked();
  }
  if (last) delete this;
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::FinishLocked(const grpc::Status& status) {
  if (alarm_pending_) idle_alarm_.Cancel();
  if (writing_) {
    // One write at a time: the status follows the write in flight.
    finish_deferred_ = true;
    deferred_status_ = status;
    return;
  }
  writing_ = true;
  ++outstanding_;
  stream_io_.Finish(status, &write_op_);
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::FailLocked(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  if (stream_ != nullptr && !engine_done_) stream_->Cancel();
  if (status.error_code() != grpc::StatusCode::CANCELLED) {
    spdlog::info("stream {}: {} ({})", stream_ ? stream_->id() : 0, status.error_message(),
                 static_cast<int>(status.error_code()));
  }
  context_->metrics.CountStatus(status);
  // Released before the client can see the status, so a client that opens
  // its next stream on seeing it is not refused for this one.
  lease_.Release();
  FinishLocked(status);
}

template <typename Api, typename Service>
void StreamingCall<Api, Service>::OnDone(bool /*ok*/) {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(link_->mu);
    if (call_context_.IsCancelled()) {
      // A deadline, a disconnect or the server's last resort: FailLocked
      // frees the engine's resources now rather than when the audio would
      // have ended.
      FailLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
    }
    if (alarm_pending_) idle_alarm_.Cancel();
    last = SettleLocked();
  }
  if (last) delete this;
}

// Every API the server has a StreamingRecognize for.
template class StreamingCall<NativeStreamingApi, SpeechService>;
template class StreamingCall<RivaStreamingApi, RivaService>;
template class StreamingCall<GoogleStreamingApi, GoogleSpeechService>;

}  // namespace oasr::server
