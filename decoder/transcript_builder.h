// Turns a hypothesis' units into text: the transcript, words with start/end
// times in milliseconds (WeNet's timestamp rules) and confidences.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "decoder/decode_result.h"
#include "decoder/symbol_table.h"

namespace oasr::decoder {

// Immutable; safe to share between threads.
class TranscriptBuilder {
 public:
  // `frame_shift_ms` (> 0) is the duration of one CTC frame (40 ms for 4x
  // subsampling of 10 ms features); `word_gap_ms` (>= 0) is WeNet's
  // time_stamp_gap (100 ms). CHECK-fails on other values (configs validate).
  // `min_word_confidence` (in [0, 1]; 0 keeps every word) is the confidence
  // floor: a word below it is left out of the transcript and the words (see
  // Fill).
  TranscriptBuilder(std::shared_ptr<const SymbolTable> units, float frame_shift_ms, int word_gap_ms,
                    float min_word_confidence = 0.0f);

  // Fills `hyp->transcript`, `hyp->words` and `hyp->confidence` from its
  // tokens, token_frames (since the start of the stream) and
  // token_confidences. `segment_start_frame` bounds the first word's start.
  //
  // Words: in a BPE vocabulary a word starts at a unit beginning with "▁";
  // CJK characters are words of their own; in a character vocabulary every
  // unit is a word. Special units (<unk>, ...) produce no text but still take
  // part in the timing rules, as in WeNet.
  //
  // Times, per token j at frame f_j (shift S, gap G, integer frame halves):
  //   start_j = max(segment start, f_j*S - G), or ((f_{j-1}+f_j)/2)*S when
  //             the previous token is closer than G;
  //   end_j   = f_j*S, or ((f_j+f_{j+1})/2)*S when the next token is closer
  //             than G.
  // A word runs from its first token's start to its last token's end.
  //
  // Confidence: a word's is the lowest token confidence among its units; the
  // hypothesis' is the mean over its words (0 without words).
  //
  // Words below the confidence floor are dropped from `words` and the
  // transcript (then the kept words joined by spaces in a BPE vocabulary,
  // run together in a character one); `tokens` keep what the search emitted.
  // What noise makes the model emit is such words.
  void Fill(int64_t segment_start_frame, Hypothesis* hyp) const;

  const SymbolTable& units() const { return *units_; }

  // Start of CTC frame `frame` in milliseconds, rounded.
  int64_t FrameMs(int64_t frame) const;

 private:
  struct UnitInfo {
    std::string text;  // without the word-start marker
    bool starts_word = false;
    bool special = false;
    bool cjk = false;
  };

  std::shared_ptr<const SymbolTable> units_;
  std::vector<UnitInfo> info_;
  float frame_shift_ms_;
  // frame_shift_ms_ when it is a whole number of milliseconds (40 for
  // subsampling 4 at 10 ms): FrameMs is then a product, no rounding call.
  int64_t whole_shift_ms_ = 0;
  int word_gap_ms_;
  float min_word_confidence_;
};

}  // namespace oasr::decoder
