// A stream's front end (resampling, fbank, CMVN) as the engine drives it:
// inline on the scheduler thread, or on a small pool of workers so that the
// scheduler thread only batches and decodes.
//
// With a pool, each stream's audio is processed in the order it was pushed
// by at most one worker at a time, and its features become visible to the
// scheduler only when a worker publishes them (a short copy under the
// stream's lock), so the scheduler never waits for resampling or fbank.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "encoder/feature_source.h"
#include "encoder/frame_buffer.h"

namespace oasr::scheduler {

class StreamFrontEnd;

// Workers that run StreamFrontEnd work. Thread-safe.
class FrontEndPool {
 public:
  // Starts `threads` (>= 1) workers. `on_done(tag)` runs on a worker after a
  // stream's work was published (new frames, the end flushed, or an error);
  // it must not block and must stay callable until the pool is destroyed.
  // `busy_ns` (not owned, may be null) accumulates the workers' time in
  // pipelines, in nanoseconds.
  FrontEndPool(int threads, std::function<void(int64_t tag)> on_done,
               std::atomic<int64_t>* busy_ns = nullptr);
  // Joins the workers; work still queued is dropped (its streams are freed
  // with the last reference).
  ~FrontEndPool();
  FrontEndPool(const FrontEndPool&) = delete;
  FrontEndPool& operator=(const FrontEndPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()); }

  // Between Hold and Release, work the owner's streams submit (Push, End)
  // is kept back, and Release queues it all at once, waking at most one
  // worker per job: a scheduler handling a tick's commands takes the pool's
  // lock once instead of once a stream. Both on the owner's thread, which
  // is the only one that submits.
  void Hold() { held_ = true; }
  void Release();

 private:
  friend class StreamFrontEnd;
  // On the owner's thread (kept back while held).
  void Submit(std::shared_ptr<StreamFrontEnd> job);
  // On any thread (PushFromClient): queued now.
  void SubmitNow(std::shared_ptr<StreamFrontEnd> job);
  void Work();

  std::function<void(int64_t)> on_done_;
  std::atomic<int64_t>* const busy_ns_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<StreamFrontEnd>> queue_;
  bool stopping_ = false;
  bool held_ = false;                                  // The owner's thread's.
  std::vector<std::shared_ptr<StreamFrontEnd>> kept_;  // Submitted while held.
  std::vector<std::thread> workers_;
};

// One stream's front end. The owner (the scheduler thread) calls Push, End,
// Close and the frame reads; with a pool, a worker runs the pipeline in
// between. Create it with std::make_shared (workers hold a reference while
// its work is queued or running, so Close and dropping the owner's reference
// are safe at any time: the pipeline is freed once, by whoever lets go last).
class StreamFrontEnd : public std::enable_shared_from_this<StreamFrontEnd> {
 public:
  // `pool` (not owned, may be null: inline) must outlive the stream's work;
  // `tag` is passed to the pool's on_done. A pipeline that only copies its
  // input (FeatureSource::CopiesInput: the 16 kHz PCM of a device front end,
  // whose fbank runs on the GPU) costs less per message than waking a
  // worker, so PushFromClient runs it on the client's thread when no worker
  // has the stream.
  //
  // With `ring` (a pool required) the published rows go into a ring the
  // owner binds at admission (BindRing), which a reader such as the device
  // reads without the stream's lock; until then nothing is published.
  StreamFrontEnd(std::unique_ptr<encoder::FeatureSource> pipeline, FrontEndPool* pool, int64_t tag,
                 bool ring = false);

  // Ring mode, the owner, once: `rows` rows of layout().width 16-bit
  // samples (the pipeline's GetRowsPcm16: its rows rounded to int16),
  // the stream's row i at ring row i % rows. Rows are published into it while
  // they are fewer than `rows` past the first row the owner still reads
  // (DiscardFramesBefore), so published rows the owner reads are never
  // written; the rest follow as the owner moves on (on a worker). The rows
  // made before binding go in on a worker too.
  void BindRing(int16_t* ring, int64_t rows);
  // Ring mode, bound: the ring row frame `frame`'s input starts at.
  int64_t RingRow(int64_t frame) const { return layout_.FirstRow(frame) % ring_rows_; }

  // Queues 16-bit PCM at the stream's rate (moved in, not copied). Inline, it
  // is processed now and a failure is returned; with a pool it returns OK and
  // a failure shows in error() once a worker met it.
  absl::Status Push(std::vector<int16_t> audio);
  // With a pool only, from any thread (the client's, not the owner's): as
  // Push, copying `audio`, stamped with its arrival time. Audio pushed so
  // goes to the pipeline in order with the owner's Push and End calls made
  // after it returns. For a pipeline that only copies its input, with no
  // worker on the stream, it runs (and the owner is notified) before this
  // returns.
  void PushFromClient(std::span<const int16_t> audio);

