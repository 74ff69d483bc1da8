#include "scheduler/engine.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"
#include "cache/pool_sizing.h"
#include "common/check.h"
#include "scheduler/cohort_decode.h"
#include "spdlog/spdlog.h"

namespace oasr::scheduler {

using Clock = std::chrono::steady_clock;

namespace {
double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Adds the nanoseconds since `start` to `counter` when destroyed.
class ScopedNanos {
 public:
  explicit ScopedNanos(std::atomic<int64_t>& counter) : counter_(counter), start_(Clock::now()) {}
  ~ScopedNanos() {
    counter_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_)
                           .count(),
                       std::memory_order_relaxed);
  }

 private:
  std::atomic<int64_t>& counter_;
  Clock::time_point start_;
};
}  // namespace

absl::Status EngineConfig::Validate() const {
  if (max_batch_size < 1 || max_batch_size > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_size: ", max_batch_size, " is outside [1, 65536]"));
  }
  if (max_waiting < 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_waiting: ", max_waiting, " is negative"));
  }
  if (max_wait_ms < 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_wait_ms: ", max_wait_ms, " is negative"));
  }
  if (max_num_blocks < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_num_blocks: ", max_num_blocks, " is negative (0 derives it)"));
  }
  if (max_blocks_per_seq < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_blocks_per_seq: ", max_blocks_per_seq, " must be at least 1"));
  }
  if (num_left_chunks < -2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_left_chunks: ", num_left_chunks, " is below -2 (-2 keeps the model's, -1 unlimited)"));
  }
  if (!(max_buffered_audio_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_buffered_audio_s: ", max_buffered_audio_s, " must be positive"));
  }
  if (frontend_threads < 0 || frontend_threads > kMaxFrontendThreads) {
    return absl::InvalidArgumentError(absl::StrCat("frontend_threads: ", frontend_threads,
                                                   " is outside [0, ", kMaxFrontendThreads,
                                                   "] (0 runs the front end inline)"));
  }
  return decoder.Validate();
}

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
  Clock::time_point time;
  std::vector<int16_t> audio;  // kAudio
  std::unique_ptr<Open> open;  // kOpen
  absl::Status error;          // kCancel: why (OK: the client left)
};

// One stream, owned by the scheduler thread. What every chunk reads comes
// first; what only opening and admission read (the decode options, behind a
// pointer) stays out of the way.
struct Engine::Stream {
  int64_t id = 0;
  int sample_rate = 16000;
  bool interim_results = true;
  bool admitted = false;
  bool queued = false;          // In ready_: has a chunk (or its end) to process.
  bool input_finished = false;  // EndAudio arrived (the front end may still be flushing).
  size_t active_index = 0;      // Position in active_ while admitted.
  size_t ready_index = 0;       // Position in ready_ while queued.
  int64_t chunks_done = 0;
  int64_t offset = 0;  // Encoder frames decoded.
  // The stream's pooled decoder state (owned by the CTC state pool) while admitted.
  cache::DecoderState* decoder_state = nullptr;
  // Shared with the front-end workers while they hold work of this stream.
  std::shared_ptr<StreamFrontEnd> frontend;
  std::shared_ptr<StreamShared> shared;
  std::optional<cache::StreamContext> context;   // Set while admitted.
  Clock::time_point last_audio;                  // Arrival of the latest audio command.
  std::optional<Clock::time_point> ready_since;  // When the next chunk's audio was complete.
  std::string last_partial;                      // Transcript of the last interim result sent.
  Clock::time_point opened;
  // The request's decode options until admission configures the decoder.
  std::unique_ptr<decoder::StreamOptions> decode;
};

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& config,
                                                       std::unique_ptr<StreamingModel> model,
                                                       std::unique_ptr<decoder::CtcDecoder> decoder) {
  if (absl::Status status = config.Validate(); !status.ok()) return status;
  if (model == nullptr || decoder == nullptr) {
    return absl::InvalidArgumentError("Engine::Create: model and decoder are required");
  }
  if (decoder->vocab_size() != model->geometry().vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("decoder units: ", decoder->vocab_size(), " units but the model has ",
                     model->geometry().vocab_size, " outputs"));
  }
  std::unique_ptr<Engine> engine(new Engine(config, std::move(model), std::move(decoder)));
  if (absl::Status status = engine->Init(); !status.ok()) return status;
  engine->thread_ = std::thread([e = engine.get()] { e->Loop(); });
  return engine;
}

