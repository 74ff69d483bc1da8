// What a consumer of one stream's features (the serving engine) needs from a
// front end: audio in, rows of floats out, incrementally. The rows are what
// a chunk's window is made of: for a host front end (FeaturePipeline:
// resampling, fbank, CMVN) one normalised feature frame each; for a front
// end whose fbank runs on the model's device (PcmSource), pieces of the
// 16 kHz signal the device turns into features inside the cohort forward.
// RowLayout says how feature frames map to rows, so the consumer counts and
// cuts chunks in feature frames either way. The interface also lets a
// benchmark or a test substitute a trivial source, so that what it times is
// the consumer, not the signal processing.
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace oasr::encoder {

// Feature frame f's input starts at row f x rows_per_frame; a window of n
// frames from there spans WindowRows(n) rows. A host front end's rows are
// its frames ({80, 1, 0}); 16 kHz PCM in 80-sample rows for 400-sample
// frames every 160 samples is {80, 2, 3}.
struct RowLayout {
  int width = 80;          // Floats per row.
  int rows_per_frame = 1;  // Rows between consecutive frames' starts.
  int extra_rows = 0;      // Rows a window reads past its last frame's start row + rows_per_frame.

  constexpr int64_t FirstRow(int64_t frame) const { return frame * rows_per_frame; }
  constexpr int64_t WindowRows(int64_t frames) const {
    return frames <= 0 ? 0 : frames * rows_per_frame + extra_rows;
  }
  // Whole frames whose input `rows` rows hold.
  constexpr int64_t FramesIn(int64_t rows) const {
    return rows < rows_per_frame + extra_rows
               ? 0
               : (rows - extra_rows - rows_per_frame) / rows_per_frame + 1;
  }
  constexpr bool operator==(const RowLayout&) const = default;
};

// One stream's source of rows ([n, layout().width] float32). Not
// thread-safe: one owner at a time.
class FeatureSource {
 public:
  virtual ~FeatureSource() = default;

  virtual RowLayout layout() const { return {}; }
  // True when AcceptPcm16 costs about a copy of its input (no resampling,
  // no fbank): cheaper to run where the audio arrives than to hand it on.
  virtual bool CopiesInput() const { return false; }

  // Feeds n 16-bit PCM samples at the source's input rate.
  // FAILED_PRECONDITION after InputFinished.
  virtual absl::Status AcceptPcm16(const int16_t* samples, int64_t n) = 0;
  // No more audio: whatever the source holds back becomes rows.
  virtual absl::Status InputFinished() = 0;
  // Rows produced since the start (including discarded ones).
  virtual int64_t NumRowsReady() const = 0;
  // Copies rows [start, start + count) to out ([count, width]).
  // OUT_OF_RANGE when they are not ready yet or were discarded.
  virtual absl::Status GetRows(int64_t start, int64_t count, float* out) const = 0;
  // The same rows as 16-bit samples, each value rounded as RoundToPcm16
  // does (common/pcm16.h), for a source of PCM rows; a source that keeps
  // its rows so only copies them. UNIMPLEMENTED for other sources.
  virtual absl::Status GetRowsPcm16(int64_t start, int64_t count, int16_t* out) const {
    (void)start, (void)count, (void)out;
    return absl::UnimplementedError("this source has no 16-bit rows");
  }
  // Forgets rows before `row` (bounded memory for long streams).
  virtual void DiscardRowsBefore(int64_t row) = 0;

  // The same in feature frames: frames whose whole input is ready, the
  // input of frames [start, start + count) (layout().WindowRows(count)
  // rows), and forgetting the input before frame `frame`.
  int64_t NumFramesReady() const { return layout().FramesIn(NumRowsReady()); }
  absl::Status GetFrames(int64_t start, int64_t count, float* out) const {
    const RowLayout l = layout();
    return GetRows(l.FirstRow(start), l.WindowRows(count), out);
  }
  void DiscardFramesBefore(int64_t frame) { DiscardRowsBefore(layout().FirstRow(frame)); }
};

}  // namespace oasr::encoder
