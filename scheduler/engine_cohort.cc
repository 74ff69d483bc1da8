// The engine's cohort tick: every step of one batched chunk, in order.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/prefetch.h"
#include "scheduler/cohort_decode.h"
#include "scheduler/engine.h"
#include "scheduler/engine_internal.h"
#include "spdlog/spdlog.h"

namespace oasr::scheduler {

void Engine::RunCohort() {
  PickCohort();
  bool launched = false;
  if (!rows_.empty() && ReserveBlocks()) {
    StageCohort();
    if (Forward()) {
      CommitCohort();
      launched = true;
    }
  }
  if (!overlap_) {
    if (launched) {
      DecodeCohortRows(rows_, -1, ctx_->threads());
      EmitCohort(rows_);
    }
    rows_.clear();
    return;
  }
  // With a decode thread, the cohort before the one in flight was decoded
  // while this tick's commands, pick and launch ran: its events go out now,
  // and its host copy of the candidates is free for this tick's.
  if (!decoding_.empty()) RetireDecoding();
  // This tick's cohort is on the device; while it computes, the previous
  // one is decoded, and this one becomes the cohort in flight.
  if (launched) {
    absl::Status copy =
        candidates_->EnqueueDownload(*ctx_, static_cast<int>(rows_.size()), next_buffer_);
    if (copy.ok()) copy = downloaded_[next_buffer_].Record(ctx_->stream());
    if (!copy.ok()) {
      for (Row& row : rows_) row.status = copy;  // Each row's stream then ends in error.
    }
  }
  if (!inflight_.empty()) RetireInflight();
  if (launched) {
    inflight_.swap(rows_);
    for (size_t i = 0; i < inflight_.size(); ++i) {
      inflight_[i].stream->inflight_row = static_cast<int>(i);
    }
    inflight_buffer_ = next_buffer_;
    next_buffer_ ^= 1;
  }
  rows_.clear();
}

void Engine::RetireInflight() {
  absl::Status waited;
  {
    ScopedNanos timer(stats_.device_wait_ns);
    waited = downloaded_[inflight_buffer_].Synchronize();
  }
  for (size_t i = 0; i < inflight_.size(); ++i) {
    Row& row = inflight_[i];
    if (row.stream == nullptr) continue;
    row.stream->inflight_row = -1;
    if (decode_pool_ != nullptr) row.stream->decoding_row = static_cast<int>(i);
    if (!waited.ok() && row.status.ok()) row.status = waited;
  }
  if (decode_pool_ != nullptr) {
    decoding_.swap(inflight_);  // decoding_ was retired: inflight_ is now empty.
    decoding_buffer_ = inflight_buffer_;
    StartDecode();
    return;
  }
  DecodeCohortRows(inflight_, inflight_buffer_, ctx_->threads());
  EmitCohort(inflight_);
  inflight_.clear();
}

void Engine::StartDecode() {
  {
    std::lock_guard<std::mutex> lock(decode_mu_);
    decode_busy_ = true;
  }
  decode_cv_.notify_all();
}

void Engine::WaitDecode() {
  std::unique_lock<std::mutex> lock(decode_mu_);
  if (!decode_busy_) return;
  ScopedNanos timer(stats_.decode_wait_ns);
  decode_cv_.wait(lock, [this] { return !decode_busy_; });
}

void Engine::RetireDecoding() {
  WaitDecode();
  for (Row& row : decoding_) {
    if (row.stream != nullptr) row.stream->decoding_row = -1;
  }
  EmitCohort(decoding_);
  decoding_.clear();
}

void Engine::DecodeLoop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(decode_mu_);
      decode_cv_.wait(lock, [this] { return decode_stop_ || decode_busy_; });
      if (!decode_busy_) return;  // Stopping with nothing handed over.
    }
    DecodeCohortRows(decoding_, decoding_buffer_, *decode_pool_);
    {
      std::lock_guard<std::mutex> lock(decode_mu_);
      decode_busy_ = false;
    }
    decode_cv_.notify_all();
  }
}

