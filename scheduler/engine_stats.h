// Counters and histograms the engine keeps for metrics. Written by the
// scheduler thread, read by anyone (a Prometheus scrape).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "scheduler/stream_events.h"

namespace oasr::scheduler {

// A fixed-bucket histogram (Prometheus style: cumulative on read). Thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  // Observe for each value, under one lock.
  void Observe(std::span<const double> values);

  struct Snapshot {
    std::vector<double> upper_bounds;  // Finite bounds; +Inf is implied.
    std::vector<uint64_t> cumulative;  // One per bound, then +Inf (= count).
    double sum = 0.0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // Per bucket, non-cumulative; last is +Inf.
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

struct EngineStats {
  EngineStats();

  std::atomic<int64_t> streams_active{0};   // Admitted, holding a slot.
  std::atomic<int64_t> streams_waiting{0};  // Opened, waiting for a slot.
  std::atomic<int64_t> streams_refused{0};  // OpenStream refused at the limits.
  std::atomic<int64_t> pool_blocks_used{0};
  std::atomic<int64_t> pool_blocks_total{0};
  // Per-stream state slots (conv and attention state rows) and pooled
  // decoder states held by streams: all back to zero when no stream is open.
  std::atomic<int64_t> slots_used{0};
  std::atomic<int64_t> slots_total{0};
  std::atomic<int64_t> decoder_states_in_use{0};
  // Bytes of the K/V pool, on the device the model computes on (set once).
  std::atomic<int64_t> pool_bytes{0};
  std::atomic<int64_t> audio_ms_processed{0};  // Audio decoded, all streams.
  std::atomic<int64_t> chunks_processed{0};
  std::atomic<int64_t> ticks{0};
  std::array<std::atomic<int64_t>, 5> finished{};  // By FinishReason.
  // Final results attention rescoring ordered, and those it could not (a
  // segment longer than the rescoring window, or a rescorer error).
  std::atomic<int64_t> segments_rescored{0};
  std::atomic<int64_t> segments_not_rescored{0};
  // Rescoring passes (each scores the segments gathered together).
  std::atomic<int64_t> rescoring_passes{0};
  // The rescoring segment memory's pool (0 without rescoring).
  std::atomic<int64_t> rescoring_blocks_used{0};
  std::atomic<int64_t> rescoring_blocks_total{0};
  // Cohort forwards replayed as a CUDA graph, and the padding-lane rows
  // they computed beyond their streams (to reach a captured width).
  std::atomic<int64_t> graph_launches{0};
  std::atomic<int64_t> padded_rows{0};
  // Where the scheduler thread's time goes, in nanoseconds: whole ticks, and
  // within them the front end (resampling, fbank), the model forward and
  // the decoder. The rest of a tick is the scheduler's own overhead.
  // frontend_ns counts only front-end work on the scheduler thread;
  // frontend_threads > 0 moves it to frontend_pool_ns (workers, all summed).
  std::atomic<int64_t> tick_ns{0};
  std::atomic<int64_t> frontend_ns{0};
  std::atomic<int64_t> model_ns{0};
  std::atomic<int64_t> decode_ns{0};
  std::atomic<int64_t> rescoring_ns{0};  // Attention rescoring of finals (inside tick_ns).
  std::atomic<int64_t> frontend_pool_ns{0};
  // Parts of the rest, each apart from the above: the scheduler thread
  // waiting for the device (a cohort's results, or the staging's last copy
  // before it is refilled); handling commands and admitting streams (less
  // any inline front-end work they did); emitting a cohort's events.
  std::atomic<int64_t> device_wait_ns{0};
  std::atomic<int64_t> commands_ns{0};
  std::atomic<int64_t> emit_ns{0};
  // Within decode_ns: the cohort's batched search alone (the rest of it is
  // reading each row's results).
  std::atomic<int64_t> decode_search_ns{0};
  // With a decode thread (EngineConfig::decode_thread), decode_ns is that
  // thread's time, outside tick_ns, and decode_wait_ns the scheduler
  // thread's waits for it (inside tick_ns).
  std::atomic<bool> decode_off_thread{false};
  std::atomic<int64_t> decode_wait_ns{0};

  Histogram chunk_latency_s;  // Audio that completed a chunk arrived -> its result out.
  Histogram queue_time_s;     // OpenStream -> admitted.
  Histogram batch_size;       // Streams per cohort forward.
};

}  // namespace oasr::scheduler