Engine::Engine(const EngineConfig& config, std::unique_ptr<StreamingModel> model,
               std::unique_ptr<decoder::CtcDecoder> decoder)
    : config_(config), model_(std::move(model)), decoder_(std::move(decoder)) {}

absl::Status Engine::Init() {
  const ModelGeometry& g = model_->geometry();
  cache::CacheConfig c = model_->BaseCacheConfig();
  c.chunk_size = g.chunk_size;
  c.num_left_chunks = config_.num_left_chunks == -2 ? g.num_left_chunks : config_.num_left_chunks;
  c.block_size_frames = g.chunk_size;
  c.max_batch_size = config_.max_batch_size;
  c.max_blocks_per_seq = config_.max_blocks_per_seq;
  c.max_num_blocks = config_.max_num_blocks;
  c.host_pool_budget_bytes = static_cast<int64_t>(config_.cpu_pool_bytes);
  absl::StatusOr<cache::CacheConfig> resolved = cache::ResolveCacheConfig(c);
  if (!resolved.ok()) return resolved.status();
  cache_config_ = *resolved;

  absl::StatusOr<std::unique_ptr<cache::BlockPool>> pool = cache::BlockPool::Create(cache_config_);
  if (!pool.ok()) return pool.status();
  pool_ = std::move(*pool);
  slots_ = std::make_unique<cache::StreamSlotPool>(cache_config_.max_batch_size);
  absl::StatusOr<std::unique_ptr<cache::AttentionCacheManager>> attention =
      cache::AttentionCacheManager::Create(pool_.get());
  if (!attention.ok()) return attention.status();
  attention_ = std::move(*attention);
  absl::StatusOr<std::unique_ptr<cache::CnnCacheManager>> cnn =
      cache::CnnCacheManager::Create(cache_config_);
  if (!cnn.ok()) return cnn.status();
  cnn_ = std::move(*cnn);
  ctc_ = std::make_unique<cache::CtcStateCacheManager>(decoder_.get(), cache_config_.max_batch_size);
  if (config_.frontend_threads > 0) {
    frontend_pool_ = std::make_unique<FrontEndPool>(
        config_.frontend_threads, [this](int64_t id) { FrontEndDone(id); },
        &stats_.frontend_pool_ns);
  }

  stride_frames_ = g.StrideFrames();
  window_frames_ = g.WindowFrames(g.chunk_size);
  window_floats_ = static_cast<size_t>(window_frames_) * g.feature_dim;
  right_context_ = g.right_context;
  // With eviction a stream keeps only its window and is never at capacity
  // (AttentionCacheManager::AtCapacity), so the per-chunk check is skipped.
  check_capacity_ = !cache_config_.eviction_enabled();
  conv_row_shape_ = cnn_->CohortShape(1);
  conv_scratch_.assign(static_cast<size_t>(cache_config_.max_batch_size) * conv_row_shape_.numel(),
                       0.0f);
  log_probs_.assign(static_cast<size_t>(cache_config_.max_batch_size) * g.chunk_size * g.vocab_size,
                    0.0f);
  feats_.assign(static_cast<size_t>(cache_config_.max_batch_size) * window_floats_, 0.0f);
  rows_.reserve(cache_config_.max_batch_size);
  row_streams_.reserve(cache_config_.max_batch_size);
  row_ids_.reserve(cache_config_.max_batch_size);
  row_states_.reserve(cache_config_.max_batch_size);
  row_frames_.reserve(cache_config_.max_batch_size);
  row_status_.reserve(cache_config_.max_batch_size);
  row_results_.resize(cache_config_.max_batch_size);
  latencies_.reserve(cache_config_.max_batch_size);
  active_.reserve(cache_config_.max_batch_size);
  ready_.reserve(cache_config_.max_batch_size);
  ready_now_.reserve(cache_config_.max_batch_size);
  stats_.pool_blocks_total = cache_config_.max_num_blocks;
  // With eviction a stream keeps only its window, so its length has no
  // ceiling; without, max_stream_frames is where it ends with "length".
  spdlog::info(
      "engine: {} slots, chunk {} frames, left chunks {}, pool {} blocks ({:.1f} MiB), "
      "{} {:.1f} s, front end {}",
      cache_config_.max_batch_size, g.chunk_size, cache_config_.num_left_chunks,
      cache_config_.max_num_blocks, cache_config_.pool_bytes() / 1048576.0,
      cache_config_.eviction_enabled() ? "streams of any length, attention history"
                                       : "max stream",
      cache_config_.max_stream_seconds(),
      config_.frontend_threads > 0 ? absl::StrCat(config_.frontend_threads, " threads")
                                   : std::string("inline"));
  return absl::OkStatus();
}

