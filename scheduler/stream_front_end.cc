#include "scheduler/stream_front_end.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/pcm16.h"
#include "common/thread_name.h"

namespace oasr::scheduler {
namespace {

// Calls fn(ring_row, n, offset) for the at most two contiguous pieces of
// rows [first, first + count) in a ring of ring_rows rows (up to its end,
// then from its start); offset counts rows from `first`.
template <typename Fn>
void ForEachRingPiece(int64_t first, int64_t count, int64_t ring_rows, const Fn& fn) {
  for (int64_t row = first; row < first + count;) {
    const int64_t at = row % ring_rows;
    const int64_t n = std::min(first + count - row, ring_rows - at);
    fn(at, n, row - first);
    row += n;
  }
}

}  // namespace

FrontEndPool::FrontEndPool(int threads, std::function<void(int64_t tag)> on_done,
                           std::atomic<int64_t>* busy_ns)
    : on_done_(std::move(on_done)), busy_ns_(busy_ns) {
  OASR_CHECK(threads >= 1, "a front-end pool needs at least one thread");
  workers_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    workers_.emplace_back([this] {
      SetThreadName("oasr-frontend");
      Work();
    });
  }
}

FrontEndPool::~FrontEndPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  queue_.clear();
}

void FrontEndPool::Submit(std::shared_ptr<StreamFrontEnd> job) {
  if (held_) {
    kept_.push_back(std::move(job));
    return;
  }
  SubmitNow(std::move(job));
}

void FrontEndPool::SubmitNow(std::shared_ptr<StreamFrontEnd> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void FrontEndPool::Release() {
  held_ = false;
  if (kept_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::shared_ptr<StreamFrontEnd>& job : kept_) queue_.push_back(std::move(job));
  }
  if (kept_.size() >= workers_.size()) {
    cv_.notify_all();
  } else {
    for (size_t i = 0; i < kept_.size(); ++i) cv_.notify_one();
  }
  kept_.clear();
}

void FrontEndPool::Work() {
  while (true) {
    std::shared_ptr<StreamFrontEnd> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job->Run();
  }
}

StreamFrontEnd::StreamFrontEnd(std::unique_ptr<encoder::FeatureSource> pipeline, FrontEndPool* pool,
                               int64_t tag, bool ring)
    : pipeline_(std::move(pipeline)),
      layout_(pipeline_->layout()),
      pool_(pool),
      tag_(tag),
      client_runs_cheap_work_(pool != nullptr && pipeline_->CopiesInput()),
      ring_mode_(ring),
      published_(layout_.width) {
  OASR_CHECK(!ring || pool != nullptr, "a ring front end needs a pool");
}

void StreamFrontEnd::BindRing(int16_t* ring, int64_t rows) {
  OASR_CHECK(ring_mode_ && ring != nullptr && rows >= 1, "BindRing: not a ring front end");
  bool submit = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    ring_ = ring;
    ring_rows_ = rows;
    submit = WantPublishLocked();
  }
  if (submit) pool_->Submit(shared_from_this());
}

bool StreamFrontEnd::WantPublishLocked() {
  if (ring_ == nullptr || scheduled_ || closed_ || !error_.ok()) return false;
  const bool work = rows_ready_.load(std::memory_order_relaxed) < pipeline_rows_ ||
                    (input_done_ && !flushed_.load(std::memory_order_relaxed));
  if (!work) return false;
  publish_pending_ = true;
  scheduled_ = true;
  return true;
}

absl::Status StreamFrontEnd::Push(std::vector<int16_t> audio) {
  if (pool_ == nullptr) {
    absl::Status status = pipeline_->AcceptPcm16(audio.data(), static_cast<int64_t>(audio.size()));
    rows_ready_.store(pipeline_->NumRowsReady(), std::memory_order_release);
    return status;
  }
  bool submit = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return absl::OkStatus();
    pending_.push_back(std::move(audio));
    submit = !scheduled_;
    scheduled_ = true;
  }
  if (submit) pool_->Submit(shared_from_this());
  return absl::OkStatus();
}