void Engine::PickCohort() {
  rows_.clear();
  // Only streams with something to do are visited: idle ones cost nothing.
  // Finish() edits ready_, so this tick works on a swapped-out copy.
  ready_now_.swap(ready_);
  const size_t cap = static_cast<size_t>(cohort_rows_);
  const size_t ready = ready_now_.size();
  for (size_t i = 0; i < ready; ++i) {
    if (i + kPrefetchFar < ready) Prefetch(ready_now_[i + kPrefetchFar], 3);
    if (i + kPrefetchNear < ready) PrefetchRow(*ready_now_[i + kPrefetchNear]);
    Stream& s = *ready_now_[i];
    if (rows_.size() == cap) {
      // The cohort is full: the rest stay queued and come first next tick
      // (nothing this tick queued them again: they were still queued).
      s.ready_index = ready_.size();
      ready_.push_back(&s);
      continue;
    }
    s.queued = false;
    // One chunk in flight (or being decoded) at a time: retiring it queues
    // the stream again.
    if (s.inflight_row >= 0 || s.decoding_row >= 0) continue;
    const int64_t feat_frames = ChunkFrames(s);
    if (feat_frames == 0) {
      // No chunk: drained after the end of the audio, or not ready after all
      // (then the workers are asked to say when it is).
      if (s.frontend->flushed()) {
        Finish(s, FinishReason::kStop);
      } else {
        MarkReady(s);
      }
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
    Row& row = rows_.emplace_back();
    row.stream = &s;
    row.feat_frames = feat_frames;
    row.frames = static_cast<int32_t>(model_->geometry().OutputFrames(feat_frames));
    row.input_finished = s.input_finished;
  }
  ready_now_.clear();
  // A loaded tick runs a captured width whole (no padding rows); the rows
  // past it are queued again, their chunks and latency clocks untouched.
  const size_t run = FilledRows(graph_widths_, rows_.size(),
                                static_cast<size_t>(std::max(config_.fill_widths_from, 0)));
  while (rows_.size() > run) {
    Stream& s = *rows_.back().stream;
    s.queued = true;
    s.ready_index = ready_.size();
    ready_.push_back(&s);
    rows_.pop_back();
  }
}

bool Engine::ReserveBlocks() {
  row_slots_.clear();
  for (const Row& row : rows_) row_slots_.push_back(row.stream->context->slot());
  if (attention_->PrepareChunksBatched(row_slots_).ok()) return true;
  // The pool cannot serve the whole cohort: serve who it can, one by one; a
  // stream that cannot get a block ends at its memory ceiling ("length").
  size_t kept = 0;
  for (size_t b = 0; b < rows_.size(); ++b) {
    Stream* s = rows_[b].stream;
    if (s->context->PrepareChunk().ok()) {
      if (kept != b) rows_[kept] = std::move(rows_[b]);
      ++kept;
    } else {
      Finish(*s, FinishReason::kLength);
    }
  }
  rows_.resize(kept);
  if (kept == 0) return false;
  // Each PrepareChunk made the cohort its one stream; make it the kept rows
  // again, in row order, for what reads the cohort. Their blocks are
  // reserved already, so this allocates nothing and cannot fail. (CacheConfig
  // caps every stream at its share of the pool, so this path is a safeguard,
  // not a state a tick reaches.)
  row_slots_.clear();
  for (const Row& row : rows_) row_slots_.push_back(row.stream->context->slot());
  absl::Status again = attention_->PrepareChunksBatched(row_slots_);
  OASR_CHECK(again.ok(), std::string(again.message()));
  return true;
}

void Engine::StageCohort() {
  {
    // The host staging is refilled only once the last tick's copy of it ran.
    ScopedNanos timer(stats_.device_wait_ns);
    if (absl::Status s = uploaded_.Synchronize(); !s.ok())
      spdlog::error("staging: {}", s.ToString());
  }
  ScopedNanos timer(stats_.frontend_ns);
  const size_t n = rows_.size();
  stats_.batch_size.Observe(static_cast<double>(n));
  if (pcm_ring_) {
    // The windows are in the streams' rings already: a row only says where.
    for (size_t b = 0; b < n; ++b) {
      const Row& row = rows_[b];
      Stream& s = *row.stream;
      staging_->slots()[b] = s.context->slot();
      staging_->frames()[b] = row.frames;
      staging_->offsets()[b] = static_cast<int32_t>(s.offset);
      staging_->feat_frames()[b] = static_cast<int32_t>(row.feat_frames);
      staging_->ring_starts()[b] =
          static_cast<int32_t>(s.frontend->RingRow(s.chunks_done * stride_frames_));
    }
    return;
  }
  const int64_t feature_dim = model_->geometry().feature_dim;
  auto stage = [&](size_t b) {
    Row& row = rows_[b];
    Stream& s = *row.stream;
    staging_->slots()[b] = s.context->slot();
    staging_->frames()[b] = row.frames;
    staging_->offsets()[b] = static_cast<int32_t>(s.offset);
    staging_->feat_frames()[b] = static_cast<int32_t>(row.feat_frames);
    // The window, from the front end's published input; what comes before
    // it (the previous chunk's only) is forgotten first. A short last
    // chunk's features are zero past its frames (on the device, the front
    // end writes them so; its PCM past the frames is never read).
    const int64_t start = s.chunks_done * stride_frames_;
    float* window = staging_->feats(static_cast<int>(b));
    s.frontend->DiscardFramesBefore(start);
    absl::Status got = s.frontend->GetFrames(start, row.feat_frames, window);
    OASR_CHECK(got.ok(), std::string(got.message()));
    if (!device_front_end_) {
      std::fill(window + row.feat_frames * feature_dim, window + window_frames_ * feature_dim,
                0.0f);
    }
  };
  // The copies (tens of KiB a row) are split across the context's host
  // threads for a wide cohort; each row's front end is its own.
  ForEachPart(ctx_->threads(), n, kMinLightRowsPerPart, 2, [&](size_t begin, size_t end) {
    for (size_t b = begin; b < end; ++b) stage(b);
  });
}

bool Engine::Forward() {
  ScopedNanos timer(stats_.model_ns);
  const int batch = static_cast<int>(rows_.size());
  int width = batch;
  const CudaGraph* graph = nullptr;
  if (!graphs_.empty()) {
    // The narrowest captured width that holds the cohort (the last is the
    // capacity, so there always is one); the rest is padding.
    const size_t i =
        static_cast<size_t>(std::lower_bound(graph_widths_.begin(), graph_widths_.end(), batch) -
                            graph_widths_.begin());
    width = graph_widths_[i];
    graph = &graphs_[i];
    StagePadRows(batch, width);
    const absl::Status padded = attention_->PadCohort(width);
    OASR_CHECK(padded.ok(), std::string(padded.message()));
  }
  attention_->UpdateDeviceMirror(ctx_->stream());
  // The row arrays go up whole; the features only for the streams' rows: a
  // padding row reads whatever finite features its row last held.
  absl::Status forward = staging_->Upload(batch, ctx_->stream());
  if (forward.ok() && overlap_) forward = uploaded_.Record(ctx_->stream());
  if (forward.ok()) {
    forward = graph != nullptr ? graph->Launch(ctx_->stream()) : EnqueueForward(Plan(width));
  }
  if (forward.ok()) {
    if (graph != nullptr) {
      stats_.graph_launches.fetch_add(1, std::memory_order_relaxed);
      stats_.padded_rows.fetch_add(width - batch, std::memory_order_relaxed);
    }
    return true;
  }
  spdlog::error("cohort forward of {} streams failed: {}", batch, forward.ToString());
  for (Row& row : rows_) Finish(*row.stream, FinishReason::kError, forward);
  rows_.clear();
  return false;
}

absl::Status Engine::EnqueueForward(const CohortPlan& plan) {
  absl::Status forward = model_->ForwardCohort(plan, log_probs_.view());
  if (forward.ok() && candidates_.has_value()) {
    forward = candidates_->Select(*ctx_, log_probs_.view(), plan.batch);
  }
  return forward;
}

CohortPlan Engine::Plan(int width) const {
  CohortPlan plan =
      MakeCohortPlan(*staging_, width, model_->geometry().chunk_size, *pool_, attention_->mirror(),
                     state_views_, pcm_rings_.empty() ? TensorView() : pcm_rings_.view());
  if (rescorer_ != nullptr) plan.encoder_out = encoder_out_.view();
  return plan;
}

void Engine::StagePadRows(int from, int width) {
  // The feature rows are left as they are: a padding row's output is never
  // read, and every value in the staging is a finite feature (with a device
  // front end, its features are zeros computed from no samples).
  const int32_t length = attention_->mirror().Seqlen(pad_slot_);
  for (int b = from; b < width; ++b) {
    staging_->slots()[b] = pad_slot_;
    staging_->frames()[b] = static_cast<int32_t>(model_->geometry().chunk_size);
    staging_->offsets()[b] = length;
    staging_->feat_frames()[b] = 0;  // Zero features, from no PCM.
    staging_->ring_starts()[b] = 0;
  }
}

void Engine::CommitCohort() {
  // The model wrote the K/V and the states in place; what remains is the
  // cache lengths (and eviction). A row whose commit fails is left out of
  // the decode.
  const size_t n = rows_.size();
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchNear < n) {
      attention_->PrefetchSlot(rows_[i + kPrefetchNear].stream->context->slot());
    }
    rows_[i].status = rows_[i].stream->context->CommitChunkPaged(rows_[i].frames);
  }
}