Engine::~Engine() {
  Stop();
  // Joins the workers while the command queue they report to still exists;
  // their streams were closed by Stop, so nothing they finish is used.
  frontend_pool_.reset();
}

void Engine::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      if (!thread_.joinable()) return;
    }
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && std::this_thread::get_id() != thread_.get_id()) thread_.join();
}

absl::StatusOr<std::unique_ptr<EngineStream>> Engine::OpenStream(const StreamRequest& request,
                                                                 std::function<void()> notify) {
  if (request.sample_rate < 8000 || request.sample_rate > 48000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sample_rate_hertz: ", request.sample_rate, " is outside [8000, 48000]"));
  }
  if (absl::Status status = request.decode.Validate(); !status.ok()) return status;
  auto shared = std::make_shared<StreamShared>(std::move(notify));
  Command command;
  command.type = Command::Type::kOpen;
  command.time = Clock::now();
  command.open = std::make_unique<Command::Open>(Command::Open{shared, request});
  int64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("the engine is shutting down");
    const int64_t limit = int64_t{config_.max_batch_size} + config_.max_waiting;
    if (open_streams_ >= limit) {
      stats_.streams_refused.fetch_add(1, std::memory_order_relaxed);
      return absl::ResourceExhaustedError(absl::StrCat(
          "server at its stream limit: ", open_streams_, " streams open (", config_.max_batch_size,
          " decoding + ", config_.max_waiting, " waiting); retry later"));
    }
    ++open_streams_;
    id = next_id_++;
    command.stream_id = id;
    commands_.push_back(std::move(command));
  }
  cv_.notify_one();
  return std::unique_ptr<EngineStream>(
      new EngineStream(this, id, request.sample_rate, std::move(shared)));
}

void Engine::Enqueue(Command command) {
  command.time = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back(std::move(command));
  }
  cv_.notify_one();
}

absl::Status EngineStream::PushAudio(std::span<const int16_t> samples) {
  if (shared_->ended.load()) {
    return absl::FailedPreconditionError("audio after the end of the stream's audio");
  }
  const int64_t limit =
      static_cast<int64_t>(engine_->config_.max_buffered_audio_s * sample_rate_);
  const int64_t buffered = shared_->samples_pushed.load() - shared_->samples_consumed.load() +
                           static_cast<int64_t>(samples.size());
  if (buffered > limit) {
    absl::Status error = absl::ResourceExhaustedError(absl::StrCat(
        "audio buffer full: more than ", engine_->config_.max_buffered_audio_s,
        " s of audio waiting to be decoded (the client sends faster than the server decodes)"));
    shared_->ended = true;
    Engine::Command command;
    command.type = Engine::Command::Type::kCancel;
    command.stream_id = id_;
    command.error = error;
    engine_->Enqueue(std::move(command));
    return error;
  }
  shared_->samples_pushed.fetch_add(static_cast<int64_t>(samples.size()));
  Engine::Command command;
  command.type = Engine::Command::Type::kAudio;
  command.stream_id = id_;
  command.audio.assign(samples.begin(), samples.end());
  engine_->Enqueue(std::move(command));
  return absl::OkStatus();
}

