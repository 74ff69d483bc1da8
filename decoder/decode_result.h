// What the CTC decoder returns: an n-best list per segment of a stream, with
// transcripts, tokens, token frames, word timestamps, scores and confidences.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace oasr::decoder {

// One word of a hypothesis. Times are milliseconds since the start of the
// stream (not of the segment).
struct WordResult {
  std::string text;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  float confidence = 0.0f;  // in [0, 1]; see docs/decoder.md
};

// One entry of the n-best list.
struct Hypothesis {
  // Model units, blank-free and collapsed, special units included.
  std::vector<int32_t> tokens;
  // For each token, the CTC frame (since the start of the stream) at which
  // the hypothesis' Viterbi alignment last emits it (WeNet's token time).
  std::vector<int64_t> token_frames;
  // For each token, the largest posterior P(token | frame) over the frames
  // where the Viterbi alignment emits it; in [0, 1].
  std::vector<float> token_confidences;
  // Detokenised text: "▁" becomes a space, special units are dropped.
  std::string transcript;
  // Words with times and confidences (filled from the tokens above).
  std::vector<WordResult> words;
  // log P(prefix | log_probs) + bonus: the ranking score.
  float score = 0.0f;
  // log P(prefix | log_probs), summed over all CTC alignments of the prefix.
  float ctc_score = 0.0f;
  // Phrase-boosting bonus included in `score` (0 without phrases).
  float context_score = 0.0f;
  // Language-model score included in `score`: the unit model's lm_weight *
  // ln P_lm plus token bonuses, and the word model's weighted score (0 without
  // language models).
  float lm_score = 0.0f;
  // log-probability of the best single alignment.
  float viterbi_score = 0.0f;
  // Mean of the word confidences (0 when there are no words); in [0, 1].
  float confidence = 0.0f;
  // Attention rescoring's decoder score, (1 - reverse_weight) * left-to-right
  // + reverse_weight * right-to-left log-probability of the tokens and eos;
  // 0 unless the result is rescored.
  float attention_score = 0.0f;
};

// The result of one segment of a stream. With continuous decoding a stream is
// split into segments at endpoints; each segment's final result is reported
// once, with is_final set.
struct DecodeResult {
  // Best first; never empty for a beam search. A rescored result is ordered
  // by rescoring_weight * attention_score + ctc_weight * score instead.
  std::vector<Hypothesis> nbest;
  bool is_final = false;
  int32_t segment = 0;         // 0-based index of the segment in the stream
  int64_t start_ms = 0;        // segment start, since the start of the stream
  int64_t end_ms = 0;          // audio decoded so far (or segment end when final)
  int32_t endpoint_rule = -1;  // index of the endpoint rule that closed the segment; -1 if none
  // The segment's encoder (CTC) frames since the start of the stream: [start_frame, end_frame).
  int64_t start_frame = 0;
  int64_t end_frame = 0;
  // Attention rescoring ordered the n-best (finals only).
  bool rescored = false;
};

}  // namespace oasr::decoder