void Engine::PrefetchRow(const Stream& s) const {
  Prefetch(s.frontend.get(), 3);
  Prefetch(s.shared.get());
  if (s.context.has_value()) attention_->PrefetchSlot(s.context->slot());
}

void Engine::DecodeCohortRows(std::vector<Row>& rows, int buffer, ThreadPool& pool) {
  ScopedNanos timer(stats_.decode_ns);
  const size_t n = rows.size();
  row_states_.clear();
  row_frames_.clear();
  row_status_.resize(n);
  for (const Row& row : rows) {
    row_states_.push_back(row.stream != nullptr && row.status.ok() ? row.stream->decoder_state.get()
                                                                   : nullptr);
    row_frames_.push_back(row.frames);
  }
  // One batched decode for the cohort (after the forward on the model's
  // stream: the copy to the host waits for it), then every row's results
  // (reading them is the decoder's work too).
  absl::Status read;
  {
    ScopedNanos search_timer(stats_.decode_search_ns);
    read = candidates_.has_value()
               ? DecodeCohortPruned(*decoder_, row_states_, row_frames_, *candidates_, ctx_,
                                    row_status_, buffer, &pool)
               : DecodeCohort(*decoder_, row_states_, row_frames_, log_probs_.view(), ctx_,
                              row_status_);
  }
  if (rescorer_ != nullptr && read.ok()) {
    // Each rescoring row's encoder output joins its segment: the copies are
    // queued, then made in one pass (one launch on CUDA, ordered after the
    // forward that wrote them and before the next one overwrites them).
    const int64_t chunk = model_->geometry().chunk_size;
    for (size_t b = 0; b < n; ++b) {
      const Row& row = rows[b];
      if (row.stream == nullptr || !row.stream->rescoring || !row.status.ok()) continue;
      segment_memory_->Append(row.stream->context->slot(), row.stream->offset,
                              static_cast<int64_t>(b) * chunk, row.frames);
    }
    read = segment_memory_->Flush(encoder_out_.data<float>());
  }
  // Each row's results, read from its own state: independent rows, so a
  // wide cohort's (an interim result builds the transcript so far) are
  // split across the context's host threads like the search.
  auto results = [&](size_t b) {
    Row& row = rows[b];
    if (row.stream == nullptr) return;
    if (!read.ok()) row.status = read;
    if (row.status.ok()) row.status = std::move(row_status_[b]);
    if (!row.status.ok()) return;
    decoder::DecoderState& state = *row.stream->decoder_state;
    row.finals = decoder_->TakeFinalResults(state);
    row.decoder_status = decoder_->GetStatus(state);
    row.partial.reset();
    if (row.stream->interim_results && !row.decoder_status.finished) {
      // Built again only when the hypothesis may have changed: a chunk of
      // pause, or within a long word, adds no token, and its transcript
      // would equal the last one (then no event goes out either).
      const uint64_t revision = decoder_->PartialRevision(state);
      if (revision != row.stream->partial_revision || !row.finals.empty()) {
        row.partial = decoder_->PartialResult(state);
        row.stream->partial_revision = revision;
      }
    }
  };
  ForEachPart(pool, n, kMinLightRowsPerPart, 2, [&](size_t begin, size_t end) {
    for (size_t b = begin; b < end; ++b) results(b);
  });
  // Attention rescoring (its decoder and the segment memory are shared)
  // stays on this thread; it changes the finals only, not the partial.
  if (rescorer_ != nullptr) {
    rescore_batch_.clear();
    for (Row& row : rows) {
      if (row.stream != nullptr && row.status.ok() && !row.finals.empty()) {
        rescore_batch_.push_back({row.stream, &row.finals, /*rescore=*/true});
      }
    }
    if (!rescore_batch_.empty()) RescoreFinals(rescore_batch_);
  }
  // The rows' events go out from here, in parts like the results (each
  // builds its transcripts' messages and takes its own outbox's lock), not
  // one by one on the scheduler thread when the cohort retires.
  ForEachPart(pool, n, kMinLightRowsPerPart, 2, [&](size_t begin, size_t end) {
    for (size_t b = begin; b < end; ++b) PushChunkEvent(rows[b]);
  });
}

