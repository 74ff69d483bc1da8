#include "server/streaming_call.h"

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "server/google_speech_service.h"
#include "server/grpc_status.h"
#include "server/riva_service.h"
#include "spdlog/spdlog.h"

namespace oasr::server {

template <typename Api>
StreamingCall<Api>::StreamingCall(grpc::CallbackServerContext* call_context,
                                  ServiceContext* context)
    : call_context_(call_context), context_(context), link_(std::make_shared<Link>()) {
  OASR_CHECK(context_->dispatcher != nullptr, "a streaming call needs the event dispatcher");
  link_->call = this;
  context_->metrics.streaming_calls_active.fetch_add(1);
  context_->metrics.streaming_calls_total.fetch_add(1);
  std::lock_guard<std::recursive_mutex> lock(link_->mu);
  if (grpc::Status admitted = AdmitStreamCall(context_, *call_context_, &lease_); !admitted.ok()) {
    FailLocked(admitted);
    return;
  }
  // Initial metadata now tells the client the call was admitted (a client
  // may wait for it before sending audio).
  this->StartSendInitialMetadata();
  MaybeReadLocked();
  if (context_->stream_idle_timeout.count() > 0) {
    ArmIdleAlarmLocked(context_->stream_idle_timeout);
  }
}

template <typename Api>
void StreamingCall<Api>::ArmIdleAlarmLocked(std::chrono::steady_clock::duration delay) {
  // grpc::Alarm takes system_clock deadlines; the delay is measured on the
  // steady clock, so a wall-clock step only shifts when the check runs.
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::duration_cast<std::chrono::system_clock::duration>(delay);
  // Replacing a fired alarm from inside its own callback is safe: gRPC keeps
  // the alarm's state alive until the callback returns.
  idle_alarm_ = std::make_unique<grpc::Alarm>();
  std::shared_ptr<Link> link = link_;
  idle_alarm_->Set(deadline, [link](bool fired) {
    if (!fired) return;  // Cancelled: the call is done.
    std::lock_guard<std::recursive_mutex> lock(link->mu);
    if (link->call != nullptr) link->call->CheckIdleLocked();
  });
}

template <typename Api>
void StreamingCall<Api>::CheckIdleLocked() {
  // After a half-close or the end of the call there is nothing to wait for.
  if (finished_ || client_done_) return;
  const auto timeout = context_->stream_idle_timeout;
  if (!reading_ || message_in_hand_.load(std::memory_order_relaxed)) {
    // Flow control paused reading (the client is behind, not idle), or a
    // message has just arrived and is being decoded: look again a full
    // timeout later.
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

template <typename Api>
void StreamingCall<Api>::MaybeReadLocked() {
  if (reading_ || client_done_ || finished_) return;
  if (static_cast<int>(pending_.size()) >= context_->max_pending_responses) return;
  reading_ = true;
  message_in_hand_.store(false, std::memory_order_relaxed);
  read_started_ = std::chrono::steady_clock::now();
  this->StartRead(&request_);
}

template <typename Api>
void StreamingCall<Api>::OnReadDone(bool ok) {
  message_in_hand_.store(true, std::memory_order_relaxed);
  // Audio (up to max_message_bytes) is decoded before the lock, so the
  // dispatcher and this call's other reactions never wait behind it. That is
  // safe: one read is in flight at a time and the next starts only from
  // MaybeReadLocked at the end of this reaction (reading_ stays set until
  // then), so request_ and samples_ are this reaction's alone; stream_ and
  // config_ were set by the first message's reaction before this read was
  // started, and never change after.
  absl::Status decoded;
  if (ok && stream_ != nullptr && !request_.has_streaming_config()) {
    samples_.clear();
    decoded = DecodeSamples(config_.encoding, request_.audio_content(), &samples_);
  }
  std::lock_guard<std::recursive_mutex> lock(link_->mu);
  reading_ = false;
  if (finished_) return;
  if (!ok) {
    // The client half-closed (or the call broke; OnCancel handles that).
    client_done_ = true;
    if (stream_ == nullptr) {
      FailLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "streaming_config: the stream ended before its first message "
                              "(which must carry streaming_config)"));
      return;
    }
    if (!engine_done_ && !duration_reached_) {
      // A read also fails when the client cancels, and OnCancel may come
      // after this: a cancelled call is freed now, not decoded to its end.
      if (call_context_->IsCancelled()) {
        stream_->Cancel();
      } else {
        (void)stream_->EndAudio();
      }
    }
    return;
  }
  if (stream_ == nullptr) {
    HandleConfigLocked();
  } else {
    HandleAudioLocked(decoded);
  }
  MaybeReadLocked();
}

template <typename Api>
void StreamingCall<Api>::HandleConfigLocked() {
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
                stream_->id(), call_context_->peer(), Api::kName, config_.request.sample_rate,
                config_.request.interim_results, config_.request.decode.single_utterance);
  // Events that arrive before this returns wait for link_->mu on the
  // dispatcher, and find stream_ set.
}

