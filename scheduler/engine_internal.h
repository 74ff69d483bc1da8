// Definitions shared by the engine's translation units (engine.cc: commands,
// admission, finishing; engine_cohort.cc: the cohort tick). Internal.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/stream_context.h"
#include "scheduler/engine.h"

namespace oasr::scheduler {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Adds the nanoseconds since `start` to `counter` when destroyed.
class ScopedNanos {
 public:
  explicit ScopedNanos(std::atomic<int64_t>& counter) : counter_(counter), start_(Clock::now()) {}
  ~ScopedNanos() {
    counter_.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count(),
        std::memory_order_relaxed);
  }

 private:
  std::atomic<int64_t>& counter_;
  Clock::time_point start_;
};

// A command from another thread to the scheduler. Kept small: the open
// arguments (a request with its vectors) travel behind a pointer, so audio
// commands cost the scheduler no frees but their samples'.
struct Engine::Command {
  enum class Type { kOpen, kAudio, kEnd, kCancel, kFrontEnd };
  struct Open {
    std::shared_ptr<StreamShared> shared;
    StreamRequest request;
  };
  Type type = Type::kAudio;
  int64_t stream_id = 0;
  uint32_t index = 0;  // The stream's place in the table.
  Clock::time_point time;
  std::vector<int16_t> audio;  // kAudio
  std::unique_ptr<Open> open;  // kOpen
  absl::Status error;          // kCancel: why (OK: the client left)
};

// One stream, owned by the scheduler thread. Laid out for the loops over a
// cohort: what every tick reads or writes of a ready stream lies in its
// first three cache lines (the table's entries are aligned to them); what
// only opening, admission, events and the end touch comes after.
struct alignas(64) Engine::Stream {
  // Hot: read or written for every row of every tick.
  int64_t id = 0;      // 0: a free entry of the stream table.
  int64_t offset = 0;  // Encoder frames decoded.
  int64_t chunks_done = 0;
  size_t ready_index = 0;  // Position in ready_ while queued.
  int inflight_row = -1;   // Its row in the cohort in flight (overlap_ticks), or -1.
  int decoding_row = -1;   // Its row in the cohort being decoded (decode_thread), or -1.
  uint32_t index = 0;      // Its place in the table.
  bool admitted = false;
  bool queued = false;          // In ready_: has a chunk (or its end) to process.
  bool input_finished = false;  // EndAudio arrived (the front end may still be flushing).
  bool interim_results = true;
  // Shared with the front-end workers while they hold work of this stream.
  std::shared_ptr<StreamFrontEnd> frontend;
  std::shared_ptr<StreamShared> shared;
  // The stream's decoder state, taken from the engine's pool at admission
  // and given back when the stream finishes.
  std::unique_ptr<decoder::DecoderState> decoder_state;
  Clock::time_point last_audio;                  // Arrival of the latest audio command.
  std::optional<Clock::time_point> ready_since;  // When the next chunk's audio was complete.
  std::optional<cache::StreamContext> context;   // Set while admitted: the slot.
  // Cold: admission, events, the end.
  bool rescoring = false;  // Its finals are rescored (attention decoder).
  int sample_rate = 16000;
  int nbest = 1;             // Hypotheses per result the request asked for.
  size_t active_index = 0;   // Position in active_ while admitted.
  std::string last_partial;  // Transcript of the last interim result sent.
  // The decoder's PartialRevision when the last interim result was built.
  uint64_t partial_revision = std::numeric_limits<uint64_t>::max();
  Clock::time_point opened;
  // The request's decode options until admission configures the decoder.
  std::unique_ptr<decoder::StreamOptions> decode;
  // Its links in the waiting lists (by Engine::WaitList) while it waits.
  struct WaitLinks {
    Stream* prev = nullptr;
    Stream* next = nullptr;
    bool linked = false;
  };
  WaitLinks waits[2];
};

// One stream's place in this tick's cohort: what the tick's steps learn about
// it, in one struct rather than parallel vectors.
struct Engine::Row {
  Stream* stream = nullptr;  // Null once its stream finished while the row was in flight.
  int64_t feat_frames = 0;   // Feature frames of the chunk's window.
  int32_t frames = 0;        // Encoder frames it produces.
  // Its stream's audio had ended when the cohort was picked: only then may
  // the chunk reach past the samples received (the front end's flush).
  bool input_finished = false;
  absl::Status status;  // The commit's, then the decode's outcome.
  std::vector<decoder::DecodeResult> finals;
  decoder::StreamStatus decoder_status;
  std::optional<decoder::DecodeResult> partial;  // With interim results.
};

}  // namespace oasr::scheduler
