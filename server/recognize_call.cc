#include "server/recognize_call.h"

#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "server/event_dispatcher.h"
#include "server/grpc_status.h"
#include "server/recognition_config.h"

namespace oasr::server {
namespace {

// Posted to the event dispatcher by the engine's notify; lives until the
// stream's last event has been handled (the dispatcher holds it while it
// runs, the notify until the engine drops the stream).
struct RecognizeState final : EventDispatcher::Task {
  grpc::ServerUnaryReactor* reactor = nullptr;
  ServiceContext* context = nullptr;
  asr::v1::RecognizeResponse response;
  RecognizeDelivery deliver;
  ParsedConfig config;
  std::mutex mu;
  // Set once the audio is queued; reset at the end (breaks the cycle
  // state -> stream -> notify -> state).
  std::unique_ptr<scheduler::EngineStream> stream;
  // The call's share of the tokens' and peers' limits, until it answers.
  CallAdmission::Lease lease;
  bool done = false;

  void Finish(const grpc::Status& status) {
    lease.Release();
    context->metrics.CountStatus(status);
    context->metrics.recognize_calls_active.fetch_sub(1);
    reactor->Finish(status);
  }

  // On a dispatcher thread: collects finals; answers at the last event.
  // Before `stream` is set the events wait (StartRecognize posts once more).
  void Run() override {
    std::lock_guard<std::mutex> lock(mu);
    if (done || stream == nullptr) return;
    scheduler::StreamEvent event;
    while (stream->outbox().TryPop(&event)) {
      for (const decoder::DecodeResult& result : event.results) {
        if (!result.is_final) continue;
        asr::v1::SpeechRecognitionResult* out = response.add_results();
        FillAlternatives(result, config, out->mutable_alternatives());
        SetDurationMs(result.end_ms, out->mutable_result_end_time());
        out->set_segment(result.segment);
      }
      response.set_audio_processed(static_cast<float>(event.audio_processed_s));
      if (!event.finish.has_value()) continue;
      done = true;
      response.set_finish_reason(scheduler::FinishReasonName(*event.finish));
      grpc::Status status = grpc::Status::OK;
      if (*event.finish == scheduler::FinishReason::kError) {
        status = event.error.ok() ? grpc::Status(grpc::StatusCode::INTERNAL, "recognition failed")
                                  : ToGrpcStatus(event.error);
      } else if (*event.finish == scheduler::FinishReason::kCancelled) {
        status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                              "the server is shutting down; recognition was cancelled");
      }
      // The dispatcher holds this state until Run returns, so dropping the
      // handle (and with it, maybe, the notify's reference) here is safe.
      stream.reset();
      if (status.ok()) deliver(response);
      Finish(status);
      return;
    }
  }
};

// `lease` (may be null) is released before the client can see the status.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* call_context,
                                    ServiceContext* context, const grpc::Status& status,
                                    CallAdmission::Lease* lease = nullptr) {
  if (lease != nullptr) lease->Release();
  context->metrics.CountStatus(status);
  context->metrics.recognize_calls_active.fetch_sub(1);
  grpc::ServerUnaryReactor* reactor = call_context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* StartRecognize(grpc::CallbackServerContext* call_context,
                                         ServiceContext* context,
                                         absl::StatusOr<RecognizeInput> input,
                                         RecognizeDelivery deliver) {
  context->metrics.recognize_calls_active.fetch_add(1);
  context->metrics.recognize_calls_total.fetch_add(1);
  CallAdmission::Lease lease;
  if (grpc::Status admitted = AdmitStreamCall(context, *call_context, &lease); !admitted.ok()) {
    return FinishNow(call_context, context, admitted);
  }
  // Every answer from here on releases the lease first.
  auto refuse = [&](const grpc::Status& status) {
    return FinishNow(call_context, context, status, &lease);
  };
  ServedModel* model = context->model.load();
  if (context->draining.load()) {
    return refuse(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
  }
  if (model == nullptr) {
    return refuse(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                               "no model is served (loading, or the server runs without one)"));
  }
  if (!input.ok()) return refuse(ToGrpcStatus(input.status()));
  asr::v1::RecognitionConfig& config = input->config;
  const std::string_view audio = input->audio;
  // LINEAR16 or unspecified with a RIFF header is a WAV file too.
  const bool wav_bytes = LooksLikeWav(audio);
  if (wav_bytes && (config.encoding() == asr::v1::ENCODING_UNSPECIFIED ||
                    config.encoding() == asr::v1::LINEAR16)) {
    config.set_encoding(asr::v1::WAV);
  }
  std::string_view samples_bytes = audio;
  if (config.encoding() == asr::v1::WAV) {
    absl::StatusOr<WavAudio> wav = ParseWav(audio);
    if (!wav.ok()) return refuse(ToGrpcStatus(wav.status()));
    if (wav->channels != 1) {
      return refuse(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("audio: the WAV file has ", wav->channels, " channels (mono only)")));
    }
    // The header decides rate and sample format.
    config.set_sample_rate_hertz(wav->sample_rate);
    config.set_encoding(wav->encoding == SampleEncoding::kMulaw  ? asr::v1::MULAW
                        : wav->encoding == SampleEncoding::kAlaw ? asr::v1::ALAW
                                                                 : asr::v1::LINEAR16);
    samples_bytes = wav->data;
  }
  absl::StatusOr<ParsedConfig> parsed = ParseRecognitionConfig(config, *model, /*allow_wav=*/false);
  if (!parsed.ok()) return refuse(ToGrpcStatus(parsed.status()));
  parsed->request.interim_results = false;
  parsed->request.decode.single_utterance = false;

  std::vector<int16_t> samples;
  if (absl::Status status = DecodeSamples(parsed->encoding, samples_bytes, &samples, "audio");
      !status.ok()) {
    return refuse(ToGrpcStatus(status));
  }
  const double seconds = static_cast<double>(samples.size()) / parsed->request.sample_rate;
  const double limit = model->engine().config().max_buffered_audio_s;
  if (seconds > limit) {
    return refuse(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                               absl::StrCat("audio: ", seconds, " s is longer than Recognize's ",
                                            limit, " s limit; use StreamingRecognize")));
  }

  OASR_CHECK(context->dispatcher != nullptr, "Recognize needs the event dispatcher");
  auto state = std::make_shared<RecognizeState>();
  state->reactor = call_context->DefaultReactor();
  state->context = context;
  state->deliver = std::move(deliver);
  state->config = *parsed;
  state->lease = std::move(lease);
  // The notify runs on the scheduler thread: it only posts the state, never
  // waits for state->mu nor builds the response.
  EventDispatcher* dispatcher = context->dispatcher;
  std::shared_ptr<EventDispatcher::Task> task = state;
  absl::StatusOr<std::unique_ptr<scheduler::EngineStream>> opened =
      model->engine().OpenStream(parsed->request, [dispatcher, task] { dispatcher->Post(task); });
  if (!opened.ok()) {
    state->done = true;
    state->Finish(ToGrpcStatus(opened.status()));
    return state->reactor;
  }
  // Queued without the lock: until `stream` is set, Run leaves the events
  // waiting, so no one waits for this copy of the audio.
  std::unique_ptr<scheduler::EngineStream> stream = std::move(*opened);
  // A refused push (the buffer bound) ends the stream with that error, and
  // its last event answers the call, as it does after EndAudio.
  absl::Status pushed = samples.empty() ? absl::OkStatus() : stream->PushAudio(samples);
  if (pushed.ok()) (void)stream->EndAudio();
  {
    std::lock_guard<std::mutex> lock(state->mu);
    state->stream = std::move(stream);
  }
  // For whatever arrived meanwhile (gRPC accepts the reactor answered
  // before it is returned).
  dispatcher->Post(task);
  return state->reactor;
}

grpc::ServerUnaryReactor* StartRecognize(grpc::CallbackServerContext* call_context,
                                         ServiceContext* context,
                                         const asr::v1::RecognizeRequest* request,
                                         asr::v1::RecognizeResponse* response) {
  return StartRecognize(
      call_context, context, RecognizeInput{request->config(), request->audio()},
      [response](asr::v1::RecognizeResponse& native) { response->Swap(&native); });
}

}  // namespace oasr::server