void StreamFrontEnd::PushFromClient(std::span<const int16_t> audio) {
  OASR_CHECK(pool_ != nullptr, "PushFromClient needs a front-end pool");
  const auto now = std::chrono::steady_clock::now();
  bool submit = false, inline_audio = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    pending_time_ = now;
    submit = !scheduled_;
    scheduled_ = true;
    // Run here on the caller's audio itself when nothing waits before it;
    // otherwise it queues behind what does (a copy).
    inline_audio = submit && client_runs_cheap_work_ && pending_.empty();
    if (!inline_audio) pending_.emplace_back(audio.begin(), audio.end());
  }
  if (!submit) return;
  if (client_runs_cheap_work_) {
    // Cheaper here than a worker's wake-up; scheduled_ keeps the workers
    // off the stream meanwhile, and the reference keeps it alive.
    const std::shared_ptr<StreamFrontEnd> self = shared_from_this();
    self->Run(inline_audio ? audio : std::span<const int16_t>());
    return;
  }
  pool_->SubmitNow(shared_from_this());
}

std::chrono::steady_clock::time_point StreamFrontEnd::published_audio_time() const {
  std::lock_guard<std::mutex> lock(mu_);
  return published_time_;
}

absl::Status StreamFrontEnd::End() {
  if (pool_ == nullptr) {
    absl::Status status = pipeline_->InputFinished();
    rows_ready_.store(pipeline_->NumRowsReady(), std::memory_order_release);
    flushed_.store(status.ok(), std::memory_order_release);
    return status;
  }
  bool submit = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return absl::OkStatus();
    end_pending_ = true;
    submit = !scheduled_;
    scheduled_ = true;
  }
  if (submit) pool_->Submit(shared_from_this());
  return absl::OkStatus();
}

void StreamFrontEnd::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  pending_.clear();
  end_pending_ = false;
}

absl::Status StreamFrontEnd::error() const {
  // The owner asks at every notification; a failure is rare and sticky.
  if (!failed_.load(std::memory_order_acquire)) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void StreamFrontEnd::Run(std::span<const int16_t> first) {
  while (true) {
    bool end = false;
    std::chrono::steady_clock::time_point taken_time;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_ || !error_.ok() ||
          (first.empty() && pending_.empty() && !end_pending_ && !publish_pending_)) {
        scheduled_ = false;
        return;
      }
      taken_.swap(pending_);
      taken_time = pending_time_;
      end = end_pending_;
      end_pending_ = false;
      publish_pending_ = false;
    }
    // The pipeline is this worker's alone: the owner reads only what is
    // published, and no other worker runs this stream until scheduled_ drops.
    const auto started = std::chrono::steady_clock::now();
    absl::Status status;
    if (!first.empty()) {
      status = pipeline_->AcceptPcm16(first.data(), static_cast<int64_t>(first.size()));
      first = {};
    }
    for (const std::vector<int16_t>& audio : taken_) {
      if (!status.ok()) break;
      status = pipeline_->AcceptPcm16(audio.data(), static_cast<int64_t>(audio.size()));
      if (!status.ok()) break;
    }
    taken_.clear();
    if (status.ok() && end) status = pipeline_->InputFinished();
    if (pool_->busy_ns_ != nullptr) {
      pool_->busy_ns_->fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now() - started)
                                     .count(),
                                 std::memory_order_relaxed);
    }
    bool more = false;
    bool flushed_now = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) {
        scheduled_ = false;
        return;
      }
      const bool was_flushed = flushed_.load(std::memory_order_relaxed);
      if (status.ok() && end) input_done_ = true;
      PublishLocked();
      published_time_ = taken_time;  // pending_time_ only grows.
      if (!status.ok()) {
        error_ = status;
        failed_.store(true, std::memory_order_release);
      }
      if (!ring_mode_ && status.ok() && end) flushed_.store(true, std::memory_order_release);
      flushed_now = !was_flushed && flushed_.load(std::memory_order_relaxed);
      more = status.ok() && (!pending_.empty() || end_pending_ || publish_pending_);
      if (!more) scheduled_ = false;
    }
    // Notify at a failure, the flush, or the owner's threshold (once); the
    // fence pairs with NotifyWhenFrames' (the owner re-reads the frames
    // after arming, so one side sees the other).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    bool notify = !status.ok() || flushed_now;
    if (!notify) {
      int64_t want = notify_frames_.load(std::memory_order_seq_cst);
      notify =
          want == kNotifyAlways ||
          (NumFramesReady() >= want && notify_frames_.compare_exchange_strong(want, kNotifyNever));
    }
    if (notify) pool_->on_done_(tag_);
    if (!more) return;
  }
}