absl::Status EngineStream::EndAudio() {
  if (shared_->ended.exchange(true)) {
    return absl::FailedPreconditionError("the stream's audio already ended");
  }
  Engine::Command command;
  command.type = Engine::Command::Type::kEnd;
  command.stream_id = id_;
  engine_->Enqueue(std::move(command));
  return absl::OkStatus();
}

void EngineStream::Cancel() {
  shared_->ended = true;
  Engine::Command command;
  command.type = Engine::Command::Type::kCancel;
  command.stream_id = id_;
  engine_->Enqueue(std::move(command));
}

void Engine::FrontEndDone(int64_t id) {
  Command command;
  command.type = Command::Type::kFrontEnd;
  command.stream_id = id;
  Enqueue(std::move(command));
}

void Engine::AssertSchedulerThread() const {
  OASR_CHECK(std::this_thread::get_id() == thread_id_,
             "cache managers, model and decoder belong to the scheduler thread");
}

void Engine::Loop() {
  thread_id_ = std::this_thread::get_id();
  std::vector<Command> commands;
  bool more_ready = false;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!more_ready) {
        // Sleep until a command arrives; waiting streams past their admission
        // window need no timer, since a slot only frees inside a tick.
        cv_.wait(lock, [this] { return stopping_ || !commands_.empty(); });
      }
      if (stopping_) break;
      commands.swap(commands_);
    }
    more_ready = Tick(commands);
    commands.clear();
  }
  // Stopping: every stream ends with "cancelled", including those whose
  // open command had not been handled yet.
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands.swap(commands_);
  }
  for (Command& command : commands) {
    if (command.type != Command::Type::kOpen) continue;
    StreamEvent event;
    event.finish = FinishReason::kCancelled;
    stats_.finished[static_cast<int>(FinishReason::kCancelled)].fetch_add(1);
    command.open->shared->ended = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --open_streams_;
    }
    command.open->shared->outbox.Push(std::move(event));
  }
  std::vector<Stream*> all;
  all.reserve(streams_.size());
  for (auto& [id, s] : streams_) all.push_back(s.get());
  for (Stream* s : all) Finish(*s, FinishReason::kCancelled);
}

bool Engine::Tick(std::vector<Command>& commands) {
  AssertSchedulerThread();
  ScopedNanos timer(stats_.tick_ns);
  stats_.ticks.fetch_add(1, std::memory_order_relaxed);
  for (Command& command : commands) Handle(command);
  Admit();
  RunCohort();
  UpdateGauges();
  return HasReadyWork();
}

