// The streaming CTC decoder: per-stream states fed chunk by chunk with CTC
// log-probabilities, greedy or prefix beam search, phrase boosting,
// endpointing with continuous or single-utterance decoding, and results with
// transcripts, word timestamps and confidences.
//
// Usage (sherpa-onnx's shape; the engine batches many streams):
//   auto decoder = CtcDecoder::Create(config, units);        // once per model
//   auto state = (*decoder)->CreateState();                   // or DecoderStatePool::Acquire
//   (*decoder)->ConfigureStream(*state, options);             // phrases, endpoint...
//   for each chunk: (*decoder)->DecodeChunk(*state, log_probs);   // [T, V]
//                   read PartialResult / TakeFinalResults / GetStatus
//   (*decoder)->FinalizeStream(*state); TakeFinalResults(*state);
//   (*decoder)->ResetState(*state);                           // back to the pool
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "decoder/context_graph.h"
#include "decoder/ctc_search.h"
#include "decoder/decode_result.h"
#include "decoder/endpoint.h"
#include "decoder/pooled_decoder.h"
#include "decoder/prefix_beam_search.h"
#include "decoder/symbol_table.h"
#include "decoder/transcript_builder.h"

namespace oasr::decoder {

enum class SearchMethod { kGreedy, kPrefixBeam };

// What one request chooses for its stream.
struct StreamOptions {
  int nbest = 10;  // hypotheses per result (max_alternatives), capped by the beam
  // Hypotheses per final result when it differs (attention rescoring takes
  // the whole beam, then keeps nbest); 0: nbest.
  int final_nbest = 0;
  // Stop at the first endpoint (the stream then accepts no more chunks)
  // instead of finishing the segment and decoding on (continuous decoding).
  bool single_utterance = false;
  EndpointConfig endpoint;
  // Phrase boosting; nullptr for none. Built for this decoder's units.
  std::shared_ptr<const ContextGraph> context;

  // INVALID_ARGUMENT naming the field, its value and the limit: nbest in
  // [1, 1024], final_nbest in [0, 1024], plus EndpointConfig::Validate.
  absl::Status Validate() const;
};

struct CtcDecoderConfig {
  SearchMethod method = SearchMethod::kPrefixBeam;
  PrefixBeamSearchOptions search;  // beam sizes, blank id, blank skipping
  float frame_shift_ms = 40.0f;    // one CTC frame: 4x subsampling of 10 ms
  int word_gap_ms = 100;           // WeNet's time_stamp_gap
  // Words whose confidence (docs/decoder.md) is below this are left out of
  // the transcripts; 0 keeps every word. A model's default is its
  // config.json serving.min_word_confidence.
  float min_word_confidence = 0.0f;
  StreamOptions stream;            // defaults of every new or reset stream

  // INVALID_ARGUMENT naming the field, its value and the limit:
  // search.* (PrefixBeamSearchOptions::Validate), frame_shift_ms in (0, 1000],
  // word_gap_ms in [0, 10000], min_word_confidence in [0, 1], stream.*
  // (StreamOptions::Validate).
  absl::Status Validate() const;
};

// Where a stream stands after its last call.
struct StreamStatus {
  int64_t frames_decoded = 0;      // since the stream started
  int32_t segment = 0;             // index of the segment now being decoded
  bool endpoint_detected = false;  // the last chunk ended a segment at an endpoint
  bool finished = false;           // no more chunks accepted
  size_t final_results = 0;        // final results waiting in TakeFinalResults
};

class CtcDecoder;

// A batch of chunks pruned to their frames' candidates (PrunedFrames per
// stream): ids and log_probs [batch, max_frames, k], blank [batch,
// max_frames], host, row-major. Non-owning.
struct PrunedChunks {
  const int32_t* ids = nullptr;
  const float* log_probs = nullptr;
  const float* blank = nullptr;
  int64_t batch = 0;
  int64_t max_frames = 0;
  int k = 0;
};

// Per-stream state: search, endpointer, options and finished segments. Made
// by CtcDecoder::CreateState; opaque to everyone else.
class CtcStreamState final : public DecoderState {
 private:
  friend class CtcDecoder;
  CtcStreamState(const CtcDecoder* owner, std::unique_ptr<CtcSearch> search,
                 const Endpointer& endpointer);

  const CtcDecoder* owner_;
  std::unique_ptr<CtcSearch> search_;
  Endpointer endpointer_;
  StreamOptions options_;
  int64_t frames_ = 0;         // since the stream started
  int64_t segment_start_ = 0;  // first frame of the current segment
  int32_t segment_ = 0;
  bool endpoint_detected_ = false;
  bool finished_ = false;
  std::vector<DecodeResult> finals_;
  uint64_t batch_mark_ = 0;  // duplicate detection in DecodeChunks
};

// Thread-safety: the decoder is immutable after Create. Calls on different
// states may run concurrently; calls on one state must not overlap. A state
// must only be handed to the decoder that created it (CHECK).
class CtcDecoder final : public PooledDecoder {
 public:
  // INVALID_ARGUMENT when `config` does not validate, `units` is null, the
  // blank id is not a unit, or the default phrase graph was built for another
  // vocabulary size.
  static absl::StatusOr<std::unique_ptr<CtcDecoder>> Create(
      const CtcDecoderConfig& config, std::shared_ptr<const SymbolTable> units);

  // A fresh state with the default stream options. The caller owns it.
  std::unique_ptr<DecoderState> CreateState() override;