void StreamFrontEnd::PublishToRingLocked() {
  pipeline_rows_ = pipeline_->NumRowsReady();
  if (ring_ == nullptr) return;  // Not admitted yet: the rows wait in the pipeline.
  const int64_t have = rows_ready_.load(std::memory_order_relaxed);
  const int64_t end = std::min(pipeline_rows_, ring_floor_ + ring_rows_);
  const int64_t width = layout_.width;
  ForEachRingPiece(have, end - have, ring_rows_, [&](int64_t at, int64_t n, int64_t offset) {
    // Straight into the ring (a copy of the client's samples at 16 kHz).
    absl::Status got = pipeline_->GetRowsPcm16(have + offset, n, ring_ + at * width);
    OASR_CHECK(got.ok(), std::string(got.message()));
  });
  if (end > have) {
    pipeline_->DiscardRowsBefore(end);
    rows_ready_.store(end, std::memory_order_release);
  }
  if (input_done_ && end == pipeline_rows_) flushed_.store(true, std::memory_order_release);
}

void StreamFrontEnd::PublishLocked() {
  if (ring_mode_) {
    PublishToRingLocked();
    return;
  }
  const int64_t have = rows_ready_.load(std::memory_order_relaxed);
  const int64_t ready = pipeline_->NumRowsReady();
  if (ready == have) return;
  absl::Status got = pipeline_->GetRows(have, ready - have, published_.Append(ready - have));
  OASR_CHECK(got.ok(), std::string(got.message()));
  pipeline_->DiscardRowsBefore(ready);
  rows_ready_.store(ready, std::memory_order_release);
}

absl::Status StreamFrontEnd::GetFrames(int64_t start, int64_t count, float* out) const {
  if (pool_ == nullptr) return pipeline_->GetFrames(start, count, out);
  std::lock_guard<std::mutex> lock(mu_);
  if (ring_mode_) {
    const int64_t first = layout_.FirstRow(start), rows = layout_.WindowRows(count);
    const int64_t ready = rows_ready_.load(std::memory_order_relaxed);
    if (first < ring_floor_ || count < 0 || first + rows > ready) {
      return absl::OutOfRangeError(absl::StrCat("StreamFrontEnd: rows [", first, ", ", first + rows,
                                                ") not in the ring (have [", ring_floor_, ", ",
                                                ready, "))"));
    }
    const int64_t width = layout_.width;
    ForEachRingPiece(first, rows, ring_rows_, [&](int64_t at, int64_t n, int64_t offset) {
      Pcm16ToFloat(ring_ + at * width, n * width, out + offset * width);
    });
    return absl::OkStatus();
  }
  return published_.Get(layout_.FirstRow(start), layout_.WindowRows(count), out, "StreamFrontEnd");
}

void StreamFrontEnd::DiscardFramesBefore(int64_t frame) {
  if (pool_ == nullptr) {
    pipeline_->DiscardFramesBefore(frame);
    return;
  }
  if (ring_mode_) {
    bool submit = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ring_floor_ = std::max(ring_floor_, layout_.FirstRow(frame));
      submit = WantPublishLocked();
    }
    if (submit) pool_->Submit(shared_from_this());
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  published_.DiscardBefore(layout_.FirstRow(frame));
}

}  // namespace oasr::scheduler
