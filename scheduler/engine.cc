#include "scheduler/engine.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "cache/pool_sizing.h"
#include "common/check.h"
#include "common/prefetch.h"
#include "common/thread_name.h"
#include "encoder/pcm_source.h"
#include "kernels/softmax.h"
#include "scheduler/cohort_decode.h"
#include "scheduler/engine_internal.h"
#include "scheduler/nbest_rescoring.h"
#include "spdlog/spdlog.h"

namespace oasr::scheduler {

absl::Status EngineConfig::Validate() const {
  if (max_batch_size < 1 || max_batch_size > kMaxSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_size: ", max_batch_size, " is outside [1, ", kMaxSlots, "]"));
  }
  if (max_cohort_rows < 0 || max_cohort_rows > kMaxCohortRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_cohort_rows: ", max_cohort_rows, " is outside [0, ", kMaxCohortRows,
                     "] (0: max_batch_size, at most ", kDefaultCohortRows, ")"));
  }
  if (max_waiting < 0 || max_waiting > kMaxWaiting) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_waiting: ", max_waiting, " is outside [0, ", kMaxWaiting, "]"));
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
  if (!(rescoring_max_segment_s > 0 && rescoring_max_segment_s <= 3600)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rescoring_max_segment_s: ", rescoring_max_segment_s, " is outside (0, 3600]"));
  }
  if (!(rescoring_memory_mib >= 0 && rescoring_memory_mib <= 1 << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rescoring_memory_mib: ", rescoring_memory_mib, " is outside [0, 2^24]"));
  }
  if (frontend_threads < 0 || frontend_threads > kMaxFrontendThreads) {
    return absl::InvalidArgumentError(absl::StrCat("frontend_threads: ", frontend_threads,
                                                   " is outside [0, ", kMaxFrontendThreads,
                                                   "] (0 runs the front end inline)"));
  }
  return decoder.Validate();
}

absl::StatusOr<EngineConfig::FrontEnd> ParseFrontEnd(std::string_view name) {
  using FrontEnd = EngineConfig::FrontEnd;
  if (name == "auto") return FrontEnd::kAuto;
  if (name == "host") return FrontEnd::kHost;
  if (name == "device") return FrontEnd::kDevice;
  return absl::InvalidArgumentError(
      absl::StrCat("front end: \"", std::string(name), "\" is none of auto, host, device"));
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(
    const EngineConfig& config, std::unique_ptr<StreamingModel> model,
    std::unique_ptr<decoder::CtcDecoder> decoder,
    std::unique_ptr<encoder::AttentionRescorer> rescorer) {
  if (absl::Status status = config.Validate(); !status.ok()) return status;
  if (model == nullptr || decoder == nullptr) {
    return absl::InvalidArgumentError("Engine::Create: model and decoder are required");
  }
  if (decoder->vocab_size() != model->geometry().vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("decoder units: ", decoder->vocab_size(),
                                                   " units but the model has ",
                                                   model->geometry().vocab_size, " outputs"));
  }
  if (rescorer != nullptr && rescorer->encoder_dim() != model->geometry().encoder_dim) {
    return absl::InvalidArgumentError(absl::StrCat("attention rescorer: encoder width ",
                                                   rescorer->encoder_dim(), " but the model's is ",
                                                   model->geometry().encoder_dim));
  }
  std::unique_ptr<Engine> engine(new Engine(config, std::move(model), std::move(decoder)));
  // Rescoring needs the beam's n-best; the greedy search has one hypothesis.
  if (config.attention_rescoring && config.decoder.method == decoder::SearchMethod::kPrefixBeam) {
    engine->rescorer_ = std::move(rescorer);
  }
  if (absl::Status status = engine->Init(); !status.ok()) return status;
  engine->thread_ = std::thread([e = engine.get()] {
    SetThreadName("oasr-scheduler");
    e->Loop();
  });
  return engine;
}

Engine::Engine(const EngineConfig& config, std::unique_ptr<StreamingModel> model,
               std::unique_ptr<decoder::CtcDecoder> decoder)
    : config_(config), model_(std::move(model)), decoder_(std::move(decoder)) {}

absl::Status Engine::Init() {
  const ModelGeometry& g = model_->geometry();
  ctx_ = &model_->context();
  frame_shift_ms_ = g.FrameShiftMs();
  if (std::abs(decoder_->config().frame_shift_ms - frame_shift_ms_) > 1e-3) {
    return absl::InvalidArgumentError(
        absl::StrCat("decoder frame_shift_ms: ", decoder_->config().frame_shift_ms,
                     " but the model's frames are ", frame_shift_ms_, " ms (", g.feature_shift_ms,
                     " ms features x ", g.subsampling, " subsampling)"));
  }
  samples_per_feature_frame_ = g.feature_shift_ms / 1000.0;
  stride_frames_ = g.StrideFrames();
  window_frames_ = g.WindowFrames(g.chunk_size);
  right_context_ = g.right_context;
  const int slots = config_.max_batch_size;
  cohort_rows_ = config_.max_cohort_rows > 0 ? std::min(config_.max_cohort_rows, slots)
                                             : std::min(slots, EngineConfig::kDefaultCohortRows);
  const int rows = cohort_rows_;

  // What every tick needs at fixed addresses first (the workspace, the plan
  // staging, the log-probs and the decoder's candidates, all for the widest
  // cohort), then the pool from what memory is left.
  const int k = decoder_->candidates_per_frame();
  const bool overlap_wanted =
      config_.overlap_ticks && rescorer_ == nullptr && (ctx_->is_cuda() || config_.overlap_on_cpu);
  if (config_.pruned_decode && k <= kernels::kMaxTopK) {
    absl::StatusOr<CohortCandidates> candidates =
        CohortCandidates::Create(rows, g.chunk_size, k, decoder_->config().search.blank_id,
                                 ctx_->device(), /*host_copies=*/overlap_wanted);
    if (!candidates.ok()) return candidates.status();
    candidates_.emplace(std::move(*candidates));
  }
  // Whole log-probs are staged through the host workspace only without them.
  const size_t host_bytes =
      ctx_->is_cuda() && !candidates_.has_value()
          ? static_cast<size_t>(rows) * g.chunk_size * g.vocab_size * sizeof(float) +
                Arena::kAlignment
          : 0;
  if (absl::Status s = ctx_->ReserveWorkspace(model_->WorkspaceBytes(rows), host_bytes); !s.ok()) {
    return s;
  }
  using FrontEnd = EngineConfig::FrontEnd;
  if (config_.front_end == FrontEnd::kDevice && !model_->has_device_front_end()) {
    return absl::InvalidArgumentError("front_end: kDevice, but the model has no device front end");
  }
  device_front_end_ =
      config_.front_end == FrontEnd::kDevice ||
      (config_.front_end == FrontEnd::kAuto && ctx_->is_cuda() && model_->has_device_front_end());
  const int64_t pcm_stride =
      device_front_end_ ? encoder::PcmSource::WindowSamples(window_frames_) : 0;
  pcm_ring_ = device_front_end_ && config_.frontend_threads > 0 && config_.pcm_rings;
  if (pcm_ring_) {
    // A lane holds the chunk in flight's window and the next chunk's: a
    // stream's front end can always complete its next chunk meanwhile. One
    // lane more than slots, for the padding lane's slot (never read). 16
    // bits a sample: half the bytes the device reads over the bus a row.
    constexpr encoder::RowLayout kRows = encoder::PcmSource::kLayout;
    const int64_t ring_rows = kRows.WindowRows(window_frames_) + kRows.FirstRow(stride_frames_);
    const Shape shape{int64_t{slots} + 1, ring_rows, kRows.width};
    absl::StatusOr<Tensor> rings = ctx_->is_cuda() ? Tensor::EmptyPinned(shape, DType::kInt16)
                                                   : Tensor::Empty(shape, DType::kInt16);
    if (!rings.ok()) return rings.status();
    pcm_rings_ = std::move(*rings);
    ZeroTensor(pcm_rings_.view());
  }
  absl::StatusOr<std::unique_ptr<CohortStaging>> staging = CohortStaging::Create(
      rows, window_frames_, g.feature_dim, ctx_->device(), pcm_stride, pcm_ring_);
  if (!staging.ok()) return staging.status();
  staging_ = std::move(*staging);
  absl::StatusOr<Tensor> log_probs =
      Tensor::Empty({rows, g.chunk_size, g.vocab_size}, DType::kFloat32, ctx_->device());
  if (!log_probs.ok()) return log_probs.status();
  log_probs_ = std::move(*log_probs);
  if (rescorer_ != nullptr) {
    absl::StatusOr<Tensor> encoder_out =
        Tensor::Empty({rows, g.chunk_size, g.encoder_dim}, DType::kFloat32, ctx_->device());
    if (!encoder_out.ok()) return encoder_out.status();
    encoder_out_ = std::move(*encoder_out);
    SegmentMemoryOptions m;
    m.slots = slots;
    m.max_frames = rescorer_->options().max_frames;
    m.dim = g.encoder_dim;
    m.block_frames = g.chunk_size;
    m.pool_frames = static_cast<int64_t>(config_.rescoring_memory_mib * 1048576.0 /
                                         (static_cast<double>(g.encoder_dim) * sizeof(float)));
    m.max_runs = std::max<int64_t>(4096, 2 * int64_t{rows});
    absl::StatusOr<SegmentMemory> memory = SegmentMemory::Create(m, ctx_);
    if (!memory.ok()) return memory.status();
    segment_memory_.emplace(std::move(*memory));
    absl::StatusOr<Tensor> segment = Tensor::Empty(
        {rescorer_->options().max_batch_frames, g.encoder_dim}, DType::kFloat32, ctx_->device());
    if (!segment.ok()) return segment.status();
    segment_ = std::move(*segment);
  }

  cache::CacheConfig c = model_->BaseCacheConfig();
  c.chunk_size = g.chunk_size;
  c.num_left_chunks = config_.num_left_chunks == -2 ? g.num_left_chunks : config_.num_left_chunks;
  c.block_size_frames = g.chunk_size;
  // Only a stream's last chunk is short (ChunkFrames): no partly filled block.
  c.full_chunks = true;
  c.max_batch_size = slots;
  c.max_blocks_per_seq = config_.max_blocks_per_seq;
  c.max_num_blocks = config_.max_num_blocks;
  c.host_pool_budget_bytes = static_cast<int64_t>(config_.cpu_pool_bytes);
  absl::StatusOr<cache::CacheConfig> resolved = cache::ResolveCacheConfig(c);
  if (!resolved.ok()) return resolved.status();
  cache_config_ = *resolved;
  // CUDA graphs pad cohorts with one padding lane: a slot past the streams'
  // whose block-table row names only the pool's scratch block.
  const int pad_lanes = ctx_->is_cuda() && config_.cuda_graphs ? 1 : 0;
  absl::StatusOr<std::unique_ptr<cache::BlockPool>> pool =
      cache::BlockPool::Create(cache_config_, /*scratch_blocks=*/pad_lanes);
  if (!pool.ok()) return pool.status();
  pool_ = std::move(*pool);
  slots_ = std::make_unique<cache::StreamSlotPool>(slots, pad_lanes);
  absl::StatusOr<std::unique_ptr<cache::AttentionCacheManager>> attention =
      cache::AttentionCacheManager::Create(pool_.get(), pad_lanes);
  if (!attention.ok()) return attention.status();
  attention_ = std::move(*attention);
  if (pad_lanes > 0) pad_slot_ = attention_->pad_lane_slot(0);
  absl::StatusOr<std::unique_ptr<cache::SlotStateCache>> states =
      cache::SlotStateCache::Create(model_->StreamStates(), slots + pad_lanes, ctx_->device());
  if (!states.ok()) return states.status();
  states_ = std::move(*states);
  for (int i = 0; i < states_->num_specs(); ++i) state_views_.push_back(states_->buffer(i));
  decoder_states_ = std::make_unique<decoder::DecoderStatePool>(decoder_.get(), slots);
  if (config_.frontend_threads > 0) {
    frontend_pool_ = std::make_unique<FrontEndPool>(
        config_.frontend_threads, [this](int64_t id) { FrontEndDone(id); },
        &stats_.frontend_pool_ns);
  }
  // With eviction a stream keeps only its window and is never at capacity
  // (AttentionCacheManager::AtCapacity), so the per-chunk check is skipped.
  check_capacity_ = !cache_config_.eviction_enabled();
  rows_.reserve(rows);
  row_slots_.reserve(rows);
  row_states_.reserve(rows);
  row_frames_.reserve(rows);
  row_status_.reserve(rows);
  latencies_.reserve(rows);
  active_.reserve(slots);
  ready_.reserve(slots);
  ready_now_.reserve(slots);
  stats_.pool_blocks_total = cache_config_.max_num_blocks;
  stats_.pool_bytes = static_cast<int64_t>(cache_config_.pool_bytes());
  overlap_ = overlap_wanted && candidates_.has_value();
  inflight_.reserve(rows);
  if (overlap_ && config_.decode_thread) {
    decoding_.reserve(rows);
    decode_pool_ = std::make_unique<ThreadPool>(ctx_->threads().threads());
    decode_thread_ = std::thread([this] {
      SetThreadName("oasr-decode");
      DecodeLoop();
    });
    stats_.decode_off_thread = true;
  }
  if (pad_slot_ >= 0) {
    if (absl::Status s = CaptureGraphs(); !s.ok()) return s;
  }
  LogConfiguration();
  return absl::OkStatus();
}

absl::Status Engine::CaptureGraphs() {
  const auto start = Clock::now();
  graph_widths_ = GraphLadder(cohort_rows_);
  GpuStream stream = ctx_->stream();
  int nodes = 0;
  for (int width : graph_widths_) {
    // Padding rows only, so neither the warm-up nor a replay of the capture
    // moves any stream; the warm-up makes every lazily built plan (cuBLASLt
    // algorithms) before the capture, which must not synchronise.
    StagePadRows(0, width);
    attention_->UpdateDeviceMirror(stream);
    if (absl::Status s = staging_->Upload(width, stream); !s.ok()) return s;
    const CohortPlan plan = Plan(width);
    if (absl::Status s = EnqueueForward(plan); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("CUDA graph warm-up of ", width, " rows: ", s.message()));
    }
    absl::StatusOr<CudaGraph> graph =
        CudaGraph::Capture(stream, [&] { return EnqueueForward(plan); });
    if (!graph.ok()) {
      return absl::Status(graph.status().code(), absl::StrCat("CUDA graph capture of ", width,
                                                              " rows: ", graph.status().message(),
                                                              " (--no-cuda-graphs runs eagerly)"));
    }
    nodes += graph->num_nodes();
    graphs_.push_back(std::move(*graph));
  }
  if (absl::Status s = ctx_->Synchronize(); !s.ok()) return s;
  spdlog::info(
      "captured {} CUDA graphs of the cohort forward (widths 1 to {}, {} nodes) in {:.0f} ms",
      graphs_.size(), cohort_rows_, nodes,
      std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  return absl::OkStatus();
}

void Engine::LogConfiguration() const {
  const ModelGeometry& g = model_->geometry();
  // With eviction a stream keeps only its retained window (what attention
  // sees), so streams have no length ceiling; without, max_stream_frames is
  // where a stream ends with "length".
  const std::string history =
      cache_config_.eviction_enabled()
          ? absl::StrCat("streams of any length, attention history ",
                         FramesToSeconds(cache_config_.retained_frames()), " s")
          : absl::StrCat("max stream ", cache_config_.max_stream_seconds(), " s");
  spdlog::info(
      "engine on {}: {} slots, cohorts of up to {} rows, chunk {} frames ({} ms), left chunks "
      "{}, pool {} blocks ({:.1f} MiB {}), {}, front end {}{}",
      ctx_->Describe(), cache_config_.max_batch_size, cohort_rows_, g.chunk_size,
      g.chunk_size * frame_shift_ms_, cache_config_.num_left_chunks, cache_config_.max_num_blocks,
      cache_config_.pool_bytes() / 1048576.0, DTypeName(cache_config_.dtype), history,
      config_.frontend_threads > 0 ? absl::StrCat(config_.frontend_threads, " threads")
                                   : std::string("inline"),
      device_front_end_ ? " (resampling; fbank and CMVN on the model's device)" : "");
  if (pcm_ring_) {
    spdlog::info("PCM rings: {} rows of 5 ms a slot, {:.1f} MiB {}", pcm_rings_.dim(1),
                 pcm_rings_.nbytes() / 1048576.0,
                 ctx_->is_cuda() ? "page-locked, read by the device" : "on the host");
  }
  if (overlap_) {
    spdlog::info("ticks overlap: each cohort is decoded while the next one computes{}",
                 decode_pool_ != nullptr
                     ? absl::StrCat(", on a decode thread (", decode_pool_->threads(), " threads)")
                     : std::string());
  }
  if (rescorer_ != nullptr) {
    const encoder::AttentionDecoderConfig& d = rescorer_->config();
    spdlog::info(
        "attention rescoring: {} decoder ({} + {} blocks), ctc_weight {}, reverse_weight {}, "
        "rescoring_weight {}, segments up to {} s, their encoder output in a pool of {:.1f} MiB "
        "on {} ({} blocks of {} frames)",
        d.bidirectional ? "bitransformer" : "transformer", d.num_blocks, d.r_num_blocks,
        d.rescoring.ctc_weight, d.rescoring.reverse_weight, d.rescoring.rescoring_weight,
        FramesToSeconds(segment_memory_->max_frames()),
        static_cast<double>(segment_memory_->pool_bytes()) / 1048576.0, ctx_->device().ToString(),
        segment_memory_->blocks_total(), g.chunk_size);
  }
}

Engine::~Engine() {
  Stop();
  if (decode_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(decode_mu_);
      decode_stop_ = true;
    }
    decode_cv_.notify_all();
    decode_thread_.join();
  }
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
    return absl::InvalidArgumentError(
        absl::StrCat("sample_rate_hertz: ", request.sample_rate, " is outside [8000, 48000]"));
  }
  if (absl::Status status = request.decode.Validate(); !status.ok()) return status;
  auto shared = std::make_shared<StreamShared>(std::move(notify));
  absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> pipeline;
  if (frontend_pool_ != nullptr) {
    // The front end is made here (the model's factories are const), so the
    // stream's audio goes from PushAudio straight to the workers. A failure
    // is the scheduler's to report, as without workers.
    pipeline = CreatePipeline(request.sample_rate);
  }
  Command command;
  command.type = Command::Type::kOpen;
  command.time = Clock::now();
  command.open = std::make_unique<Command::Open>(Command::Open{shared, request});
  int64_t id = 0;
  uint32_t index = 0;
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
    // The most recently freed entry first: its lines are the likeliest cached.
    if (free_indices_.empty()) {
      index = next_index_++;
    } else {
      index = free_indices_.back();
      free_indices_.pop_back();
    }
    command.stream_id = id;
    command.index = index;
    if (pipeline.ok() && *pipeline != nullptr) {
      shared->frontend = std::make_shared<StreamFrontEnd>(
          std::move(*pipeline), frontend_pool_.get(), FrontEndTag(index, id), pcm_ring_);
    }
    commands_.push_back(std::move(command));
  }
  cv_.notify_one();
  return std::unique_ptr<EngineStream>(
      new EngineStream(this, id, index, request.sample_rate, std::move(shared)));
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
  const int64_t limit = static_cast<int64_t>(engine_->config_.max_buffered_audio_s * sample_rate_);
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
    command.index = index_;
    command.error = error;
    engine_->Enqueue(std::move(command));
    return error;
  }
  shared_->samples_pushed.fetch_add(static_cast<int64_t>(samples.size()));
  if (shared_->frontend != nullptr) {
    // To the front-end workers directly: the scheduler hears of it when a
    // worker has published the rows of a chunk.
    shared_->frontend->PushFromClient(samples);
    return absl::OkStatus();
  }
  Engine::Command command;
  command.type = Engine::Command::Type::kAudio;
  command.stream_id = id_;
  command.index = index_;
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
  command.index = index_;
  engine_->Enqueue(std::move(command));
  return absl::OkStatus();
}