void Engine::Handle(Command& command) {
  if (command.type == Command::Type::kOpen) {
    auto s = std::make_unique<Stream>();
    StreamRequest& request = command.open->request;
    s->id = command.stream_id;
    s->sample_rate = request.sample_rate;
    s->interim_results = request.interim_results;
    s->decode = std::make_unique<decoder::StreamOptions>(std::move(request.decode));
    s->shared = std::move(command.open->shared);
    s->opened = command.time;
    s->last_audio = command.time;
    absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> frontend =
        model_->CreateFrontEnd(s->sample_rate);
    Stream& ref = *s;
    streams_[s->id] = std::move(s);
    if (!frontend.ok()) {
      Finish(ref, FinishReason::kError, frontend.status());
      return;
    }
    ref.frontend =
        std::make_shared<StreamFrontEnd>(std::move(*frontend), frontend_pool_.get(), ref.id);
    waiting_.push_back(&ref);
    return;
  }
  auto it = streams_.find(command.stream_id);
  if (it == streams_.end()) return;  // Already finished: late audio or a second cancel.
  Stream& s = *it->second;
  switch (command.type) {
    case Command::Type::kAudio: {
      if (s.input_finished) return;
      absl::Status status;
      if (frontend_pool_ == nullptr) {
        ScopedNanos timer(stats_.frontend_ns);
        status = s.frontend->Push(std::move(command.audio));
      } else {
        status = s.frontend->Push(std::move(command.audio));  // Queued for a worker.
      }
      if (!status.ok()) {
        Finish(s, FinishReason::kError, status);
        return;
      }
      s.last_audio = command.time;
      if (!s.ready_since.has_value() && ChunkReady(s)) s.ready_since = command.time;
      MarkReady(s);
      return;
    }
    case Command::Type::kEnd: {
      s.input_finished = true;
      absl::Status status;
      {
        ScopedNanos timer(stats_.frontend_ns);
        status = s.frontend->End();
      }
      if (!status.ok()) {
        Finish(s, FinishReason::kError, status);
        return;
      }
      if (!s.ready_since.has_value()) s.ready_since = command.time;
      MarkReady(s);
      return;
    }
    case Command::Type::kFrontEnd: {
      // A worker published features (or the end, or a failure).
      absl::Status status = s.frontend->error();
      if (!status.ok()) {
        Finish(s, FinishReason::kError, status);
        return;
      }
      if (!s.ready_since.has_value() && (ChunkReady(s) || s.frontend->flushed())) {
        s.ready_since = s.last_audio;
      }
      MarkReady(s);
      return;
    }
    case Command::Type::kCancel:
      Finish(s, command.error.ok() ? FinishReason::kCancelled : FinishReason::kError,
             command.error);
      return;
    case Command::Type::kOpen:
      return;
  }
}

void Engine::Admit() {
  if (waiting_.empty() || slots_->num_free() == 0) return;
  // Streams past their admission window go first, oldest first; the rest by
  // the most buffered audio, so a cohort fills with streams that can run now.
  const Clock::time_point now = Clock::now();
  const auto window = std::chrono::duration<double, std::milli>(config_.max_wait_ms);
  std::stable_sort(waiting_.begin(), waiting_.end(), [&](const Stream* a, const Stream* b) {
    const bool a_late = now - a->opened >= window;
    const bool b_late = now - b->opened >= window;
    if (a_late != b_late) return a_late;
    if (a_late) return a->opened < b->opened;
    return a->frontend->NumFramesReady() > b->frontend->NumFramesReady();
  });
  cache::CacheManagers managers{slots_.get(), attention_.get(), cnn_.get(), nullptr, ctc_.get()};
  admission_blocked_ = false;
  while (!waiting_.empty() && slots_->num_free() > 0) {
    Stream& s = *waiting_.front();
    absl::StatusOr<cache::StreamContext> context =
        cache::StreamContext::Allocate(s.id, managers, /*gpu_stream=*/nullptr);
    if (!context.ok()) {
      if (context.status().code() == absl::StatusCode::kResourceExhausted) {
        admission_blocked_ = true;  // Retried when a stream finishes.
        break;
      }
      waiting_.pop_front();
      Finish(s, FinishReason::kError, context.status());
      continue;
    }
    waiting_.pop_front();
    s.context.emplace(std::move(*context));
    absl::StatusOr<cache::StreamHandle> handle = s.context->GetDecoder();
    absl::Status configured =
        handle.ok() ? decoder_->ConfigureStream(handle->state(), *s.decode) : handle.status();
    if (handle.ok()) s.decoder_state = &handle->state();
    s.decode.reset();
    s.admitted = true;
    s.active_index = active_.size();
    active_.push_back(&s);
    stats_.queue_time_s.Observe(SecondsSince(s.opened));
    if (!configured.ok()) {
      Finish(s, FinishReason::kError, configured);
      continue;
    }
    MarkReady(s);
  }
}

int64_t Engine::ChunkFrames(const Stream& s) const {
  const int64_t available = s.frontend->NumFramesReady() - s.chunks_done * stride_frames_;
  if (available >= window_frames_) return window_frames_;
  return available > right_context_ && s.frontend->flushed() ? available : 0;
}