  // Back to exactly what CreateState returns (default options, no frames, no
  // results), keeping every buffer's capacity.
  void ResetState(DecoderState& state) override;

  // Sets `options` for the stream (copied; the context graph is shared).
  // INVALID_ARGUMENT for invalid options, a context graph built for another
  // vocabulary, or phrases with the greedy search; FAILED_PRECONDITION after
  // the first non-empty chunk. On failure the stream is unchanged.
  absl::Status ConfigureStream(DecoderState& state, const StreamOptions& options);

  // Decodes one chunk, `log_probs` float32 [T, V] on the host (T may be 0),
  // then evaluates the endpoint rules. At an endpoint the segment's final
  // result is queued (TakeFinalResults) and either a new segment starts or,
  // with single_utterance, the stream finishes. INVALID_ARGUMENT for another
  // dtype, rank, V or device; FAILED_PRECONDITION for a finished stream. On
  // failure the stream is unchanged.
  absl::Status DecodeChunk(DecoderState& state, const TensorView& log_probs) override;

  // DecodeChunk for many streams: `log_probs` float32 [B, T, V] on the host,
  // stream b owning rows [0, num_frames[b]) of slice b (the rest is padding).
  // Everything is checked before any stream changes: INVALID_ARGUMENT for a
  // shape mismatch, a count outside [0, T], a null or repeated state;
  // FAILED_PRECONDITION for a finished stream (its index is named).
  absl::Status DecodeChunks(std::span<DecoderState* const> states, const TensorView& log_probs,
                            std::span<const int32_t> num_frames);

  // DecodeChunks from each frame's candidates instead of its full row (GPU
  // serving copies only these to the host): `chunks` holds B slices of T
  // frames, stream b owning frames [0, num_frames[b]) of slice b. With
  // chunks.k >= candidates_per_frame() the results are exactly
  // DecodeChunks' on the rows the candidates were selected from. Same
  // checks and errors as DecodeChunks (INVALID_ARGUMENT also for k < 1).
  absl::Status DecodeChunksPruned(std::span<DecoderState* const> states,
                                  const PrunedChunks& chunks, std::span<const int32_t> num_frames);

  // The units per frame the search reads (1 for the greedy search,
  // min(first_beam_size, V) for the prefix beam search): what pruned
  // decoding must keep to decode exactly.
  int candidates_per_frame() const;

  // The audio has ended: the current segment's final result is queued
  // (unless it is empty and an earlier segment was already reported) and the
  // stream finishes. OK and nothing more on a finished stream.
  absl::Status FinalizeStream(DecoderState& state) override;

  // The current segment's interim n-best (is_final false). Allocates the
  // result; the state is untouched. Empty n-best lists never occur: before
  // the first frame of a segment, and once the stream has finished, it holds
  // one empty hypothesis.
  DecodeResult PartialResult(const DecoderState& state) const;

  // What PartialResult's transcripts are made from, as a number: while it
  // stays the same (frames of blank, a token's run going on) so do they, and
  // a caller that built them at this revision need not build them again.
  // It changes at every new segment and every ResetState.
  uint64_t PartialRevision(const DecoderState& state) const;

  // Moves out the final results queued since the last call, oldest first.
  std::vector<DecodeResult> TakeFinalResults(DecoderState& state) const;

  StreamStatus GetStatus(const DecoderState& state) const;

  const CtcDecoderConfig& config() const { return config_; }
  const SymbolTable& units() const { return *units_; }
  int vocab_size() const { return units_->size(); }

 private:
  CtcDecoder(const CtcDecoderConfig& config, std::shared_ptr<const SymbolTable> units);

  CtcStreamState& Cast(DecoderState& state) const;
  const CtcStreamState& Cast(const DecoderState& state) const;
  absl::Status CheckOptions(const StreamOptions& options) const;
  void ApplyOptions(CtcStreamState& state, const StreamOptions& options) const;
  void DecodeRows(CtcStreamState& state, const float* log_probs, int num_frames) const;
  void DecodeRowsPruned(CtcStreamState& state, const PrunedFrames& frames) const;
  // After a chunk's frames were searched and the endpoint rule evaluated.
  void AfterRows(CtcStreamState& state, int num_frames, int endpoint_rule) const;
  // DecodeChunks' plan: every state and count checked and marked, nothing
  // changed on error.
  absl::Status CheckBatch(std::span<DecoderState* const> states,
                          std::span<const int32_t> num_frames, int64_t batch,
                          int64_t max_frames);
  void EndSegment(CtcStreamState& state, int endpoint_rule) const;
  DecodeResult BuildResult(const CtcStreamState& state, bool is_final, int endpoint_rule) const;

  CtcDecoderConfig config_;
  std::shared_ptr<const SymbolTable> units_;
  TranscriptBuilder transcripts_;
  std::atomic<uint64_t> batch_counter_{0};
};

// Loads the language models of `model_dir` (lm.json, see ReadLanguageModelSpec)
// into `search`: lm with the lm_weight and lm_token_bonus it was tuned with,
// and word_lm with word_lm_weight, word_bonus and unknown_word_penalty, for
// those lm.json names. Returns false, leaving `search` alone, when the
// directory has no lm.json; errors are ReadLanguageModelSpec's,
// NgramLm::LoadArpa's and WordLm::Load's.
absl::StatusOr<bool> UseModelLanguageModel(const std::string& model_dir, const SymbolTable& units,
                                           PrefixBeamSearchOptions* search);

}  // namespace oasr::decoder
