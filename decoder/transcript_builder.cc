#include "decoder/transcript_builder.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/check.h"
#include "decoder/utf8.h"

namespace oasr::decoder {
namespace {

// Replaces every "▁" with a space, collapses runs of spaces and trims.
std::string MarkersToSpaces(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const bool marker = text[i] == kWordStartMarker[0] &&
                        text.compare(i, kWordStartMarkerBytes, kWordStartMarker) == 0;
    const char c = marker ? ' ' : text[i];
    i += marker ? kWordStartMarkerBytes : 1;
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out.push_back(c);
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

TranscriptBuilder::TranscriptBuilder(std::shared_ptr<const SymbolTable> units, float frame_shift_ms,
                                     int word_gap_ms, float min_word_confidence)
    : units_(std::move(units)),
      frame_shift_ms_(frame_shift_ms),
      word_gap_ms_(word_gap_ms),
      min_word_confidence_(min_word_confidence) {
  OASR_CHECK(units_ != nullptr);
  OASR_CHECK(frame_shift_ms > 0.0f);
  OASR_CHECK(word_gap_ms >= 0);
  OASR_CHECK(min_word_confidence >= 0.0f && min_word_confidence <= 1.0f);
  if (frame_shift_ms == std::floor(frame_shift_ms) && frame_shift_ms < 1e6f) {
    whole_shift_ms_ = static_cast<int64_t>(frame_shift_ms);
  }
  info_.resize(units_->size());
  for (int id = 0; id < units_->size(); ++id) {
    const std::string& unit = units_->Token(id);
    UnitInfo& info = info_[id];
    info.special = units_->IsSpecial(id);
    info.starts_word = unit.compare(0, kWordStartMarkerBytes, kWordStartMarker) == 0;
    info.text = info.starts_word ? unit.substr(kWordStartMarkerBytes) : unit;
    info.cjk = StartsWithCjk(info.text);
  }
}

int64_t TranscriptBuilder::FrameMs(int64_t frame) const {
  // The product is exact then, and llround of an exact integer is itself.
  if (whole_shift_ms_ > 0) return frame * whole_shift_ms_;
  return std::llround(static_cast<double>(frame) * frame_shift_ms_);
}

void TranscriptBuilder::Fill(int64_t segment_start_frame, Hypothesis* hyp) const {
  const size_t n = hyp->tokens.size();
  OASR_CHECK_EQ(n, hyp->token_frames.size());
  OASR_CHECK_EQ(n, hyp->token_confidences.size());
  const std::vector<int64_t>& f = hyp->token_frames;
  const bool bpe = units_->is_bpe();

  std::string raw;
  hyp->words.clear();
  bool previous_cjk = false;
  bool open_word = false;  // the last word may still take units
  const int64_t segment_start_ms = FrameMs(segment_start_frame);
  for (size_t j = 0; j < n; ++j) {
    const int32_t token = hyp->tokens[j];
    OASR_CHECK(token >= 0 && token < units_->size(), "token id outside the units");
    const UnitInfo& info = info_[token];
    // WeNet's rules; they run over every unit, special ones included.
    int64_t start = std::max(segment_start_ms, FrameMs(f[j]) - word_gap_ms_);
    if (j > 0 && FrameMs(f[j] - f[j - 1]) < word_gap_ms_) start = FrameMs((f[j - 1] + f[j]) / 2);
    int64_t end = FrameMs(f[j]);
    if (j + 1 < n && FrameMs(f[j + 1] - f[j]) < word_gap_ms_) end = FrameMs((f[j] + f[j + 1]) / 2);
    if (info.special) continue;

    raw += units_->Token(token);
    const bool new_word = !open_word || !bpe || info.starts_word || info.cjk || previous_cjk;
    previous_cjk = info.cjk;
    if (new_word) {
      hyp->words.push_back(WordResult{info.text, start, end, hyp->token_confidences[j]});
      open_word = true;
    } else {
      WordResult& word = hyp->words.back();
      word.text += info.text;
      word.end_ms = end;
      word.confidence = std::min(word.confidence, hyp->token_confidences[j]);
    }
  }
  // A lone "▁" unit opens a word with no text; such words carry nothing.
  hyp->words.erase(std::remove_if(hyp->words.begin(), hyp->words.end(),
                                  [](const WordResult& w) { return w.text.empty(); }),
                   hyp->words.end());
  hyp->transcript = bpe ? MarkersToSpaces(raw) : raw;
  if (min_word_confidence_ > 0.0f) {
    const size_t all = hyp->words.size();
    hyp->words.erase(
        std::remove_if(hyp->words.begin(), hyp->words.end(),
                       [this](const WordResult& w) { return w.confidence < min_word_confidence_; }),
        hyp->words.end());
    if (hyp->words.size() != all) {
      hyp->transcript.clear();
      for (const WordResult& word : hyp->words) {
        if (bpe && !hyp->transcript.empty()) hyp->transcript += ' ';
        hyp->transcript += word.text;
      }
    }
  }
  double sum = 0.0;
  for (const WordResult& word : hyp->words) sum += word.confidence;
  hyp->confidence = hyp->words.empty() ? 0.0f : static_cast<float>(sum / hyp->words.size());
}

}  // namespace oasr::decoder
