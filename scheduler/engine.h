// The serving engine: one scheduler thread owns the model, the cache
// managers and the decoder, and turns many independent streams into a few
// batched chunk forwards. Other threads talk to it only through a command
// queue (open, audio, end of audio, cancel) and hear back through each
// stream's outbox.
//
// Per tick the scheduler: drains the commands (feeding audio to each stream's
// front end, inline or on the front-end pool), admits waiting streams into
// free slots, picks every admitted stream with a full chunk ready (or a final
// short chunk after the end of its audio), ends streams at their cache
// ceiling ("length"), prepares all their blocks in one batched call, stages
// the cohort's plan on the model's device, runs one cohort forward across
// streams at any offsets, commits, decodes the cohort in one batched call,
// applies the endpoint rules and emits events. Idle streams cost nothing;
// with no work the thread sleeps until a command (or a front-end worker's
// result) arrives. The engine owns the caches but not their contents: the
// model reads and writes its K/V and state by slot (streaming_model.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/attention_cache_manager.h"
#include "cache/block_pool.h"
#include "cache/slot_state_cache.h"
#include "cache/stream_slot_pool.h"
#include "common/cuda_graph.h"
#include "common/execution_context.h"
#include "common/gpu_event.h"
#include "decoder/ctc_decoder.h"
#include "decoder/decoder_state_pool.h"
#include "encoder/attention_rescorer.h"
#include "scheduler/cohort_decode.h"
#include "scheduler/cohort_staging.h"
#include "scheduler/engine_config.h"
#include "scheduler/engine_stats.h"
#include "scheduler/segment_memory.h"
#include "scheduler/stream_events.h"
#include "scheduler/stream_front_end.h"
#include "scheduler/streaming_model.h"

namespace oasr::scheduler {

class Engine;

// State shared by a stream's owner and the scheduler. Internal.
struct StreamShared {
  explicit StreamShared(std::function<void()> notify) : outbox(std::move(notify)) {}
  StreamOutbox outbox;
  std::atomic<int64_t> samples_pushed{0};    // Input-rate samples sent.
  std::atomic<int64_t> samples_consumed{0};  // Input-rate samples decoded.
  std::atomic<bool> ended{false};            // EndAudio or Cancel was called.
  // With front-end workers: the stream's front end, made when the stream
  // opens, so that PushAudio hands audio to the workers without passing
  // through the scheduler thread (which learns of it when a chunk is ready).
  std::shared_ptr<StreamFrontEnd> frontend;
};

// The owner's handle on one stream. Thread-safe; the Engine must outlive it.
class EngineStream {
 public:
  int64_t id() const { return id_; }

  // Queues 16-bit PCM at the stream's sample rate. RESOURCE_EXHAUSTED when
  // more than max_buffered_audio_s would be waiting to be decoded (the stream
  // is then cancelled with that error); FAILED_PRECONDITION after EndAudio.
  absl::Status PushAudio(std::span<const int16_t> samples);
  // No more audio: the rest is decoded and the stream finishes with "stop".
  absl::Status EndAudio();
  // Ends the stream now ("cancelled"); its resources are freed by the next tick.
  void Cancel();

  // The stream's events; the last has finish set.
  StreamOutbox& outbox() { return shared_->outbox; }

 private:
  friend class Engine;
  EngineStream(Engine* engine, int64_t id, uint32_t index, int sample_rate,
               std::shared_ptr<StreamShared> shared)
      : engine_(engine),
        id_(id),
        index_(index),
        sample_rate_(sample_rate),
        shared_(std::move(shared)) {}