void Engine::MarkReady(Stream& s) {
  // A chunk to run, or the end of the audio with none left (drained: the
  // next tick finishes it).
  if (s.admitted && !s.queued && (ChunkReady(s) || s.frontend->flushed())) {
    s.queued = true;
    s.ready_index = ready_.size();
    ready_.push_back(&s);
  }
}

bool Engine::HasReadyWork() const {
  if (!ready_.empty()) return true;
  return !waiting_.empty() && slots_->num_free() > 0 && !admission_blocked_;
}

void Engine::RunCohort() {
  const ModelGeometry& g = model_->geometry();
  rows_.clear();
  row_streams_.clear();
  row_ids_.clear();
  // Only streams with something to do are visited: idle ones cost nothing.
  // Finish() edits ready_, so this tick works on a swapped-out copy. One
  // pass picks the cohort and lays out each row (window, offset, conv state).
  ready_now_.swap(ready_);
  for (Stream* sp : ready_now_) {
    Stream& s = *sp;
    s.queued = false;
    const int64_t frames = ChunkFrames(s);
    if (frames == 0) {
      // No chunk: drained after the end of the audio, or not ready after all.
      if (s.frontend->flushed()) Finish(s, FinishReason::kStop);
      continue;
    }
    if (check_capacity_) {
      absl::StatusOr<bool> full = s.context->AtCapacity();
      if (full.ok() && *full) {
        // The ceiling: the stream ends cleanly with the transcript so far.
        Finish(s, FinishReason::kLength);
        continue;
      }
    }
    CohortRow& row = rows_.emplace_back();
    row.context = &*s.context;
    row.feat_frames = frames;
    row.offset = s.offset;
    row.out_frames = g.OutputFrames(row.feat_frames);
    row.conv_state = ConvScratch(rows_.size() - 1);
    // By the context's slot: the conv states are slot-addressed, so this
    // needs no stream-id lookup (the context holds the slot while admitted).
    const int32_t slot = s.context->slot();
    absl::Status conv = cnn_->states().Gather(0, {&slot, 1}, row.conv_state, nullptr);
    OASR_CHECK(conv.ok(), std::string(conv.message()));
    row_streams_.push_back(&s);
    row_ids_.push_back(s.id);
  }
  ready_now_.clear();
  if (rows_.empty()) return;

  absl::Status prepared = attention_->PrepareChunksBatched(row_ids_);
  if (!prepared.ok()) {
    // The pool cannot serve the whole cohort: serve who it can, one by one;
    // a stream that cannot get a block ends at its memory ceiling ("length").
    // A kept row keeps its conv scratch (rows never share one).
    size_t kept = 0;
    for (size_t b = 0; b < rows_.size(); ++b) {
      Stream* s = row_streams_[b];
      if (s->context->PrepareChunk().ok()) {
        row_streams_[kept] = s;
        rows_[kept++] = rows_[b];
      } else {
        Finish(*s, FinishReason::kLength);
      }
    }
    row_streams_.resize(kept);
    rows_.resize(kept);
    if (kept == 0) return;
    // Each PrepareChunk made the cohort its one stream; make it the kept
    // rows again, in row order, for what reads the cohort (a paged attention
    // kernel). Their blocks are reserved already, so this allocates nothing
    // and cannot fail. (CacheConfig caps every stream at its share of the
    // pool, so this path is a safeguard, not a state a tick reaches.)
    row_ids_.clear();
    for (const Stream* s : row_streams_) row_ids_.push_back(s->id);
    absl::Status again = attention_->PrepareChunksBatched(row_ids_);
    OASR_CHECK(again.ok(), std::string(again.message()));
  }
  const size_t n = rows_.size();

  // Each row's feature window, copied from the front end's published frames
  // into the cohort's packed buffer; the frames before it (the previous
  // chunk's only) are forgotten first.
  {
    ScopedNanos timer(stats_.frontend_ns);
    for (size_t b = 0; b < n; ++b) {
      Stream& s = *row_streams_[b];
      CohortRow& row = rows_[b];
      const int64_t start = s.chunks_done * stride_frames_;
      float* feats = feats_.data() + b * window_floats_;
      s.frontend->DiscardFramesBefore(start);
      absl::Status got = s.frontend->GetFrames(start, row.feat_frames, feats);
      OASR_CHECK(got.ok(), std::string(got.message()));
      row.feats = feats;
    }
  }
  stats_.batch_size.Observe(static_cast<double>(n));

  absl::Status forward;
  {
    ScopedNanos timer(stats_.model_ns);
    forward = model_->ForwardCohort(rows_, log_probs_.data());
  }
  if (!forward.ok()) {
    spdlog::error("cohort forward of {} streams failed: {}", n, forward.ToString());
    for (Stream* s : row_streams_) Finish(*s, FinishReason::kError, forward);
    return;
  }

  // Commit every row; a row whose commit fails is left out of the decode.
  row_states_.resize(n);
  row_frames_.resize(n);
  row_commit_.resize(n);
  row_status_.resize(n);
  for (size_t b = 0; b < n; ++b) {
    Stream& s = *row_streams_[b];
    row_commit_[b] = s.context->CommitChunkPaged(rows_[b].out_frames);
    if (row_commit_[b].ok()) {
      const int32_t slot = s.context->slot();
      row_commit_[b] = cnn_->states().Scatter(0, {&slot, 1}, rows_[b].conv_state, nullptr);
    }
    row_states_[b] = row_commit_[b].ok() ? s.decoder_state : nullptr;
    row_frames_[b] = static_cast<int32_t>(rows_[b].out_frames);
  }
  {
    // One batched decode for the cohort, then every row's results (reading
    // them is the decoder's work too).
    ScopedNanos timer(stats_.decode_ns);
    DecodeCohort(*decoder_, row_states_, row_frames_, log_probs_.data(), g.chunk_size, row_status_);
    for (size_t b = 0; b < n; ++b) {
      if (!row_commit_[b].ok()) row_status_[b] = std::move(row_commit_[b]);
      if (!row_status_[b].ok()) continue;
      RowResults& r = row_results_[b];
      cache::DecoderState& state = *row_states_[b];
      r.finals = decoder_->TakeFinalResults(state);
      r.status = decoder_->GetStatus(state);
      r.partial.reset();
      if (row_streams_[b]->interim_results && !r.status.finished) {
        r.partial = decoder_->PartialResult(state);
      }
    }
  }
  const Clock::time_point now = Clock::now();
  latencies_.clear();
  int64_t decoded = 0, out_frames = 0;
  for (size_t b = 0; b < n; ++b) {
    if (row_status_[b].ok()) {
      ++decoded;
      out_frames += rows_[b].out_frames;
    }
    AfterChunk(b, now);  // May finish the row's stream.
  }
  if (!latencies_.empty()) stats_.chunk_latency_s.Observe(latencies_);
  stats_.chunks_processed.fetch_add(decoded, std::memory_order_relaxed);
  stats_.audio_ms_processed.fetch_add(
      static_cast<int64_t>(out_frames * decoder_->config().frame_shift_ms),
      std::memory_order_relaxed);
}

