#include "decoder/ctc_decoder.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status.h"
#include "decoder/greedy_search.h"

namespace oasr::decoder {
namespace {

constexpr int kMaxNbest = 1024;

absl::Status Prefixed(const std::string& prefix, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, std::string(status.message())));
}

// Checks dtype, device, rank and the last dimension of a log-prob tensor.
absl::Status CheckLogProbs(const TensorView& log_probs, int rank, int vocab_size) {
  if (log_probs.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat("log_probs dtype is ", DTypeName(log_probs.dtype()), ", expected float32"));
  }
  if (!log_probs.device().is_cpu()) {
    return absl::InvalidArgumentError(absl::StrCat("log_probs live on ",
                                                   log_probs.device().ToString(),
                                                   "; the CPU decoder reads host memory"));
  }
  if (log_probs.rank() != rank || log_probs.dim(rank - 1) != vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("log_probs shape is ", log_probs.shape().ToString(), ", expected ",
                     rank == 2 ? "[T, " : "[B, T, ", vocab_size, "] (V = number of units)"));
  }
  if (log_probs.numel() > 0 && log_probs.empty()) {
    return absl::InvalidArgumentError("log_probs has elements but no data");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status StreamOptions::Validate() const {
  if (nbest < 1 || nbest > kMaxNbest) {
    return absl::InvalidArgumentError(
        absl::StrCat("nbest = ", nbest, " is outside [1, ", kMaxNbest, "]"));
  }
  if (final_nbest < 0 || final_nbest > kMaxNbest) {
    return absl::InvalidArgumentError(
        absl::StrCat("final_nbest = ", final_nbest, " is outside [0, ", kMaxNbest, "]"));
  }
  return endpoint.Validate();
}

absl::Status CtcDecoderConfig::Validate() const {
  OASR_RETURN_IF_ERROR(Prefixed("search.", search.Validate()));
  if (!(frame_shift_ms > 0.0f && frame_shift_ms <= 1000.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame_shift_ms = ", frame_shift_ms, " is outside (0, 1000]"));
  }
  if (word_gap_ms < 0 || word_gap_ms > 10000) {
    return absl::InvalidArgumentError(
        absl::StrCat("word_gap_ms = ", word_gap_ms, " is outside [0, 10000]"));
  }
  if (!(min_word_confidence >= 0.0f && min_word_confidence <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_word_confidence = ", min_word_confidence, " is outside [0, 1]"));
  }
  return Prefixed("stream.", stream.Validate());
}

absl::StatusOr<bool> UseModelLanguageModel(const std::string& model_dir, const SymbolTable& units,
                                           PrefixBeamSearchOptions* search) {
  OASR_ASSIGN_OR_RETURN(std::optional<LanguageModelSpec> spec, ReadLanguageModelSpec(model_dir));
  if (!spec.has_value()) return false;
  if (!spec->path.empty()) {
    OASR_ASSIGN_OR_RETURN(search->lm, NgramLm::LoadArpa(spec->path, units));
    search->lm_weight = spec->weight;
    search->lm_token_bonus = spec->token_bonus;
  }
  if (!spec->word_path.empty()) {
    OASR_ASSIGN_OR_RETURN(search->word_lm, WordLm::Load(spec->word_path, units));
    search->word_lm_weight = spec->word_weight;
    search->word_bonus = spec->word_bonus;
    search->unknown_word_penalty = spec->unknown_word_penalty;
  }
  return true;
}

CtcStreamState::CtcStreamState(const CtcDecoder* owner, std::unique_ptr<CtcSearch> search,
                               const Endpointer& endpointer)
    : owner_(owner), search_(std::move(search)), endpointer_(endpointer) {}

absl::StatusOr<std::unique_ptr<CtcDecoder>> CtcDecoder::Create(
    const CtcDecoderConfig& config, std::shared_ptr<const SymbolTable> units) {
  OASR_RETURN_IF_ERROR(config.Validate());
  if (units == nullptr) return absl::InvalidArgumentError("units is null");
  if (config.search.blank_id >= units->size()) {
    return absl::InvalidArgumentError(absl::StrCat("search.blank_id = ", config.search.blank_id,
                                                   " is not a unit id (there are ", units->size(),
                                                   " units)"));
  }
  if (config.search.lm != nullptr && config.search.lm->vocab_size() != units->size()) {
    return absl::InvalidArgumentError(absl::StrCat("search.lm was loaded for ",
                                                   config.search.lm->vocab_size(),
                                                   " units, the decoder has ", units->size()));
  }
  if (config.search.word_lm != nullptr && config.search.word_lm->num_units() != units->size()) {
    return absl::InvalidArgumentError(absl::StrCat("search.word_lm was loaded for ",
                                                   config.search.word_lm->num_units(),
                                                   " units, the decoder has ", units->size()));
  }
  std::unique_ptr<CtcDecoder> decoder(new CtcDecoder(config, std::move(units)));
  OASR_RETURN_IF_ERROR(Prefixed("stream.", decoder->CheckOptions(config.stream)));
  return decoder;
}

CtcDecoder::CtcDecoder(const CtcDecoderConfig& config, std::shared_ptr<const SymbolTable> units)
    : config_(config),
      units_(units),
      transcripts_(std::move(units), config.frame_shift_ms, config.word_gap_ms,
                   config.min_word_confidence) {}

std::unique_ptr<DecoderState> CtcDecoder::CreateState() {
  std::unique_ptr<CtcSearch> search;
  if (config_.method == SearchMethod::kGreedy) {
    search = std::make_unique<GreedySearch>(config_.search.blank_id);
  } else {
    search = std::make_unique<PrefixBeamSearch>(config_.search);
  }
  std::unique_ptr<CtcStreamState> state(new CtcStreamState(
      this, std::move(search),
      Endpointer(config_.stream.endpoint, config_.search.blank_id, config_.frame_shift_ms)));
  ApplyOptions(*state, config_.stream);
  return state;
}

void CtcDecoder::ResetState(DecoderState& state) {
  CtcStreamState& st = Cast(state);
  st.search_->Reset();
  st.search_->SetContextGraph(nullptr);
  st.endpointer_.Reset();
  st.frames_ = 0;
  st.segment_start_ = 0;
  st.segment_ = 0;
  st.endpoint_detected_ = false;
  st.finished_ = false;
  st.finals_.clear();
  ApplyOptions(st, config_.stream);
}

absl::Status CtcDecoder::CheckOptions(const StreamOptions& options) const {
  OASR_RETURN_IF_ERROR(options.Validate());
  if (options.context != nullptr) {
    if (options.context->vocab_size() != vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat("context graph was built for ",
                                                     options.context->vocab_size(),
                                                     " units, the decoder has ", vocab_size()));
    }
    if (config_.method == SearchMethod::kGreedy) {
      return absl::InvalidArgumentError(
          "context: phrase boosting needs the prefix beam search (method is greedy)");
    }
  }
  return absl::OkStatus();
}

void CtcDecoder::ApplyOptions(CtcStreamState& state, const StreamOptions& options) const {
  state.options_ = options;  // copy-assignment reuses the rules' storage
  state.endpointer_.Configure(options.endpoint);
  state.search_->SetContextGraph(options.context.get());
}

absl::Status CtcDecoder::ConfigureStream(DecoderState& state, const StreamOptions& options) {
  CtcStreamState& st = Cast(state);
  OASR_RETURN_IF_ERROR(CheckOptions(options));
  if (st.frames_ > 0 || st.finished_) {
    return absl::FailedPreconditionError(
        "ConfigureStream must come before the stream's first frame");
  }
  ApplyOptions(st, options);
  return absl::OkStatus();
}

absl::Status CtcDecoder::DecodeChunk(DecoderState& state, const TensorView& log_probs) {
  CtcStreamState& st = Cast(state);
  OASR_RETURN_IF_ERROR(CheckLogProbs(log_probs, 2, vocab_size()));
  if (st.finished_) return absl::FailedPreconditionError("the stream has finished");
  const float* data = log_probs.numel() > 0 ? log_probs.data<float>() : nullptr;
  DecodeRows(st, data, static_cast<int>(log_probs.dim(0)));
  return absl::OkStatus();
}

absl::Status CtcDecoder::CheckBatch(std::span<DecoderState* const> states,
                                    std::span<const int32_t> num_frames, int64_t batch,
                                    int64_t max_frames) {
  if (static_cast<int64_t>(states.size()) != batch ||
      static_cast<int64_t>(num_frames.size()) != batch) {
    return absl::InvalidArgumentError(absl::StrCat("log_probs has ", batch, " streams but ",
                                                   states.size(), " states and ", num_frames.size(),
                                                   " frame counts were given"));
  }
  const uint64_t mark = batch_counter_.fetch_add(1) + 1;
  for (int64_t b = 0; b < batch; ++b) {
    if (states[b] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("states[", b, "] is null"));
    }
    if (num_frames[b] < 0 || num_frames[b] > max_frames) {
      return absl::InvalidArgumentError(absl::StrCat("num_frames[", b, "] = ", num_frames[b],
                                                     " is outside [0, ", max_frames, "]"));
    }
    CtcStreamState& st = Cast(*states[b]);
    if (st.finished_) {
      return absl::FailedPreconditionError(absl::StrCat("states[", b, "] has finished"));
    }
    if (st.batch_mark_ == mark) {
      return absl::InvalidArgumentError(absl::StrCat("states[", b, "] appears twice"));
    }
    st.batch_mark_ = mark;
  }
  return absl::OkStatus();
}

absl::Status CtcDecoder::DecodeChunks(std::span<DecoderState* const> states,
                                      const TensorView& log_probs,
                                      std::span<const int32_t> num_frames) {
  // Plan: check everything first, so that a failure changes no stream.
  OASR_RETURN_IF_ERROR(CheckLogProbs(log_probs, 3, vocab_size()));
  const int64_t batch = log_probs.dim(0);
  const int64_t max_frames = log_probs.dim(1);
  OASR_RETURN_IF_ERROR(CheckBatch(states, num_frames, batch, max_frames));
  // Commit.
  const int64_t stride = max_frames * vocab_size();
  for (int64_t b = 0; b < batch; ++b) {
    const float* data = stride > 0 ? log_probs.data<float>() + b * stride : nullptr;
    DecodeRows(Cast(*states[b]), data, num_frames[b]);
  }
  return absl::OkStatus();
}

absl::Status CtcDecoder::DecodeChunksPruned(std::span<DecoderState* const> states,
                                            const PrunedChunks& chunks,
                                            std::span<const int32_t> num_frames) {
  if (chunks.k < 1 || chunks.batch < 0 || chunks.max_frames < 0 ||
      (chunks.batch * chunks.max_frames > 0 &&
       (chunks.ids == nullptr || chunks.log_probs == nullptr || chunks.blank == nullptr))) {
    return absl::InvalidArgumentError(absl::StrCat("pruned chunks: ", chunks.batch, " x ",
                                                   chunks.max_frames, " frames of ", chunks.k,
                                                   " candidates (k >= 1 and every array needed)"));
  }
  OASR_RETURN_IF_ERROR(CheckBatch(states, num_frames, chunks.batch, chunks.max_frames));
  for (int64_t b = 0; b < chunks.batch; ++b) {
    const int64_t frame = b * chunks.max_frames;
    PrunedFrames f;
    f.ids = chunks.ids + frame * chunks.k;
    f.log_probs = chunks.log_probs + frame * chunks.k;
    f.blank = chunks.blank + frame;
    f.k = chunks.k;
    f.num_frames = num_frames[b];
    DecodeRowsPruned(Cast(*states[b]), f);
  }
  return absl::OkStatus();
}

int CtcDecoder::candidates_per_frame() const {
  if (config_.method == SearchMethod::kGreedy) return 1;
  return std::min(config_.search.first_beam_size, vocab_size());
}

void CtcDecoder::DecodeRows(CtcStreamState& st, const float* log_probs, int num_frames) const {
  st.endpoint_detected_ = false;
  if (num_frames == 0) return;
  st.search_->Search(log_probs, num_frames, vocab_size());
  AfterRows(st, num_frames,
            st.endpointer_.Update(log_probs, num_frames, vocab_size(),
                                  st.search_->DecodedSomething()));
}

void CtcDecoder::DecodeRowsPruned(CtcStreamState& st, const PrunedFrames& frames) const {
  st.endpoint_detected_ = false;
  if (frames.num_frames == 0) return;
  st.search_->SearchPruned(frames, vocab_size());
  AfterRows(st, frames.num_frames,
            st.endpointer_.UpdateBlank(frames.blank, frames.num_frames,
                                       st.search_->DecodedSomething()));
}

void CtcDecoder::AfterRows(CtcStreamState& st, int num_frames, int rule) const {
  st.frames_ += num_frames;
  if (rule < 0) return;
  st.endpoint_detected_ = true;
  EndSegment(st, rule);
  if (st.options_.single_utterance) st.finished_ = true;
}

void CtcDecoder::EndSegment(CtcStreamState& st, int endpoint_rule) const {
  st.search_->Finalize();
  st.finals_.push_back(BuildResult(st, /*is_final=*/true, endpoint_rule));
  ++st.segment_;
  st.segment_start_ = st.frames_;
  st.search_->Reset();  // keeps the context graph for the next segment
  st.endpointer_.Reset();
}

absl::Status CtcDecoder::FinalizeStream(DecoderState& state) {
  CtcStreamState& st = Cast(state);
  if (st.finished_) return absl::OkStatus();
  // An empty segment after an endpoint has nothing to report; a stream that
  // never reported anything still gets its (possibly empty) final result.
  if (st.frames_ > st.segment_start_ || st.segment_ == 0) EndSegment(st, -1);
  st.endpoint_detected_ = false;
  st.finished_ = true;
  return absl::OkStatus();
}

DecodeResult CtcDecoder::BuildResult(const CtcStreamState& st, bool is_final,
                                     int endpoint_rule) const {
  DecodeResult result;
  result.is_final = is_final;
  result.segment = st.segment_;
  result.start_ms = transcripts_.FrameMs(st.segment_start_);
  result.end_ms = transcripts_.FrameMs(st.frames_);
  result.endpoint_rule = endpoint_rule;
  result.start_frame = st.segment_start_;
  result.end_frame = st.frames_;
  const int wanted = is_final && st.options_.final_nbest > 0 ? st.options_.final_nbest
                                                             : st.options_.nbest;
  const int n = std::min(wanted, st.search_->NumHypotheses());
  result.nbest.resize(n);
  for (int i = 0; i < n; ++i) {
    Hypothesis& hyp = result.nbest[i];
    st.search_->GetHypothesis(i, &hyp);
    for (int64_t& frame : hyp.token_frames) frame += st.segment_start_;
    transcripts_.Fill(st.segment_start_, &hyp);
  }
  return result;
}

DecodeResult CtcDecoder::PartialResult(const DecoderState& state) const {
  return BuildResult(Cast(state), /*is_final=*/false, -1);
}

uint64_t CtcDecoder::PartialRevision(const DecoderState& state) const {
  return Cast(state).search_->Revision();
}

std::vector<DecodeResult> CtcDecoder::TakeFinalResults(DecoderState& state) const {
  CtcStreamState& st = Cast(state);
  std::vector<DecodeResult> out;
  out.swap(st.finals_);
  return out;
}

StreamStatus CtcDecoder::GetStatus(const DecoderState& state) const {
  const CtcStreamState& st = Cast(state);
  return StreamStatus{st.frames_, st.segment_, st.endpoint_detected_, st.finished_,
                      st.finals_.size()};
}

CtcStreamState& CtcDecoder::Cast(DecoderState& state) const {
  auto* st = dynamic_cast<CtcStreamState*>(&state);
  OASR_CHECK(st != nullptr && st->owner_ == this, "decoder state was not created by this decoder");
  return *st;
}

const CtcStreamState& CtcDecoder::Cast(const DecoderState& state) const {
  return Cast(const_cast<DecoderState&>(state));
}

}  // namespace oasr::decoder
