// What the engine needs from a streaming acoustic model: its geometry, the
// per-stream state it carries, a front end per stream, and one batched chunk
// forward over a cohort described by a plan (docs/engine-seam.md).
//
// Who owns what: the engine owns the caches -- the shared paged K/V pool and
// its block tables (cache/), and one slot-addressed tensor per state the
// model declares (StreamStates) -- and hands the model views of them with
// every plan. The model reads and writes them inside its forward, by slot and
// by block table, so the engine never copies or even knows the shape of any
// per-stream state. Everything in a plan lives on the model's device.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/cache_config.h"
#include "cache/slot_state_cache.h"
#include "common/execution_context.h"
#include "common/tensor.h"
#include "encoder/feature_source.h"

namespace oasr::scheduler {

struct ModelGeometry {
  int feature_dim = 80;            // Feature bins per frame.
  int subsampling = 4;             // Feature frames per encoder frame.
  int right_context = 6;           // Extra feature frames the subsampling looks ahead.
  int chunk_size = 16;             // Encoder frames per chunk.
  int num_left_chunks = -1;        // -1 keeps all history.
  int vocab_size = 0;              // CTC outputs (blank = 0).
  int encoder_dim = 0;             // Width of the encoder output (CohortPlan::encoder_out).
  double feature_shift_ms = 10.0;  // Between consecutive feature frames.

  // The model's frame clock: one encoder (CTC) frame, feature_shift_ms x
  // subsampling. Decoder timestamps, endpoint silences and audio_processed
  // all count in it.
  double FrameShiftMs() const { return feature_shift_ms * subsampling; }
  // Feature frames a chunk of `frames` encoder frames reads.
  int64_t WindowFrames(int64_t frames) const {
    return (frames - 1) * subsampling + right_context + 1;
  }
  // Feature frames between consecutive chunk windows.
  int64_t StrideFrames() const { return static_cast<int64_t>(chunk_size) * subsampling; }
  // Encoder frames a window of `feature_frames` produces (0 when too short).
  int64_t OutputFrames(int64_t feature_frames) const {
    return feature_frames <= right_context ? 0
                                           : (feature_frames - right_context - 1) / subsampling + 1;
  }
};

// One tick's batch: rows are streams, each with one chunk. All tensors are on
// the model's device; the host_ spans hold the same per-row values on the
// host for decisions the model makes there. Non-owning; valid for the call.
struct CohortPlan {
  int batch = 0;  // Rows.
  int chunk = 0;  // Encoder frames of a full row (the model's chunk_size).
  // int32 [batch]: the row's slot (block-table row, state slot), the encoder
  // frames it produces (1..chunk; fewer only for a stream's last chunk), and
  // the encoder frames of its stream before this chunk.
  TensorView slots, frames, offsets;
  std::span<const int32_t> host_slots, host_frames, host_offsets;
  // float32 [batch, WindowFrames(chunk), feature_dim], CMVN applied; a short
  // row's frames past its window are zero.
  TensorView feats;
  // Optional, for a model with a device front end (empty: feats are given).
  // float32 [batch, pcm_stride]: each row's window as 16 kHz PCM in int16
  // range (encoder::PcmSource::WindowSamples(feat_frames[b]) samples), and
  // int32 [batch] feat_frames: the feature frames of each window, in
  // [0, WindowFrames(chunk)]. The forward then first computes feats from
  // them (fbank and CMVN on the device; feats is its output buffer, zero
  // past each row's frames).
  TensorView pcm, feat_frames;
  // Optional, with pcm: where the windows come from. Empty: pcm holds them
  // (staged). Else pcm is the forward's own buffer, and row b's window is
  // gathered first from lane slots[b] of pcm_ring (int16 [lanes,
  // ring_rows, 80], page-locked host memory on CUDA, read by the device
  // directly): its rows from ring row pcm_ring_starts[b] (int32 [batch])
  // on, wrapping (kernels::GatherPcm).
  TensorView pcm_ring, pcm_ring_starts;
  // The shared K/V pool, (layers, physical blocks, block_size, heads, d_k),
  // and the block tables and cache lengths of every slot: int32 (rows, W)
  // and (rows), on the device and on the host. Row b's history position p is
  // block block_table[slots[b], p / block_size], row p % block_size; the
  // blocks for [cache_len, cache_len + frames) are reserved.
  TensorView k_pool, v_pool;
  TensorView block_table, cache_lens;
  TensorView host_block_table, host_cache_lens;
  // One tensor per StreamStates() entry, in that order, with the slot axis
  // the spec names.
  std::span<const TensorView> states;
  // Optional (empty: not wanted): float32 [batch, chunk, encoder_dim] on the
  // device, where the forward also writes the encoder output its log-probs
  // were computed from (attention rescoring reads it).
  TensorView encoder_out;
};

// Thread-safety: called from the engine's scheduler thread only, except
// CreateFrontEnd and CreateDeviceFrontEnd, which must be thread-safe.
class StreamingModel {
 public:
  virtual ~StreamingModel() = default;

  virtual const ModelGeometry& geometry() const = 0;

  // The cache geometry the model needs (layers, heads, dims, dtype, device);
  // the engine fills in the pool and batch sizes.
  virtual cache::CacheConfig BaseCacheConfig() const = 0;

  // The fixed-extent per-stream states the model carries between chunks
  // besides its attention history (seed section 10.1), stored by the engine
  // in a SlotStateCache on the model's device. Zero is a new stream's state.
  virtual std::vector<cache::StreamStateSpec> StreamStates() const = 0;

  // The context the model computes on (its device, stream, arenas).
  virtual ExecutionContext& context() const = 0;

  // Bytes of context().workspace() and host_workspace() a forward of up to
  // `max_batch` rows takes; the engine reserves them once at start-up.
  virtual size_t WorkspaceBytes(int max_batch) const = 0;

  // A front end for one stream at `sample_rate` Hz (resampling, fbank, CMVN:
  // an encoder::FeaturePipeline in production).
  virtual absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> CreateFrontEnd(
      int sample_rate) const = 0;
  // Whether the model can compute its features on its own device inside
  // ForwardCohort (CohortPlan::pcm); then CreateDeviceFrontEnd gives a
  // stream's front end that only resamples (an encoder::PcmSource).
  virtual bool has_device_front_end() const { return false; }
  virtual absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> CreateDeviceFrontEnd(
      int /*sample_rate*/) const {
    return absl::UnimplementedError("this model has no device front end");
  }

  // Runs one chunk for every row of `plan` in one batched forward on
  // context(): writes log_probs, float32 [batch, chunk, vocab_size] on the
  // model's device (row b's frames past plan.frames[b] are not meaningful),
  // each row's new K/V into the blocks its table row reserves, and each row's
  // new state over its slots. Does not commit (the engine advances the cache
  // lengths afterwards). May return before the device is done (the caller
  // orders its reads of log_probs on context().stream()). INVALID_ARGUMENT
  // naming the row and field for an inconsistent plan, before anything is
  // written.
  virtual absl::Status ForwardCohort(const CohortPlan& plan, const TensorView& log_probs) = 0;
};

}  // namespace oasr::scheduler
