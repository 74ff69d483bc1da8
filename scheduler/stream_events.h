// What the engine tells a stream's owner: results, and how the stream ended.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "decoder/decode_result.h"

namespace oasr::scheduler {

// Why a stream ended, reported on its last event (api.md's finish_reason).
enum class FinishReason {
  kStop,       // The client ended the audio; everything was decoded.
  kEndpoint,   // single_utterance: the first endpoint ended the stream.
  kLength,     // The stream reached its cache ceiling (max_stream_frames).
  kCancelled,  // The client went away or the server is shutting down.
  kError,      // Something failed; see StreamEvent::error.
};

// "stop", "endpoint", "length", "cancelled", "error".
const char* FinishReasonName(FinishReason reason);

struct StreamEvent {
  // Interim (is_final false) and final results, oldest first.
  std::vector<decoder::DecodeResult> results;
  // Seconds of audio the engine has decoded for this stream so far.
  double audio_processed_s = 0.0;
  // Set on the stream's last event; nothing follows it.
  std::optional<FinishReason> finish;
  // Why, when finish is kError (or the engine refused the stream's audio).
  absl::Status error;
  // When the engine pushed it to the stream's outbox (StreamOutbox::Push
  // sets it): where a server's delivery time of its responses starts.
  std::chrono::steady_clock::time_point pushed{};
};

// A stream's event queue, written by the scheduler thread and read by the
// stream's owner. Thread-safe. Bounded by the engine's pace: one event per
// decoded chunk at most, and the client's reader drains it.
class StreamOutbox {
 public:
  // `notify` (may be empty) runs on the pushing thread (an engine thread)
  // after each Push. It holds up other streams while it runs, so it must be
  // O(1) and never wait for a lock the owner may hold (the server's posts
  // the owner to a thread of its own, which then drains the outbox).
  explicit StreamOutbox(std::function<void()> notify) : notify_(std::move(notify)) {}

  void Push(StreamEvent event);
  // Moves the oldest event into `out`; false when none is waiting.
  bool TryPop(StreamEvent* out);
  // Waits until an event is waiting or `timeout_s` passes; false on timeout.
  bool WaitPop(StreamEvent* out, double timeout_s);
  // True once the last event (with finish set) was pushed.
  bool finished() const;

 private:
  std::function<void()> notify_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  bool finished_ = false;
};

}  // namespace oasr::scheduler