void Engine::PushChunkEvent(Row& row) {
  if (row.stream == nullptr || !row.status.ok() || row.decoder_status.finished) return;
  // The stream is this row's alone until the cohort retires: the scheduler
  // thread neither finishes it (Finish waits for the decode) nor moves its
  // offset or its last partial meanwhile.
  Stream& s = *row.stream;
  const bool finals = !row.finals.empty();
  if (finals) s.last_partial.clear();
  bool partial = false;
  if (row.partial.has_value()) {
    // Both arms lvalues, so the transcript is compared in place, not copied.
    static const std::string kNone;
    const std::string& text = row.partial->nbest.empty() ? kNone : row.partial->nbest[0].transcript;
    if (text != s.last_partial) {
      s.last_partial = text;
      partial = true;
    }
  }
  if (!finals && !partial) return;
  StreamEvent event;
  event.results = std::move(row.finals);
  row.finals.clear();  // Sent: a Finish before the row retires does not send them again.
  if (partial) event.results.push_back(std::move(*row.partial));
  const int64_t offset = s.offset + row.frames;
  if (row.input_finished) {
    ClampToAudio(s, offset, &event.results);
    event.audio_processed_s = ProcessedSeconds(s, offset);
  } else {
    // Before the end of the audio a chunk's window reaches past its frames,
    // so they lie within the samples received and neither bound applies;
    // not reading the count keeps this thread off the line every push of
    // the client writes.
    OASR_DCHECK(ProcessedSeconds(s, offset) == FramesToSeconds(offset));
    event.audio_processed_s = FramesToSeconds(offset);
  }
  s.shared->outbox.Push(std::move(event));
}