template <typename Api>
void StreamingCall<Api>::HandleAudioLocked(const absl::Status& decoded) {
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

template <typename Api>
void StreamingCall<Api>::PushAudioLocked() {
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

template <typename Api>
grpc::Status StreamingCall<Api>::FinalStatus(const scheduler::StreamEvent& event) const {
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

template <typename Api>
void StreamingCall<Api>::Link::Run() {
  std::lock_guard<std::recursive_mutex> lock(mu);
  // The call may be done (and deleted): the Link is the dispatcher's until
  // this returns, the call only while it is linked.
  if (call != nullptr) call->OnEventsLocked();
}

template <typename Api>
void StreamingCall<Api>::OnEventsLocked() {
  if (context_->on_stream_events_for_test) context_->on_stream_events_for_test(*call_context_);
  PumpLocked();
}

template <typename Api>
void StreamingCall<Api>::PumpLocked() {
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
    api_.Translate(std::move(response), &pending_);
  }
  if (writing_) return;
  if (pending_.empty()) {
    // An API without a closing result may have nothing left to say.
    if (engine_done_) {
      finished_ = true;
      context_->metrics.CountStatus(final_status_);
      lease_.Release();
      this->Finish(final_status_);
    }
    return;
  }
  response_ = std::move(pending_.front());
  pending_.pop_front();
  writing_ = true;
  if (engine_done_ && pending_.empty()) {
    finished_ = true;
    context_->metrics.CountStatus(final_status_);
    lease_.Release();
    this->StartWriteAndFinish(&response_, grpc::WriteOptions(), final_status_);
    return;
  }
  this->StartWrite(&response_);
}

template <typename Api>
void StreamingCall<Api>::OnWriteDone(bool ok) {
  std::lock_guard<std::recursive_mutex> lock(link_->mu);
  writing_ = false;
  if (finished_) return;
  if (!ok) {
    // The client is gone; OnCancel follows.
    FailLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
    return;
  }
  PumpLocked();
  MaybeReadLocked();
}

template <typename Api>
void StreamingCall<Api>::FailLocked(const grpc::Status& status) {
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
  this->Finish(status);
}

template <typename Api>
void StreamingCall<Api>::OnCancel() {
  std::lock_guard<std::recursive_mutex> lock(link_->mu);
  // A deadline, a disconnect or the server's last resort: free the engine's
  // resources now rather than when the audio would have ended.
  if (stream_ != nullptr && !engine_done_) stream_->Cancel();
  FailLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
}

template <typename Api>
void StreamingCall<Api>::OnDone() {
  {
    std::lock_guard<std::recursive_mutex> lock(link_->mu);
    link_->call = nullptr;
    if (stream_ != nullptr && !engine_done_) stream_->Cancel();
  }
  context_->metrics.streaming_calls_active.fetch_sub(1);
  delete this;
}

// Every API the server has a StreamingRecognize for.
template class StreamingCall<NativeStreamingApi>;
template class StreamingCall<RivaStreamingApi>;
template class StreamingCall<GoogleStreamingApi>;

}  // namespace oasr::server