  // With a pool: the owner wants a notification (the pool's on_done) only
  // once `frames` feature frames are published (NumFramesReady() >= frames),
  // or at the end's flush or a failure, which always notify. It fires once;
  // the owner arms it again for the next threshold, and then re-reads
  // NumFramesReady(), since frames published while it armed may not notify.
  // Until first armed, every publication notifies.
  void NotifyWhenFrames(int64_t frames) {
    notify_frames_.store(frames, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  // Arrival of the newest audio whose rows are published (PushFromClient's
  // stamp); the epoch when none was stamped.
  std::chrono::steady_clock::time_point published_audio_time() const;
  // No more audio: the resampler's tail is flushed after the queued audio.
  absl::Status End();
  // Drops queued work and the output of work in flight. Idempotent.
  void Close();

  // How the source's rows make feature frames (see encoder::FeatureSource).
  const encoder::RowLayout& layout() const { return layout_; }
  // Feature frames whose input is published (discarded ones included).
  int64_t NumFramesReady() const {
    return layout_.FramesIn(rows_ready_.load(std::memory_order_acquire));
  }
  // True once End's flush is published: no frame will follow.
  bool flushed() const { return flushed_.load(std::memory_order_acquire); }
  // A worker's failure (sticky; OK inline, where Push and End return it).
  absl::Status error() const;

  // Copies the published input of frames [start, start + count) to out
  // (layout().WindowRows(count) rows). OUT_OF_RANGE when it is not
  // published yet or was discarded.
  absl::Status GetFrames(int64_t start, int64_t count, float* out) const;
  // Forgets the published input before frame `frame`.
  void DiscardFramesBefore(int64_t frame);

 private:
  friend class FrontEndPool;
  // Worker: processes the queued audio (and end) until none is left.
  // `first`: audio of the caller's (PushFromClient), taken before pending_
  // without a copy.
  void Run(std::span<const int16_t> first = {});
  // Copies the pipeline's new rows into published_ (or the ring). Requires mu_.
  void PublishLocked();
  void PublishToRingLocked();
  // Ring mode: queues a pass that publishes what the ring has room for, when
  // there is such work and no worker has the stream. Requires mu_; returns
  // whether the caller must submit the stream (after unlocking).
  bool WantPublishLocked();

  const std::unique_ptr<encoder::FeatureSource> pipeline_;
  const encoder::RowLayout layout_;
  FrontEndPool* const pool_;
  const int64_t tag_;
  const bool client_runs_cheap_work_;
  const bool ring_mode_;

  mutable std::mutex mu_;                      // Guards everything below that is not atomic.
  std::vector<std::vector<int16_t>> pending_;  // Audio not yet given to the pipeline.
  std::vector<std::vector<int16_t>> taken_;    // Worker scratch (keeps capacity).
  bool end_pending_ = false;
  std::chrono::steady_clock::time_point pending_time_{};    // Newest pending audio's arrival.
  std::chrono::steady_clock::time_point published_time_{};  // Newest published audio's arrival.
  bool scheduled_ = false;                                  // Queued on or running on a worker.
  bool closed_ = false;
  absl::Status error_;
  std::atomic<bool> failed_{false};  // error_ is set: error() reads it without mu_ until then.
  // Published rows (pool only); rows_ready_ is its end(), readable without
  // mu_ (inline: the pipeline's).
  encoder::FrameBuffer published_;
  std::atomic<int64_t> rows_ready_{0};
  std::atomic<bool> flushed_{false};
  static constexpr int64_t kNotifyAlways = -1;  // Never armed.
  static constexpr int64_t kNotifyNever = std::numeric_limits<int64_t>::max();
  std::atomic<int64_t> notify_frames_{kNotifyAlways};  // NotifyWhenFrames; Never once fired.
  // Ring mode: the ring (null until bound; ring_rows_ set once, by the
  // owner), the first row the owner still reads, the rows the pipeline has
  // made, whether it took the end, and whether a publishing pass is queued.
  int16_t* ring_ = nullptr;
  int64_t ring_rows_ = 1;
  int64_t ring_floor_ = 0;
  int64_t pipeline_rows_ = 0;
  bool input_done_ = false;
  bool publish_pending_ = false;
};

}  // namespace oasr::scheduler
