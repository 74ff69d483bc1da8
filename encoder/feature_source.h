// What a consumer of one stream's features (the serving engine) needs from a
// front end: audio in, normalised feature frames out, incrementally. The
// production implementation is FeaturePipeline (resampling, fbank, CMVN);
// the interface lets a benchmark or a test substitute a trivial source so
// that what it times is the consumer, not the signal processing.
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace oasr::encoder {

// One stream's source of [n, 80] float32 frames (Fbank::kNumBins wide: the
// engine and its front-end pool copy frames of that width). Not thread-safe:
// one owner at a time.
class FeatureSource {
 public:
  virtual ~FeatureSource() = default;

  // Feeds n 16-bit PCM samples at the source's input rate.
  // FAILED_PRECONDITION after InputFinished.
  virtual absl::Status AcceptPcm16(const int16_t* samples, int64_t n) = 0;
  // No more audio: whatever the source holds back becomes frames.
  virtual absl::Status InputFinished() = 0;
  // Frames produced since the start (including discarded ones).
  virtual int64_t NumFramesReady() const = 0;
  // Copies frames [start, start + count) to out ([count, 80]).
  // OUT_OF_RANGE when they are not ready yet or were discarded.
  virtual absl::Status GetFrames(int64_t start, int64_t count, float* out) const = 0;
  // Forgets frames before `frame` (bounded memory for long streams).
  virtual void DiscardFramesBefore(int64_t frame) = 0;
};

}  // namespace oasr::encoder