void Engine::EmitCohort(std::vector<Row>& rows) {
  ScopedNanos timer(stats_.emit_ns);
  const Clock::time_point now = Clock::now();
  latencies_.clear();
  int64_t decoded = 0, out_frames = 0;
  const size_t n = rows.size();
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchFar < n) Prefetch(rows[i + kPrefetchFar].stream, 3);
    if (i + kPrefetchNear < n && rows[i + kPrefetchNear].stream != nullptr) {
      PrefetchRow(*rows[i + kPrefetchNear].stream);
    }
    Row& row = rows[i];
    if (row.stream == nullptr) continue;  // Finished while in flight.
    if (row.status.ok()) {
      ++decoded;
      out_frames += row.frames;
    }
    AfterChunk(row, now);  // May finish the row's stream.
  }
  if (!latencies_.empty()) stats_.chunk_latency_s.Observe(latencies_);
  stats_.chunks_processed.fetch_add(decoded, std::memory_order_relaxed);
  stats_.audio_ms_processed.fetch_add(static_cast<int64_t>(out_frames * frame_shift_ms_),
                                      std::memory_order_relaxed);
}

void Engine::AfterChunk(Row& row, Clock::time_point now) {
  Stream& s = *row.stream;
  if (!row.status.ok()) {
    Finish(s, FinishReason::kError, std::move(row.status));
    return;
  }
  ++s.chunks_done;
  s.offset += row.frames;
  // The device has read the chunk's window: its ring rows before the next
  // window are free for the front end.
  if (pcm_ring_) s.frontend->DiscardFramesBefore(s.chunks_done * stride_frames_);
  // Input-rate samples whose frames are now decoded (for the audio bound).
  const int64_t consumed = static_cast<int64_t>(s.chunks_done * stride_frames_ *
                                                samples_per_feature_frame_ * s.sample_rate);
  s.shared->samples_consumed.store(
      std::min(consumed, s.shared->samples_pushed.load(std::memory_order_relaxed)),
      std::memory_order_relaxed);
  if (s.ready_since.has_value()) {
    latencies_.push_back(std::chrono::duration<double>(now - *s.ready_since).count());
    s.ready_since.reset();
  }
  if (ChunkReady(s)) s.ready_since = LastAudio(s);
  MarkReady(s);  // Already has the next chunk (a client ahead of real time) or its end.

  if (row.decoder_status.finished) {
    // single_utterance: the first endpoint ends the stream.
    Finish(s, FinishReason::kEndpoint, absl::OkStatus(), std::move(row.finals));
  }
  // Otherwise its event went out with the decode (PushChunkEvent).
}

}  // namespace oasr::scheduler
