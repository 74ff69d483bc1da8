#include "server/stream_client.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include "server/client_channel.h"

namespace oasr::server {
namespace {

using Clock = std::chrono::steady_clock;

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

StreamOutcome RunStream(asr::v1::Speech::Stub& stub, const std::vector<int16_t>& samples,
                        const StreamClientOptions& options) {
  StreamOutcome outcome;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000)));
  AddBearerToken(options.token, &context);
  auto call = stub.StreamingRecognize(&context);
  const int rate = options.config.config().sample_rate_hertz() > 0
                       ? options.config.config().sample_rate_hertz()
                       : 16000;
  const size_t step = std::max<size_t>(1, static_cast<size_t>(rate) * options.chunk_ms / 1000);

  // sent_at[i]: when the message ending at sample (i + 1) * step was sent.
  std::mutex mu;
  std::vector<Clock::time_point> sent_at;
  Clock::time_point end_sent{};
  bool ended = false;

  std::thread reader([&] {
    asr::v1::StreamingRecognizeResponse response;
    while (call->Read(&response)) {
      const Clock::time_point now = Clock::now();
      if (options.on_response) options.on_response(response);
      for (const asr::v1::StreamingRecognitionResult& result : response.results()) {
        const std::string best =
            result.alternatives_size() > 0 ? result.alternatives(0).transcript() : std::string();
        if (result.is_final() && result.alternatives_size() > 0) outcome.finals.push_back(best);
        if (!result.is_final()) ++outcome.interim_results;
        if (!result.finish_reason().empty()) outcome.finish_reason = result.finish_reason();
      }
      if (response.results_size() > 0) {
        const double processed = response.results(response.results_size() - 1).audio_processed();
        const auto covered = static_cast<size_t>(processed * rate);
        std::lock_guard<std::mutex> lock(mu);
        // The message that completed the audio this response covers.
        const size_t index = covered == 0 ? 0 : (covered - 1) / step;
        if (!ended && index < sent_at.size()) {
          outcome.chunk_latency_ms.push_back(MsBetween(sent_at[index], now));
        }
        if (ended) outcome.final_latency_ms = MsBetween(end_sent, now);
      }
      outcome.responses.push_back(response);
    }
  });

  asr::v1::StreamingRecognizeRequest request;
  *request.mutable_streaming_config() = options.config;
  bool open = call->Write(request);
  const Clock::time_point start = Clock::now();
  for (size_t at = 0, n = 0; open && at < samples.size(); at += step, ++n) {
    if (options.realtime) {
      std::this_thread::sleep_until(
          start + std::chrono::microseconds(static_cast<int64_t>(n * step * 1e6 / rate)));
    }
    const size_t count = std::min(step, samples.size() - at);
    request.set_audio_content(reinterpret_cast<const char*>(samples.data() + at), count * 2);
    {
      std::lock_guard<std::mutex> lock(mu);
      sent_at.push_back(Clock::now());
    }
    open = call->Write(request);
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    ended = true;
    end_sent = Clock::now();
  }
  call->WritesDone();
  reader.join();
  outcome.status = call->Finish();
  return outcome;
}

}  // namespace oasr::server