void EngineStream::Cancel() {
  shared_->ended = true;
  Engine::Command command;
  command.type = Engine::Command::Type::kCancel;
  command.stream_id = id_;
  command.index = index_;
  engine_->Enqueue(std::move(command));
}

void Engine::FrontEndDone(int64_t tag) {
  Command command;
  command.type = Command::Type::kFrontEnd;
  command.stream_id = tag >> kIndexBits;
  command.index = static_cast<uint32_t>(tag & ((int64_t{1} << kIndexBits) - 1));
  Enqueue(std::move(command));
}

Engine::Stream* Engine::StreamSlot(uint32_t index) const {
  if (index / kStreamChunk >= stream_chunks_.size()) return nullptr;
  return &stream_chunks_[index / kStreamChunk][index % kStreamChunk];
}

Engine::Stream* Engine::FindStream(uint32_t index, int64_t id) {
  Stream* s = StreamSlot(index);
  return s != nullptr && s->id == id ? s : nullptr;
}

const Engine::Stream* Engine::CommandStream(const Command& command) const {
  return command.type == Command::Type::kOpen ? nullptr : StreamSlot(command.index);
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
      free_indices_.push_back(command.index);
    }
    command.open->shared->outbox.Push(std::move(event));
  }
  for (const std::unique_ptr<Stream[]>& chunk : stream_chunks_) {
    for (uint32_t i = 0; i < kStreamChunk; ++i) {
      if (chunk[i].id != 0) Finish(chunk[i], FinishReason::kCancelled);
    }
  }
  // The device may still run the last cohort, and the decode thread the one
  // before: let them finish before the buffers they read and write go.
  WaitDecode();
  decoding_.clear();
  if (!inflight_.empty()) {
    (void)downloaded_[inflight_buffer_].Synchronize();
    inflight_.clear();
  }
  // /metrics is still scraped while the server drains: show the slots freed.
  UpdateGauges();
}