void Engine::AfterChunk(size_t row, Clock::time_point now) {
  Stream& s = *row_streams_[row];
  if (!row_status_[row].ok()) {
    Finish(s, FinishReason::kError, std::move(row_status_[row]));
    return;
  }
  ++s.chunks_done;
  s.offset += rows_[row].out_frames;
  // Input-rate samples whose frames are now decoded (for the audio bound).
  const int64_t consumed = s.chunks_done * stride_frames_ * 160 * s.sample_rate / 16000;
  s.shared->samples_consumed.store(
      std::min(consumed, s.shared->samples_pushed.load(std::memory_order_relaxed)),
      std::memory_order_relaxed);
  if (s.ready_since.has_value()) {
    latencies_.push_back(std::chrono::duration<double>(now - *s.ready_since).count());
    s.ready_since.reset();
  }
  if (ChunkReady(s)) s.ready_since = s.last_audio;
  MarkReady(s);  // Already has the next chunk (a client ahead of real time) or its end.

  RowResults& r = row_results_[row];
  if (r.status.finished) {
    // single_utterance: the first endpoint ends the stream.
    Finish(s, FinishReason::kEndpoint, absl::OkStatus(), std::move(r.finals));
    return;
  }
  // An event only when there is something to say: a final result, or an
  // interim one whose transcript changed.
  const bool finals = !r.finals.empty();
  if (finals) s.last_partial.clear();
  bool partial = false;
  if (r.partial.has_value()) {
    // Both arms lvalues, so the transcript is compared in place, not copied.
    static const std::string kNone;
    const std::string& text = r.partial->nbest.empty() ? kNone : r.partial->nbest[0].transcript;
    if (text != s.last_partial) {
      s.last_partial = text;
      partial = true;
    }
  }
  if (!finals && !partial) return;
  StreamEvent event;
  event.results = std::move(r.finals);
  if (partial) event.results.push_back(std::move(*r.partial));
  event.audio_processed_s = s.offset * decoder_->config().frame_shift_ms / 1000.0;
  s.shared->outbox.Push(std::move(event));
}