  Engine* engine_;
  int64_t id_;
  uint32_t index_;  // Its place in the engine's stream table.
  int sample_rate_;
  std::shared_ptr<StreamShared> shared_;
};

class Engine {
 public:
  // Builds the caches for `model` on its device (the K/V pool, its tables,
  // the model's declared states), the decoder state pool, the plan staging
  // and the model's workspace, then starts the scheduler thread. With a
  // `rescorer` (and config.attention_rescoring, and the prefix beam search)
  // every final result is rescored with the model's attention decoder.
  // INVALID_ARGUMENT for a bad config, or a decoder whose units or frame
  // shift disagree with the model; RESOURCE_EXHAUSTED when memory cannot be
  // had.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      const EngineConfig& config, std::unique_ptr<StreamingModel> model,
      std::unique_ptr<decoder::CtcDecoder> decoder,
      std::unique_ptr<encoder::AttentionRescorer> rescorer = nullptr);
  // Stops the scheduler (ending every open stream with "cancelled").
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Opens a stream. `notify` runs on an engine thread (the scheduler's, or
  // one of the decode's) whenever an event is queued for it, possibly while
  // other streams' notifications run on other engine threads; it must be
  // O(1), thread-safe and never wait for the owner's locks (see
  // StreamOutbox). RESOURCE_EXHAUSTED when the waiting queue is full or
  // the engine is stopping; INVALID_ARGUMENT for a bad request (field
  // named). Thread-safe.
  absl::StatusOr<std::unique_ptr<EngineStream>> OpenStream(const StreamRequest& request,
                                                           std::function<void()> notify = {});

  // Ends every stream with "cancelled" and stops the scheduler thread (the
  // front-end workers stop with the engine). Idempotent; thread-safe.
  void Stop();

  const EngineStats& stats() const { return stats_; }
  const ModelGeometry& geometry() const { return model_->geometry(); }
  const StreamingModel& model() const { return *model_; }
  const cache::CacheConfig& cache_config() const { return cache_config_; }
  const decoder::CtcDecoder& decoder() const { return *decoder_; }
  const EngineConfig& config() const { return config_; }
  // The fbank and CMVN run in the cohort forward on the model's device
  // (EngineConfig::front_end, resolved).
  bool device_front_end() const { return device_front_end_; }
  // Whether the streams' 16 kHz PCM goes into rings the forward reads
  // (16-bit samples: RoundToPcm16).
  bool pcm_rings() const { return pcm_ring_; }

 private:
  using Clock = std::chrono::steady_clock;
  friend class EngineStream;
  struct Command;
  struct Stream;
  struct Row;

  Engine(const EngineConfig& config, std::unique_ptr<StreamingModel> model,
         std::unique_ptr<decoder::CtcDecoder> decoder);
  absl::Status Init();
  void LogConfiguration() const;

  void Enqueue(Command command);
  // A stream's front-end tag: its table index and id in one word.
  static int64_t FrontEndTag(uint32_t index, int64_t id) {
    return (id << kIndexBits) | static_cast<int64_t>(index);
  }
  // A front-end worker published the work of the stream tagged `tag` (any
  // thread).
  void FrontEndDone(int64_t tag);
  // The stream at table index `index` if it is stream `id` (a command may
  // name a stream that finished since), else null.
  Stream* FindStream(uint32_t index, int64_t id);
  // The table entry `index` (whichever stream holds it), or null past the
  // table's end; and a command's entry (null for an open), for prefetching.
  Stream* StreamSlot(uint32_t index) const;
  const Stream* CommandStream(const Command& command) const;
  // Asks for what a row's stream points to: its front end, shared state
  // and slot (the stream's own lines must be there already).
  void PrefetchRow(const Stream& s) const;
  void Loop();
  // One pass: commands, admission, one cohort. Returns true when more work
  // is ready without waiting for a command.
  bool Tick(std::vector<Command>& commands);
  void Handle(Command& command);
  void HandleOpen(Command& command);
  void Admit();
  // Streams waiting for a slot, in two intrusive lists (Stream::waits): all
  // of them in arrival order (kArrived), and those with a chunk to run in
  // the order they got it (kCanRun). Every step O(1): admission and a
  // waiting stream's end cost the same whatever the queue's length.
  enum WaitList { kArrived = 0, kCanRun = 1 };
  struct WaitQueue {
    Stream* head = nullptr;
    Stream* tail = nullptr;
    size_t size = 0;
  };
  void WaitPush(WaitList list, Stream& s);
  void WaitRemove(WaitList list, Stream& s);
  bool HasReadyWork() const;
  // Queues `s` for the next cohort when it is admitted and has a chunk (or
  // the end of its audio) to process.
  void MarkReady(Stream& s);

  // The cohort tick (engine_cohort.cc), in order: pick the ready streams,
  // reserve their blocks, stage the plan on the device, run the model,
  // commit, decode, emit. Each step works on rows_ and may finish streams,
  // dropping their rows.
  void RunCohort();
  void PickCohort();
  bool ReserveBlocks();
  void StageCohort();
  bool Forward();
  // The plan of the staging's first `width` rows (fixed addresses).
  CohortPlan Plan(int width) const;
  // The forward of `plan` (plan.batch rows), then the rows' decoder
  // candidates when decoding pruned: what a tick enqueues, or captures.
  absl::Status EnqueueForward(const CohortPlan& plan);
  // Fills staging rows [from, width) with the padding lane: a full chunk at
  // the lane's cache length (the length every stream starts with).
  void StagePadRows(int from, int width);
  // With cuda_graphs on CUDA: captures one graph per ladder width, each
  // after a warm-up forward of padding rows only (no stream advances).
  absl::Status CaptureGraphs();
  void CommitCohort();
  // Decodes `rows` (rows_, or the cohort in flight from candidates' host
  // copy `buffer`) and emits their events; rows whose stream finished
  // meanwhile are skipped.
  void DecodeCohortRows(std::vector<Row>& rows, int buffer, ThreadPool& pool);
  void EmitCohort(std::vector<Row>& rows);
  // The event of a row whose chunk leaves its stream running, when there is
  // something to say (a final result, or a changed interim transcript):
  // pushed by the decode, on any of its threads, for its own row's stream.
  // An ending row's results go out with Finish.
  void PushChunkEvent(Row& row);
  // overlap_ticks: waits for the cohort in flight, then decodes and emits it
  // (without a decode thread), or hands it to the decode thread.
  void RetireInflight();
  // The decode thread: the cohort in decoding_ (search and results) once
  // StartDecode hands it over.
  void DecodeLoop();
  void StartDecode();
  // Waits until the decode thread is done with decoding_ (no-op when it has
  // nothing); then decoding_ is the scheduler thread's again.
  void WaitDecode();
  // Waits for decoding_ and emits its events.
  void RetireDecoding();
  // After row `row`'s chunk was decoded (and its event pushed): the
  // stream's bookkeeping, or its end.
  void AfterChunk(Row& row, Clock::time_point now);

  // Ends `s` with `reason`: final results when it ran to an end, the event,
  // and every resource back to its pool. Removes it from the scheduler.
  // `results` (already taken from the decoder) go first on the last event.
  void Finish(Stream& s, FinishReason reason, absl::Status error = absl::OkStatus(),
              std::vector<decoder::DecodeResult> results = {});
  // Attention rescoring of `s`'s final results when it rescores (over its
  // segment memory, when `rescore` and the segment is held whole), each
  // then cut to the request's n-best; the memory forgets their segments.
  void CompleteFinals(Stream& s, std::vector<decoder::DecodeResult>& finals, bool rescore);
  // The same for the finals of several streams (a cohort's), their held
  // segments gathered side by side and scored together: one rescoring pass
  // (one wait on CUDA) for as many segments as its batch holds.
  struct FinalsToRescore {
    Stream* stream;
    std::vector<decoder::DecodeResult>* finals;
    bool rescore;
  };
  void RescoreFinals(std::span<const FinalsToRescore> batch);
  void UpdateGauges();
  // Feature frames of the next chunk: the full window, or after the end of
  // the audio a last short one; 0 when no chunk is ready.
  int64_t ChunkFrames(const Stream& s) const;
  bool ChunkReady(const Stream& s) const { return ChunkFrames(s) > 0; }
  // A stream's front-end pipeline: the PCM source of the device front end,
  // or the host's fbank. Const, so any thread may call it.
  absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> CreatePipeline(int sample_rate) const;
  // Arrival of the newest audio the stream's front end has taken in.
  Clock::time_point LastAudio(const Stream& s) const;
  // Seconds of audio `frames` encoder frames cover (the model's frame clock).
  double FramesToSeconds(int64_t frames) const { return frames * frame_shift_ms_ / 1000.0; }
  // A stream's audio_processed once `offset` encoder frames are decoded:
  // those frames on the model's clock, at most the audio it was sent (the
  // tail padding's frames may reach past it).
  double ProcessedSeconds(const Stream& s, int64_t offset) const;
  // Caps the times of `results` (segment and word times) at the audio `s`
  // was sent, for the same reason.
  void ClampToAudio(const Stream& s, int64_t offset,
                    std::vector<decoder::DecodeResult>* results) const;
  void AssertSchedulerThread() const;

  const EngineConfig config_;
  std::unique_ptr<StreamingModel> model_;
  std::unique_ptr<decoder::CtcDecoder> decoder_;
  ExecutionContext* ctx_ = nullptr;  // The model's.
  cache::CacheConfig cache_config_;
  // The model's chunk geometry, read for every ready stream (in feature frames).
  int64_t stride_frames_ = 0;  // Between consecutive windows.
  int64_t window_frames_ = 0;  // A full chunk's window.
  int64_t right_context_ = 0;
  double frame_shift_ms_ = 40.0;          // One encoder frame (the model's clock).
  double samples_per_feature_frame_ = 0;  // At 1 Hz; times a stream's rate.
  bool check_capacity_ = true;            // Streams can reach max_stream_frames (no eviction).
  // The widest cohort (EngineConfig::max_cohort_rows resolved): what the
  // workspace, staging, log-probs, candidates and graph ladder are sized for.
  int cohort_rows_ = 0;
  // The fbank and CMVN run in the cohort forward on the model's device: the
  // streams' front ends resample only and the staging carries PCM.
  bool device_front_end_ = false;
  // With a device front end and front-end workers: every stream's 16 kHz
  // PCM goes from its front end straight into its slot's lane of
  // pcm_rings_ (float32 [slots + 1, ring rows, 80], page-locked on CUDA),
  // which the forward reads (kernels::GatherPcm): a tick stages no samples.
  bool pcm_ring_ = false;
  Tensor pcm_rings_;
  std::unique_ptr<cache::BlockPool> pool_;
  std::unique_ptr<cache::StreamSlotPool> slots_;
  std::unique_ptr<cache::AttentionCacheManager> attention_;
  std::unique_ptr<cache::SlotStateCache> states_;  // The model's declared states.
  std::vector<TensorView> state_views_;            // One per spec, for the plan.
  // The decoder's per-stream states; each admitted stream holds one.
  std::unique_ptr<decoder::DecoderStatePool> decoder_states_;
  std::unique_ptr<CohortStaging> staging_;
  Tensor log_probs_;  // [cohort_rows_, chunk, V] float32 on the model's device.
  // The cohort forward as CUDA graphs (cuda_graphs on CUDA; empty: eager):
  // graphs_[i] computes graph_widths_[i] rows (ascending, the last
  // cohort_rows_), reading the staging, caches and log_probs_ above at
  // their fixed addresses. pad_slot_ is the padding lane's slot (-1: none).
  std::vector<int> graph_widths_;
  std::vector<CudaGraph> graphs_;
  int pad_slot_ = -1;
  // Every row's per-frame decoder candidates (config.pruned_decode; empty:
  // the decoder reads log_probs_ whole).
  std::optional<CohortCandidates> candidates_;
  // Attention rescoring (null: off), the encoder output of a tick's cohort
  // ([cohort_rows_, chunk, d] float32 on the model's device) and every
  // slot's segment so far.
  std::unique_ptr<encoder::AttentionRescorer> rescorer_;
  Tensor encoder_out_;
  std::optional<SegmentMemory> segment_memory_;
  // Segments gathered for one rescoring pass ([max_batch_frames, d] on the
  // model's device), what is pending in it, and the pass's arguments.
  Tensor segment_;
  struct RescoreJob {
    decoder::DecodeResult* result;
    size_t keep;
    int64_t first_frame, frames;
  };
  std::vector<RescoreJob> rescore_jobs_;
  std::vector<FinalsToRescore> rescore_batch_;
  std::vector<std::span<const int32_t>> rescore_hyps_;
  std::vector<double> rescore_scores_;
  std::vector<encoder::RescoreSegment> rescore_segments_;
  EngineStats stats_;

  // Command queue (any thread -> scheduler).
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Command> commands_;
  bool stopping_ = false;
  int64_t next_id_ = 1;
  int64_t open_streams_ = 0;  // Opened and not yet finished (guarded by mu_).

  // The stream table: every open stream at the index OpenStream gave it
  // (from free_indices_ or next_index_, under mu_; Finish gives it back), so
  // that a command finds its stream without a hash lookup: by index, checked
  // against the id. Chunks of kStreamChunk streams, added as the indices
  // grow and never moved (rows and lists point into them); a free entry
  // has id 0. The scheduler thread's.
  static constexpr int kIndexBits = 23;
  static_assert(EngineConfig::kMaxSlots + EngineConfig::kMaxWaiting < (1 << kIndexBits));
  static constexpr uint32_t kStreamChunk = 1024;
  std::vector<std::unique_ptr<Stream[]>> stream_chunks_;
  std::vector<uint32_t> free_indices_;  // Guarded by mu_.
  uint32_t next_index_ = 0;             // Guarded by mu_.

  // Scheduler-thread state.
  WaitQueue waiting_[2];            // By WaitList.
  std::vector<Stream*> active_;     // Admitted (holding a slot).
  std::vector<Stream*> ready_;      // Admitted with a chunk or an end to process.
  std::vector<Stream*> ready_now_;  // Scratch: this tick's ready_.
  bool admission_blocked_ = false;  // The pool refused the last admission.
  std::vector<Row> rows_;           // This tick's cohort, reused every tick.
  // overlap_ticks: the previous tick's cohort, its forward and candidates'
  // copy (into host copy inflight_buffer_) enqueued and not yet decoded;
  // uploaded_ marks the end of the last staging copy, downloaded_[i] of the
  // candidates' copy into host copy i.
  bool overlap_ = false;
  std::vector<Row> inflight_;
  int inflight_buffer_ = 0;
  int next_buffer_ = 0;
  GpuEvent uploaded_;
  GpuEvent downloaded_[2];
  // decode_thread: the cohort before the one in flight, decoded from host
  // copy decoding_buffer_ on decode_thread_ (over decode_pool_) while the
  // scheduler thread runs the next tick. decode_busy_ (under decode_mu_) is
  // set by StartDecode and cleared by the decode thread; decoding_ and its
  // rows belong to the decode thread while it is set.
  std::vector<Row> decoding_;
  int decoding_buffer_ = 0;
  std::unique_ptr<ThreadPool> decode_pool_;
  std::thread decode_thread_;
  std::mutex decode_mu_;
  std::condition_variable decode_cv_;
  bool decode_busy_ = false;
  bool decode_stop_ = false;
  // Scratch views of rows_ for the batched calls that take spans.
  std::vector<int32_t> row_slots_;
  std::vector<decoder::DecoderState*> row_states_;
  std::vector<int32_t> row_frames_;
  std::vector<absl::Status> row_status_;
  std::vector<double> latencies_;  // Scratch: this tick's chunk latencies.
  std::thread thread_;
  std::thread::id thread_id_;
  // Front-end workers (null: inline). Declared last, so destroyed first:
  // its workers call FrontEndDone, which needs the command queue.
  std::unique_ptr<FrontEndPool> frontend_pool_;
};

}  // namespace oasr::scheduler