bool Engine::Tick(std::vector<Command>& commands) {
  AssertSchedulerThread();
  ScopedNanos timer(stats_.tick_ns);
  stats_.ticks.fetch_add(1, std::memory_order_relaxed);
  {
    const Clock::time_point start = Clock::now();
    const int64_t frontend_before = stats_.frontend_ns.load(std::memory_order_relaxed);
    // The tick's front-end work goes to the workers at once, after its commands.
    if (frontend_pool_ != nullptr) frontend_pool_->Hold();
    // A command's stream and its front end are lines no earlier command
    // touched: ask for them a few commands ahead.
    const size_t n = commands.size();
    for (size_t i = 0; i < n; ++i) {
      if (i + kPrefetchFar < n) Prefetch(CommandStream(commands[i + kPrefetchFar]), 3);
      if (i + kPrefetchNear < n) {
        if (const Stream* s = CommandStream(commands[i + kPrefetchNear])) PrefetchRow(*s);
      }
      Handle(commands[i]);
    }
    if (frontend_pool_ != nullptr) frontend_pool_->Release();
    Admit();
    const int64_t elapsed =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
    stats_.commands_ns.fetch_add(
        elapsed - (stats_.frontend_ns.load(std::memory_order_relaxed) - frontend_before),
        std::memory_order_relaxed);
  }
  RunCohort();
  UpdateGauges();
  return HasReadyWork();
}