void Engine::Finish(Stream& s, FinishReason reason, absl::Status error,
                    std::vector<decoder::DecodeResult> results) {
  StreamEvent event;
  event.results = std::move(results);
  event.finish = reason;
  event.error = std::move(error);
  event.audio_processed_s = s.offset * decoder_->config().frame_shift_ms / 1000.0;
  if (s.context.has_value()) {
    absl::StatusOr<cache::StreamHandle> handle = s.context->GetDecoder();
    if (handle.ok()) {
      cache::DecoderState& state = handle->state();
      if (reason == FinishReason::kStop || reason == FinishReason::kLength ||
          reason == FinishReason::kEndpoint) {
        // The transcript so far becomes final (a no-op after an endpoint).
        (void)handle->FinalizeStream();
      }
      for (decoder::DecodeResult& r : decoder_->TakeFinalResults(state)) {
        event.results.push_back(std::move(r));
      }
    }
    absl::Status freed = s.context->Free();
    OASR_CHECK(freed.ok(), std::string(freed.message()));
    s.context.reset();
  }
  // Work a front-end worker still holds is dropped; the worker frees the
  // pipeline if it lets go last.
  if (s.frontend != nullptr) s.frontend->Close();
  // Swap-removes: neither ready_'s nor active_'s order carries meaning (a
  // cohort's rows may come in any order), and a burst of cancellations stays
  // linear.
  if (s.queued) {
    Stream* last = ready_.back();
    ready_[s.ready_index] = last;
    last->ready_index = s.ready_index;
    ready_.pop_back();
  }
  if (s.admitted) {
    Stream* last = active_.back();
    active_[s.active_index] = last;
    last->active_index = s.active_index;
    active_.pop_back();
  } else {
    auto it = std::find(waiting_.begin(), waiting_.end(), &s);
    if (it != waiting_.end()) waiting_.erase(it);
  }
  stats_.finished[static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
  admission_blocked_ = false;  // Its blocks and slot are free again.
  s.shared->ended = true;
  {
    // Before the last event: its reader may open a stream at once, and must
    // find this one's place free.
    std::lock_guard<std::mutex> lock(mu_);
    --open_streams_;
  }
  s.shared->outbox.Push(std::move(event));
  streams_.erase(s.id);  // Destroys s.
}

TensorView Engine::ConvScratch(size_t row) {
  return TensorView(conv_scratch_.data() + row * conv_row_shape_.numel(), DType::kFloat32,
                    conv_row_shape_, Device::Cpu());
}

void Engine::UpdateGauges() {
  stats_.streams_active = static_cast<int64_t>(active_.size());
  stats_.streams_waiting = static_cast<int64_t>(waiting_.size());
  stats_.pool_blocks_used = cache_config_.max_num_blocks - pool_->num_free_blocks();
}

}  // namespace oasr::scheduler
