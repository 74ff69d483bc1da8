// What the engine needs from a streaming acoustic model: its geometry, a
// front end per stream, and one batched chunk forward over a cohort of
// streams whose caches live in the engine's cache managers.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/cache_config.h"
#include "cache/stream_context.h"
#include "encoder/feature_source.h"

namespace oasr::scheduler {

struct ModelGeometry {
  int feature_dim = 80;     // Feature bins per frame.
  int subsampling = 4;      // Feature frames per encoder frame.
  int right_context = 6;    // Extra feature frames the subsampling looks ahead.
  int chunk_size = 16;      // Encoder frames per chunk.
  int num_left_chunks = -1; // -1 keeps all history.
  int vocab_size = 0;       // CTC outputs (blank = 0).

  // Feature frames a chunk of `frames` encoder frames reads.
  int64_t WindowFrames(int64_t frames) const {
    return (frames - 1) * subsampling + right_context + 1;
  }
  // Feature frames between consecutive chunk windows.
  int64_t StrideFrames() const { return static_cast<int64_t>(chunk_size) * subsampling; }
  // Encoder frames a window of `feature_frames` produces (0 when too short).
  int64_t OutputFrames(int64_t feature_frames) const {
    return feature_frames <= right_context ? 0 : (feature_frames - right_context - 1) / subsampling + 1;
  }
};

// One stream's chunk in a cohort forward. Non-owning.
struct CohortRow {
  cache::StreamContext* context = nullptr;  // Prepared for this chunk.
  const float* feats = nullptr;             // [feat_frames, feature_dim], normalised.
  int64_t feat_frames = 0;
  int64_t offset = 0;      // Encoder frames the stream produced before this chunk.
  int64_t out_frames = 0;  // Encoder frames this chunk produces (OutputFrames(feat_frames)).
  // The stream's conv state (num_layers, 1, cnn_cache_frames, hidden_dim),
  // filled by the engine; the model overwrites it with the new state, which
  // the engine then commits.
  TensorView conv_state;
};

// Thread-safety: called from the engine's scheduler thread only, except
// CreateFrontEnd, which must be thread-safe.
class StreamingModel {
 public:
  virtual ~StreamingModel() = default;

  virtual const ModelGeometry& geometry() const = 0;

  // The cache geometry the model needs (layers, heads, dims, kernel); the
  // engine fills in the pool and batch sizes.
  virtual cache::CacheConfig BaseCacheConfig() const = 0;

  // A front end for one stream at `sample_rate` Hz (resampling, fbank, CMVN:
  // an encoder::FeaturePipeline in production).
  virtual absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> CreateFrontEnd(
      int sample_rate) const = 0;

  // Runs one chunk for every row in one batched forward. Writes
  // log_probs [sum of out_frames, vocab_size] in row order, each row's new
  // K/V into the blocks its context prepared, and each row's new conv state
  // over conv_state. Does not commit: the engine commits every row afterwards.
  virtual absl::Status ForwardCohort(std::span<const CohortRow> rows, float* log_probs) = 0;
};

}  // namespace oasr::scheduler