void Engine::Handle(Command& command) {
  if (command.type == Command::Type::kOpen) {
    while (command.index / kStreamChunk >= stream_chunks_.size()) {
      stream_chunks_.push_back(std::make_unique<Stream[]>(kStreamChunk));
    }
    Stream& ref = *StreamSlot(command.index);
    OASR_CHECK(ref.id == 0, "a stream table entry given out twice");
    StreamRequest& request = command.open->request;
    ref.id = command.stream_id;
    ref.index = command.index;
    ref.sample_rate = request.sample_rate;
    ref.interim_results = request.interim_results;
    ref.decode = std::make_unique<decoder::StreamOptions>(std::move(request.decode));
    ref.nbest = ref.decode->nbest;
    if (rescorer_ != nullptr && request.attention_rescoring) {
      // The whole beam is rescored; the request's n-best is kept of it.
      ref.rescoring = true;
      ref.decode->final_nbest = std::max(ref.nbest, config_.decoder.search.beam_size);
    }
    ref.shared = std::move(command.open->shared);
    ref.opened = command.time;
    ref.last_audio = command.time;
    if (ref.shared->frontend != nullptr) {
      ref.frontend = ref.shared->frontend;  // Made by OpenStream.
    } else {
      absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> frontend =
          CreatePipeline(ref.sample_rate);
      if (!frontend.ok()) {
        Finish(ref, FinishReason::kError, frontend.status());
        return;
      }
      ref.frontend = std::make_shared<StreamFrontEnd>(std::move(*frontend), frontend_pool_.get(),
                                                      FrontEndTag(ref.index, ref.id), pcm_ring_);
    }
    WaitPush(kArrived, ref);
    return;
  }
  Stream* found = FindStream(command.index, command.stream_id);
  if (found == nullptr) return;  // Already finished: late audio or a second cancel.
  Stream& s = *found;
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
        s.ready_since = LastAudio(s);
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

void Engine::WaitPush(WaitList list, Stream& s) {
  Stream::WaitLinks& link = s.waits[list];
  if (link.linked) return;
  WaitQueue& q = waiting_[list];
  link.prev = q.tail;
  link.next = nullptr;
  link.linked = true;
  (q.tail != nullptr ? q.tail->waits[list].next : q.head) = &s;
  q.tail = &s;
  ++q.size;
}

void Engine::WaitRemove(WaitList list, Stream& s) {
  Stream::WaitLinks& link = s.waits[list];
  if (!link.linked) return;
  WaitQueue& q = waiting_[list];
  (link.prev != nullptr ? link.prev->waits[list].next : q.head) = link.next;
  (link.next != nullptr ? link.next->waits[list].prev : q.tail) = link.prev;
  link = Stream::WaitLinks();
  --q.size;
}

void Engine::Admit() {
  if (waiting_[kArrived].size == 0 || slots_->num_free() == 0) return;
  // Streams past their admission window go first, oldest first; then those
  // with a chunk to run (a cohort fills with streams that can run now), in
  // the order they got it; then the rest in arrival order.
  const Clock::time_point now = Clock::now();
  const auto window = std::chrono::duration<double, std::milli>(config_.max_wait_ms);
  cache::CacheManagers managers{slots_.get(), attention_.get(), states_.get()};
  admission_blocked_ = false;
  while (waiting_[kArrived].size > 0 && slots_->num_free() > 0) {
    Stream* oldest = waiting_[kArrived].head;
    Stream& s = now - oldest->opened >= window || waiting_[kCanRun].size == 0
                    ? *oldest
                    : *waiting_[kCanRun].head;
    absl::StatusOr<cache::StreamContext> context =
        cache::StreamContext::Allocate(s.id, managers, ctx_->stream());
    if (!context.ok()) {
      if (context.status().code() == absl::StatusCode::kResourceExhausted) {
        admission_blocked_ = true;  // Retried when a stream finishes.
        break;
      }
      Finish(s, FinishReason::kError, context.status());  // Leaves the lists.
      continue;
    }
    WaitRemove(kArrived, s);
    WaitRemove(kCanRun, s);
    s.context.emplace(std::move(*context));
    if (pcm_ring_) {
      const int64_t lane = pcm_rings_.dim(1) * pcm_rings_.dim(2);
      s.frontend->BindRing(pcm_rings_.data<int16_t>() + s.context->slot() * lane,
                           pcm_rings_.dim(1));
    }
    if (s.rescoring) segment_memory_->Reset(s.context->slot());
    s.decoder_state = decoder_states_->Acquire();
    const absl::Status configured = decoder_->ConfigureStream(*s.decoder_state, *s.decode);
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

absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> Engine::CreatePipeline(
    int sample_rate) const {
  return device_front_end_ ? model_->CreateDeviceFrontEnd(sample_rate)
                           : model_->CreateFrontEnd(sample_rate);
}

Engine::Clock::time_point Engine::LastAudio(const Stream& s) const {
  // Audio pushed straight to the workers is stamped there; the rest came
  // through the scheduler's commands.
  return s.shared->frontend != nullptr ? std::max(s.last_audio, s.frontend->published_audio_time())
                                       : s.last_audio;
}

void Engine::MarkReady(Stream& s) {
  if (!s.admitted) {
    // Waiting: admission prefers it once it has a chunk to run (audio pushed
    // to the workers shows here when they publish it).
    if (ChunkReady(s) || s.frontend->flushed()) WaitPush(kCanRun, s);
    return;
  }
  // A chunk to run, or the end of the audio with none left (drained: the
  // next tick finishes it).
  if (s.queued) return;
  bool ready = ChunkReady(s) || s.frontend->flushed();
  if (!ready && frontend_pool_ != nullptr && s.inflight_row < 0) {
    // Not yet: the workers notify once the next chunk's frames are
    // published (or at the flush), not at every message. Frames published
    // while arming may not notify, so look again after.
    s.frontend->NotifyWhenFrames(s.chunks_done * stride_frames_ + window_frames_);
    ready = ChunkReady(s) || s.frontend->flushed();
    if (ready && !s.ready_since.has_value()) s.ready_since = LastAudio(s);
  }
  if (ready) {
    s.queued = true;
    s.ready_index = ready_.size();
    ready_.push_back(&s);
  }
}

bool Engine::HasReadyWork() const {
  if (!ready_.empty() || !inflight_.empty() || !decoding_.empty()) return true;
  return waiting_[kArrived].size > 0 && slots_->num_free() > 0 && !admission_blocked_;
}

void Engine::Finish(Stream& s, FinishReason reason, absl::Status error,
                    std::vector<decoder::DecodeResult> results) {
  if (s.inflight_row >= 0) {
    // Its chunk in flight is dropped (the forward's writes land in blocks
    // and a slot given back here, before any later forward reuses them).
    inflight_[static_cast<size_t>(s.inflight_row)].stream = nullptr;
    s.inflight_row = -1;
  }
  if (s.decoding_row >= 0) {
    // The decode thread may be using its decoder state: let it finish; the
    // finals it took from the state go first on the last event.
    WaitDecode();
    Row& row = decoding_[static_cast<size_t>(s.decoding_row)];
    if (row.status.ok() && !row.finals.empty()) {
      results.insert(results.begin(), std::make_move_iterator(row.finals.begin()),
                     std::make_move_iterator(row.finals.end()));
    }
    row.stream = nullptr;
    s.decoding_row = -1;
  }
  StreamEvent event;
  event.results = std::move(results);
  event.finish = reason;
  event.error = std::move(error);
  event.audio_processed_s = ProcessedSeconds(s, s.offset);
  if (s.decoder_state != nullptr) {
    decoder::DecoderState& state = *s.decoder_state;
    if (reason == FinishReason::kStop || reason == FinishReason::kLength ||
        reason == FinishReason::kEndpoint) {
      // The transcript so far becomes final (a no-op after an endpoint).
      (void)decoder_->FinalizeStream(state);
    }
    std::vector<decoder::DecodeResult> finals = decoder_->TakeFinalResults(state);
    CompleteFinals(s, finals, reason != FinishReason::kCancelled && reason != FinishReason::kError);
    for (decoder::DecodeResult& r : finals) event.results.push_back(std::move(r));
    decoder_states_->Release(std::move(s.decoder_state));
  }
  ClampToAudio(s, s.offset, &event.results);
  if (s.context.has_value()) {
    // Its segment's blocks go back to the pool.
    if (s.rescoring) segment_memory_->Reset(s.context->slot());
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
    WaitRemove(kArrived, s);
    WaitRemove(kCanRun, s);
  }
  stats_.finished[static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
  admission_blocked_ = false;  // Its blocks and slot are free again.
  s.shared->ended = true;
  {
    // Before the last event: its reader may open a stream at once, and must
    // find this one's place free.
    std::lock_guard<std::mutex> lock(mu_);
    --open_streams_;
    // Only this thread reads the table: a stream opened on this entry now is
    // set up by a later command.
    free_indices_.push_back(s.index);
  }
  s.shared->outbox.Push(std::move(event));
  s = Stream();  // Frees what it held; id 0 marks the entry free.
}

void Engine::CompleteFinals(Stream& s, std::vector<decoder::DecodeResult>& finals, bool rescore) {
  if (!s.rescoring || finals.empty()) return;  // Also every stream of an engine that does not.
  const FinalsToRescore one{&s, &finals, rescore};
  RescoreFinals({&one, 1});
}

void Engine::RescoreFinals(std::span<const FinalsToRescore> batch) {
  ScopedNanos timer(stats_.rescoring_ns);
  const encoder::RescoringWeights& weights = rescorer_->config().rescoring;
  const bool both = weights.reverse_weight > 0.0f;
  const int64_t d = segment_.dim(1), capacity = segment_.dim(0);
  int64_t packed = 0;
  auto truncate = [](decoder::DecodeResult& r, size_t keep) {
    if (r.nbest.size() > keep) r.nbest.resize(keep);
  };
  // Scores what is gathered, then orders each of its finals.
  auto run = [&] {
    if (rescore_jobs_.empty()) return;
    size_t hyps = 0;
    for (const RescoreJob& job : rescore_jobs_) hyps += job.result->nbest.size();
    rescore_hyps_.clear();
    rescore_hyps_.reserve(hyps);  // The segments' spans point into it.
    rescore_scores_.assign(2 * hyps, 0.0);
    rescore_segments_.clear();
    size_t at = 0;
    for (const RescoreJob& job : rescore_jobs_) {
      const size_t n = job.result->nbest.size();
      for (const decoder::Hypothesis& h : job.result->nbest) rescore_hyps_.push_back(h.tokens);
      encoder::RescoreSegment seg;
      seg.first_frame = job.first_frame;
      seg.frames = job.frames;
      seg.hyps = {rescore_hyps_.data() + at, n};
      seg.left = {rescore_scores_.data() + at, n};
      if (both) seg.right = {rescore_scores_.data() + hyps + at, n};
      rescore_segments_.push_back(seg);
      at += n;
    }
    const absl::Status status =
        rescorer_->ScoreSegments(segment_.data<float>(), packed, rescore_segments_);
    stats_.rescoring_passes.fetch_add(1, std::memory_order_relaxed);
    if (!status.ok()) spdlog::warn("attention rescoring failed: {}", status.ToString());
    for (size_t j = 0; j < rescore_jobs_.size(); ++j) {
      const RescoreJob& job = rescore_jobs_[j];
      if (status.ok()) {
        ApplyDecoderScores(weights, rescore_segments_[j].left, rescore_segments_[j].right, job.keep,
                           job.result);
        stats_.segments_rescored.fetch_add(1, std::memory_order_relaxed);
      } else {
        stats_.segments_not_rescored.fetch_add(1, std::memory_order_relaxed);
        truncate(*job.result, job.keep);
      }
    }
    rescore_jobs_.clear();
    packed = 0;
  };
  for (const FinalsToRescore& f : batch) {
    Stream& s = *f.stream;
    if (!s.rescoring || f.finals->empty()) continue;
    const int slot = s.context.has_value() ? s.context->slot() : -1;
    const auto keep = static_cast<size_t>(s.nbest);
    for (decoder::DecodeResult& r : *f.finals) {
      const int64_t frames = r.end_frame - r.start_frame;
      bool queued = false;
      if (slot >= 0 && f.rescore && segment_memory_->Held(slot, r.start_frame, r.end_frame)) {
        if (packed + frames > capacity) run();
        const absl::Status gathered = segment_memory_->Gather(slot, r.start_frame, r.end_frame,
                                                              segment_.data<float>() + packed * d);
        if (gathered.ok()) {
          rescore_jobs_.push_back({&r, keep, packed, frames});
          packed += frames;
          queued = true;
        } else {
          spdlog::warn("stream {}: attention rescoring: {}", s.id, gathered.ToString());
        }
      }
      if (!queued) {
        if (f.rescore && frames > 0) {
          stats_.segments_not_rescored.fetch_add(1, std::memory_order_relaxed);
        }
        truncate(r, keep);
      }
      // Gathered (the copy is ordered before any later append): its blocks
      // may go back now.
      if (slot >= 0) segment_memory_->Forget(slot, r.end_frame);
    }
  }
  run();
}

double Engine::ProcessedSeconds(const Stream& s, int64_t offset) const {
  const double sent =
      static_cast<double>(s.shared->samples_pushed.load(std::memory_order_relaxed)) / s.sample_rate;
  return std::min(FramesToSeconds(offset), sent);
}

void Engine::ClampToAudio(const Stream& s, int64_t offset,
                          std::vector<decoder::DecodeResult>* results) const {
  const auto limit = static_cast<int64_t>(std::floor(
      1000.0 * static_cast<double>(s.shared->samples_pushed.load(std::memory_order_relaxed)) /
      s.sample_rate));
  if (FramesToSeconds(offset) * 1000.0 <= static_cast<double>(limit)) return;
  for (decoder::DecodeResult& r : *results) {
    r.start_ms = std::min(r.start_ms, limit);
    r.end_ms = std::min(r.end_ms, limit);
    for (decoder::Hypothesis& h : r.nbest) {
      for (decoder::WordResult& w : h.words) {
        w.start_ms = std::min(w.start_ms, limit);
        w.end_ms = std::min(w.end_ms, limit);
      }
    }
  }
}

void Engine::UpdateGauges() {
  stats_.streams_active = static_cast<int64_t>(active_.size());
  stats_.streams_waiting = static_cast<int64_t>(waiting_[kArrived].size);
  stats_.pool_blocks_used = cache_config_.max_num_blocks - pool_->num_free_blocks();
  stats_.slots_total = slots_->capacity();
  stats_.slots_used = slots_->capacity() - slots_->num_free();
  stats_.decoder_states_in_use = decoder_states_->num_in_use();
  if (segment_memory_.has_value()) {
    stats_.rescoring_blocks_total = segment_memory_->blocks_total();
    stats_.rescoring_blocks_used = segment_memory_->blocks_total() - segment_memory_->blocks_free();
  }
}

}  // namespace oasr::scheduler
