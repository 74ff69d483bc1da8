// Attention rescoring in the engine: the segment memory's bookkeeping, and
// streams of a U2++ fixture model whose finals are rescored over exactly
// their segment's encoder output (checked against the rescorer run on what
// the model wrote into the plan), whose interim results are not, with the
// request's n-best kept of the whole beam; a request may turn it off, and a
// segment past the rescoring window keeps the CTC order. The *_gpu_test
// build runs the engines on CUDA (eagerly, where the encoder output is
// recorded; replaying CUDA graphs against the eager engine otherwise), the
// independent check staying on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "decoder/symbol_table.h"
#include "scheduler/conformer_streaming_model.h"
#include "scheduler/engine.h"
#include "scheduler/model_factory.h"
#include "scheduler/nbest_rescoring.h"
#include "scheduler/segment_memory.h"
#include "tests/encoder/test_util.h"

namespace oasr::scheduler {
namespace {

const std::string kGolden = OASR_ENCODER_FIXTURES;

// --- SegmentMemory -------------------------------------------------------

// Frame f of a stream as a row: f * 10 + j.
std::vector<float> Rows(int64_t first, int64_t n, int64_t dim) {
  std::vector<float> out(static_cast<size_t>(n * dim));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < dim; ++j) out[r * dim + j] = static_cast<float>((first + r) * 10 + j);
  return out;
}

std::unique_ptr<ExecutionContext> CpuContext() {
  auto ctx = ExecutionContext::Create(ExecutionContextOptions{});
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  return std::move(*ctx);
}

// A pool on the CPU: appends of n frames from frame f, one at a time.
struct Memory {
  std::unique_ptr<ExecutionContext> ctx = CpuContext();
  SegmentMemory m;
  int64_t dim;
  Memory(int slots, int64_t max_frames, int64_t dim, int64_t block, int64_t pool_frames = 0)
      : m(*SegmentMemory::Create({slots, max_frames, dim, block, pool_frames, 4}, ctx.get())),
        dim(dim) {}
  void Append(int slot, int64_t f, int64_t n) {
    const std::vector<float> rows = Rows(f, n, dim);
    // Row 1 of a cohort of two: the source row offset is honoured.
    std::vector<float> src(static_cast<size_t>((n + 1) * dim), -1.0f);
    std::copy(rows.begin(), rows.end(), src.begin() + dim);
    m.Append(slot, f, 1, n);
    ASSERT_TRUE(m.Flush(src.data()).ok());
  }
  // The frames [begin, end) as held, or empty when they are not.
  std::vector<float> Get(int slot, int64_t begin, int64_t end) {
    if (!m.Held(slot, begin, end)) {
      EXPECT_EQ(m.Gather(slot, begin, end, nullptr).code(), absl::StatusCode::kFailedPrecondition);
      return {};
    }
    std::vector<float> out(static_cast<size_t>((end - begin) * dim));
    EXPECT_TRUE(m.Gather(slot, begin, end, out.data()).ok());
    return out;
  }
};

TEST(SegmentMemoryTest, HoldsAppendedFramesAndForgetsFinishedSegments) {
  Memory mem(2, 10, 3, 4);
  mem.m.Reset(1);
  mem.Append(1, 0, 4);
  mem.Append(1, 4, 4);
  EXPECT_EQ(mem.Get(1, 0, 8), Rows(0, 8, 3));
  EXPECT_TRUE(mem.Get(1, 0, 9).empty());  // Not decoded yet.
  EXPECT_EQ(mem.m.blocks_free(), mem.m.blocks_total() - 2);
  // A segment [0, 6) ends: frames 6, 7 stay for the next one, and the
  // block of frames 0-3 goes back.
  mem.m.Forget(1, 6);
  EXPECT_TRUE(mem.Get(1, 0, 6).empty());
  EXPECT_EQ(mem.Get(1, 6, 8), Rows(6, 2, 3));
  EXPECT_EQ(mem.m.blocks_free(), mem.m.blocks_total() - 1);
  // Chunks not aligned to the blocks span two.
  mem.Append(1, 8, 3);
  mem.Append(1, 11, 3);
  EXPECT_EQ(mem.Get(1, 6, 14), Rows(6, 8, 3));
  // Slot 0 is untouched; a stream's end gives every block back.
  mem.m.Reset(0);
  EXPECT_TRUE(mem.Get(0, 0, 1).empty());
  mem.m.Reset(1);
  EXPECT_EQ(mem.m.blocks_free(), mem.m.blocks_total());
  // Every slot its whole window by default: 10 frames of blocks of 4 may
  // touch 4 blocks.
  EXPECT_EQ(mem.m.blocks_total(), 2 * 4);
}

TEST(SegmentMemoryTest, ASegmentPastTheCeilingIsNotHeldButTheNextOneIs) {
  Memory mem(1, 6, 2, 4);
  mem.m.Reset(0);
  for (int64_t f = 0; f < 12; f += 4) mem.Append(0, f, 4);
  // 12 frames of one segment do not fit in 6: the slot started over at 8.
  EXPECT_TRUE(mem.Get(0, 0, 12).empty());
  EXPECT_TRUE(mem.Get(0, 4, 12).empty());
  EXPECT_EQ(mem.Get(0, 8, 12), Rows(8, 4, 2));
  // The long segment ended at 10; the next, from 10, is held.
  mem.m.Forget(0, 10);
  mem.Append(0, 12, 4);
  EXPECT_EQ(mem.Get(0, 10, 16), Rows(10, 6, 2));
  // A gap (frames never appended) starts over.
  mem.Append(0, 20, 2);
  EXPECT_TRUE(mem.Get(0, 10, 16).empty());
  EXPECT_EQ(mem.Get(0, 20, 22), Rows(20, 2, 2));
  // A chunk longer than the window leaves nothing held.
  mem.Append(0, 22, 7);
  EXPECT_TRUE(mem.Get(0, 22, 29).empty());
  EXPECT_EQ(mem.m.blocks_free(), mem.m.blocks_total());
  auto ctx = CpuContext();
  EXPECT_FALSE(SegmentMemory::Create({0, 6, 2, 4, 0, 4}, ctx.get()).ok());
  EXPECT_FALSE(SegmentMemory::Create({1, 6, 2, 0, 0, 4}, ctx.get()).ok());
  EXPECT_FALSE(SegmentMemory::Create({1, 6, 2, 4, 0, 4}, nullptr).ok());
}

TEST(SegmentMemoryTest, AnEmptyPoolCostsOnlyTheSegmentThatFindsItEmpty) {
  // Three slots share 4 blocks of 4 frames (one window of 12 frames).
  Memory mem(3, 12, 2, 4, 16);
  EXPECT_EQ(mem.m.blocks_total(), 4);
  for (int slot = 0; slot < 3; ++slot) mem.m.Reset(slot);
  mem.Append(0, 0, 4);
  mem.Append(0, 4, 4);
  mem.Append(1, 0, 4);
  mem.Append(2, 0, 4);  // The last block.
  EXPECT_EQ(mem.m.blocks_free(), 0);
  // Slot 1's next chunk finds the pool empty: it starts over on its own
  // block, and its segment is no longer held whole; the others keep theirs.
  mem.Append(1, 4, 4);
  EXPECT_EQ(mem.m.exhausted(), 1);
  EXPECT_TRUE(mem.Get(1, 0, 8).empty());
  EXPECT_EQ(mem.Get(1, 4, 8), Rows(4, 4, 2));
  EXPECT_EQ(mem.Get(0, 0, 8), Rows(0, 8, 2));
  EXPECT_EQ(mem.Get(2, 0, 4), Rows(0, 4, 2));
  // Slot 0's segment ends at 8: its blocks go back, and slot 2 grows again.
  mem.m.Forget(0, 8);
  EXPECT_EQ(mem.m.blocks_free(), 2);
  mem.Append(2, 4, 4);
  EXPECT_EQ(mem.Get(2, 0, 8), Rows(0, 8, 2));
  EXPECT_EQ(mem.m.exhausted(), 1);
}

// --- The engine ----------------------------------------------------------

// The real model, recording the encoder output the engine asked it for.
class RecordingModel final : public StreamingModel {
 public:
  explicit RecordingModel(std::unique_ptr<ConformerStreamingModel> inner)
      : inner_(std::move(inner)) {}
  const ModelGeometry& geometry() const override { return inner_->geometry(); }
  cache::CacheConfig BaseCacheConfig() const override { return inner_->BaseCacheConfig(); }
  std::vector<cache::StreamStateSpec> StreamStates() const override {
    return inner_->StreamStates();
  }
  ExecutionContext& context() const override { return inner_->context(); }
  size_t WorkspaceBytes(int max_batch) const override { return inner_->WorkspaceBytes(max_batch); }
  absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> CreateFrontEnd(
      int sample_rate) const override {
    return inner_->CreateFrontEnd(sample_rate);
  }
  absl::Status ForwardCohort(const CohortPlan& plan, const TensorView& log_probs) override {
    absl::Status status = inner_->ForwardCohort(plan, log_probs);
    if (!status.ok() || plan.encoder_out.empty()) return status;
    const int64_t d = geometry().encoder_dim;
    std::vector<float> host(static_cast<size_t>(plan.encoder_out.numel()));
    if (plan.encoder_out.device().is_cuda()) {
      OASR_RETURN_IF_ERROR(context().Synchronize());
    }
    OASR_RETURN_IF_ERROR(CopyTensor(
        TensorView(host.data(), DType::kFloat32, plan.encoder_out.shape(), Device::Cpu()),
        plan.encoder_out));
    const float* eo = host.data();
    for (int b = 0; b < plan.batch; ++b) {
      std::vector<float>& out = frames_[plan.host_slots[b]];
      const int64_t offset = plan.host_offsets[b];
      out.resize(static_cast<size_t>((offset + plan.host_frames[b]) * d));
      std::copy(eo + int64_t{b} * plan.chunk * d,
                eo + (int64_t{b} * plan.chunk + plan.host_frames[b]) * d, out.begin() + offset * d);
    }
    return status;
  }
  const encoder::ConformerModel& model() const { return inner_->model(); }
  // Encoder output by slot, every frame since the stream started. Read
  // only after the engine stopped (the scheduler thread writes it).
  // The one stream's (every test here runs one).
  const std::vector<float>& only_stream() const {
    EXPECT_EQ(frames_.size(), 1u);
    return frames_.begin()->second;
  }

 private:
  std::unique_ptr<ConformerStreamingModel> inner_;
  std::map<int, std::vector<float>> frames_;
};

std::vector<int16_t> Speechlike(double seconds) {
  std::vector<int16_t> out(static_cast<size_t>(seconds * 16000));
  for (size_t i = 0; i < out.size(); ++i) {
    const double t = i / 16000.0;
    const double env = 0.5 + 0.5 * std::sin(2 * M_PI * 2.1 * t);
    const double f = 300 + 200 * std::sin(2 * M_PI * 0.7 * t);
    out[i] = static_cast<int16_t>(
        7000 * env * (std::sin(2 * M_PI * f * t) + 0.4 * std::sin(2 * M_PI * 3.1 * f * t)));
  }
  return out;
}

struct Outcome {
  std::vector<decoder::DecodeResult> finals;
  std::vector<std::string> partials;  // Interim transcripts, in order.
  int64_t rescored = 0, not_rescored = 0;
  std::vector<float> memory;  // The stream's encoder output (rescoring engines).
};

// One stream of `audio` through an engine on the fixture `name`.
Outcome Transcribe(const std::string& name, EngineConfig config, const StreamRequest& request,
                   const std::vector<int16_t>& audio) {
  Outcome run;
  ConformerModelOptions model_options;
  model_options.device = encoder::testing::TestDevice();
  auto inner = ConformerStreamingModel::Load(kGolden + "/" + name + "/model", model_options);
  EXPECT_TRUE(inner.ok()) << inner.status();
  if (!inner.ok()) return run;
  auto model = std::make_unique<RecordingModel>(std::move(*inner));
  RecordingModel* recorder = model.get();
  config.max_batch_size = 2;
  config.cuda_graphs = false;  // The recording copies to the host: nothing to capture.
  config.decoder.frame_shift_ms = static_cast<float>(model->geometry().FrameShiftMs());
  auto units = decoder::SymbolTable::Load(kGolden + "/" + name + "/model/units.txt");
  EXPECT_TRUE(units.ok());
  auto ctc = decoder::CtcDecoder::Create(
      config.decoder, std::make_shared<const decoder::SymbolTable>(std::move(*units)));
  EXPECT_TRUE(ctc.ok()) << ctc.status();
  std::unique_ptr<encoder::AttentionRescorer> rescorer;
  if (config.attention_rescoring) {
    encoder::RescorerOptions options;
    options.max_frames = static_cast<int64_t>(
        std::ceil(config.rescoring_max_segment_s * 1000 / model->geometry().FrameShiftMs()));
    auto created =
        encoder::AttentionRescorer::Create(&recorder->model(), &model->context(), options);
    EXPECT_TRUE(created.ok()) << created.status();
    rescorer = std::move(*created);
  }
  auto engine = Engine::Create(config, std::move(model), std::move(*ctc), std::move(rescorer));
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return run;
  auto stream = (*engine)->OpenStream(request);
  EXPECT_TRUE(stream.ok());
  // In pieces, as a client would send them.
  for (size_t at = 0; at < audio.size(); at += 1600) {
    const size_t n = std::min<size_t>(1600, audio.size() - at);
    EXPECT_TRUE((*stream)->PushAudio({audio.data() + at, n}).ok());
  }
  EXPECT_TRUE((*stream)->EndAudio().ok());
  StreamEvent event;
  for (int i = 0; i < 100000 && !event.finish; ++i) {
    if (!(*stream)->outbox().WaitPop(&event, 60)) break;
    for (decoder::DecodeResult& r : event.results) {
      if (r.is_final) {
        run.finals.push_back(std::move(r));
      } else {
        run.partials.push_back(r.nbest.empty() ? "" : r.nbest[0].transcript);
      }
    }
  }
  EXPECT_EQ(event.finish, FinishReason::kStop);
  run.rescored = (*engine)->stats().segments_rescored.load();
  run.not_rescored = (*engine)->stats().segments_not_rescored.load();
  (*engine)->Stop();  // The scheduler thread has stopped: the recording is stable.
  if (config.attention_rescoring) run.memory = recorder->only_stream();  // The engine owns it.
  return run;
}

EngineConfig Config(bool rescoring) {
  EngineConfig config;
  config.attention_rescoring = rescoring;
  return config;
}

StreamRequest Request(int nbest, bool segments) {
  StreamRequest request;
  request.interim_results = true;
  request.decode.nbest = nbest;
  if (segments) {
    // A segment every second of audio, whatever the model hears.
    request.decode.endpoint.rules = {{false, 0, 1000}};
  } else {
    request.decode.endpoint.enabled = false;
  }
  return request;
}

class EngineRescoringTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineRescoringTest, FinalsAreRescoredOverTheirSegmentAndInterimsAreNot) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  const std::vector<int16_t> audio = Speechlike(3.3);
  constexpr size_t kNbest = 3;
  int reordered = 0;
  for (bool segments : {false, true}) {
    SCOPED_TRACE(segments ? "segments at endpoints" : "one segment");
    // The CTC n-best of the whole beam, unrescored.
    const Outcome ctc = Transcribe(GetParam(), Config(false), Request(10, segments), audio);
    const Outcome got =
        Transcribe(GetParam(), Config(true), Request(static_cast<int>(kNbest), segments), audio);
    ASSERT_EQ(got.finals.size(), ctc.finals.size());
    ASSERT_GE(got.finals.size(), segments ? 2u : 1u);
    EXPECT_EQ(got.partials, ctc.partials) << "interim results are CTC-only";
    EXPECT_EQ(got.rescored, static_cast<int64_t>(got.finals.size()));
    EXPECT_EQ(got.not_rescored, 0);
    // Rescored independently: the rescorer over the frames the model wrote
    // for each segment, applied to the CTC engine's n-best.
    auto model = encoder::ConformerModel::Load(kGolden + "/" + GetParam() + "/model");
    ASSERT_TRUE(model.ok());
    auto ctx = ExecutionContext::Create(ExecutionContextOptions{});
    ASSERT_TRUE(ctx.ok());
    // The engine's window (30 s), so that hypotheses are grouped as there.
    encoder::RescorerOptions options;
    options.max_frames =
        static_cast<int64_t>(std::ceil(Config(true).rescoring_max_segment_s * 1000 /
                                       (10.0 * model->get()->config().subsampling_rate())));
    auto rescorer = encoder::AttentionRescorer::Create(model->get(), ctx->get(), options);
    ASSERT_TRUE(rescorer.ok()) << rescorer.status();
    const encoder::RescoringWeights& weights = (*model)->attention_decoder()->config.rescoring;
    auto total = [&](const decoder::Hypothesis& h) {
      return weights.rescoring_weight * h.attention_score + weights.ctc_weight * h.score;
    };
    // The same computation on the same frames: equal but for float32
    // summation order.
    auto tolerance = [](double x) { return 1e-4 + 1e-5 * std::fabs(x); };
    const int64_t d = (*model)->config().output_size;
    for (size_t s = 0; s < got.finals.size(); ++s) {
      SCOPED_TRACE(absl::StrCat("segment ", s));
      const decoder::DecodeResult& r = got.finals[s];
      decoder::DecodeResult want = ctc.finals[s];  // The whole beam, rescored here.
      EXPECT_EQ(r.start_frame, want.start_frame);
      EXPECT_EQ(r.end_frame, want.end_frame);
      EXPECT_TRUE(r.rescored);
      EXPECT_FALSE(want.rescored);
      ASSERT_LE(static_cast<size_t>(r.end_frame * d), got.memory.size());
      ASSERT_TRUE(RescoreResult(**rescorer, weights, got.memory.data() + r.start_frame * d,
                                r.end_frame - r.start_frame, want.nbest.size(), &want)
                      .ok());
      ASSERT_EQ(r.nbest.size(), std::min<size_t>(kNbest, want.nbest.size()));
      for (size_t i = 0; i < r.nbest.size(); ++i) {
        // Each kept hypothesis with the decoder score it gets here ...
        auto same = std::find_if(want.nbest.begin(), want.nbest.end(),
                                 [&](const auto& h) { return h.tokens == r.nbest[i].tokens; });
        ASSERT_NE(same, want.nbest.end()) << "hyp " << i << " is not in the CTC beam";
        EXPECT_NEAR(r.nbest[i].attention_score, same->attention_score,
                    tolerance(same->attention_score))
            << "hyp " << i;
        EXPECT_NE(r.nbest[i].attention_score, 0.0f);
        // ... in the order of the totals ...
        if (i > 0) {
          EXPECT_GE(total(r.nbest[i - 1]) + tolerance(total(r.nbest[i])), total(r.nbest[i]));
        }
        // ... and the best ones of the beam, where no near tie blurs the cut.
        const bool clear =
            i + 1 >= want.nbest.size() ||
            total(want.nbest[i]) - total(want.nbest[i + 1]) > 10 * tolerance(total(want.nbest[i]));
        if (clear) {
          EXPECT_EQ(r.nbest[i].tokens, want.nbest[i].tokens) << "hyp " << i;
        }
      }
      for (size_t i = 0; i < want.nbest.size(); ++i) {
        reordered += want.nbest[i].tokens != ctc.finals[s].nbest[i].tokens;
      }
    }
  }
  // The random decoder reorders some n-best, or the checks above could not
  // tell rescoring from none.
  EXPECT_GT(reordered, 0);
}

TEST_P(EngineRescoringTest, ARequestTurnsItOffAndALongSegmentKeepsTheCtcOrder) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  const std::vector<int16_t> audio = Speechlike(2.5);
  const Outcome ctc = Transcribe(GetParam(), Config(false), Request(2, false), audio);
  StreamRequest off = Request(2, false);
  off.attention_rescoring = false;
  const Outcome unasked = Transcribe(GetParam(), Config(true), off, audio);
  EngineConfig short_window = Config(true);
  short_window.rescoring_max_segment_s = 1.0;
  const Outcome too_long = Transcribe(GetParam(), short_window, Request(2, false), audio);
  for (const Outcome* run : {&unasked, &too_long}) {
    ASSERT_EQ(run->finals.size(), ctc.finals.size());
    for (size_t s = 0; s < ctc.finals.size(); ++s) {
      EXPECT_FALSE(run->finals[s].rescored);
      ASSERT_EQ(run->finals[s].nbest.size(), ctc.finals[s].nbest.size());
      for (size_t i = 0; i < ctc.finals[s].nbest.size(); ++i) {
        EXPECT_EQ(run->finals[s].nbest[i].tokens, ctc.finals[s].nbest[i].tokens);
      }
    }
  }
  EXPECT_EQ(unasked.rescored + unasked.not_rescored, 0);
  EXPECT_EQ(too_long.rescored, 0);
  EXPECT_EQ(too_long.not_rescored, 1);
}

// Every final of every stream of an engine: `streams` streams of `audio` at
// once, segments every second.
// `passes`: the engine's rescoring passes.
std::vector<decoder::DecodeResult> RescoredFinals(const std::string& name, int streams, bool graphs,
                                                  const std::vector<int16_t>& audio,
                                                  int64_t* passes = nullptr) {
  std::vector<decoder::DecodeResult> finals;
  EngineConfig config = Config(true);
  config.cuda_graphs = graphs;
  config.max_batch_size = 4;
  ModelOptions options;
  options.model_dir = kGolden + "/" + name + "/model";
  options.device = encoder::testing::TestDevice();
  options.dtype = DType::kFloat32;
  auto engine = LoadEngine(options, config);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return finals;
  std::vector<std::unique_ptr<EngineStream>> open;
  for (int i = 0; i < streams; ++i) {
    auto stream = (*engine)->OpenStream(Request(3, true));
    EXPECT_TRUE(stream.ok()) << stream.status();
    if (!stream.ok()) return finals;
    open.push_back(std::move(*stream));
  }
  for (size_t at = 0; at < audio.size(); at += 1600) {
    const size_t n = std::min<size_t>(1600, audio.size() - at);
    for (auto& s : open) EXPECT_TRUE(s->PushAudio({audio.data() + at, n}).ok());
  }
  for (auto& s : open) EXPECT_TRUE(s->EndAudio().ok());
  for (auto& s : open) {
    StreamEvent event;
    for (int i = 0; i < 100000 && !event.finish; ++i) {
      if (!s->outbox().WaitPop(&event, 60)) break;
      for (decoder::DecodeResult& r : event.results) {
        if (r.is_final) finals.push_back(std::move(r));
      }
    }
    EXPECT_EQ(event.finish, FinishReason::kStop);
  }
  EXPECT_EQ((*engine)->stats().segments_rescored.load(), static_cast<int64_t>(finals.size()));
  EXPECT_EQ((*engine)->stats().segments_not_rescored.load(), 0);
  if (passes != nullptr) *passes = (*engine)->stats().rescoring_passes.load();
  (*engine)->Stop();
  return finals;
}

// Streams whose finals come in the same ticks are rescored in one pass (their
// segments side by side): each stream gets the finals it gets alone. On CUDA
// also with replayed graphs (cohorts padded to the captured widths, the
// padding lane writing encoder output that no segment reads).
TEST_P(EngineRescoringTest, FinalsRescoredTogetherEqualEachStreamAlone) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  const std::vector<int16_t> audio = Speechlike(3.3);
  constexpr int kStreams = 3;
  const std::vector<decoder::DecodeResult> alone = RescoredFinals(GetParam(), 1, false, audio);
  ASSERT_GE(alone.size(), 2u);
  for (bool graphs : {false, true}) {
    if (graphs && !OASR_TEST_CUDA) continue;
    SCOPED_TRACE(graphs ? "CUDA graphs" : "eager");
    int64_t passes = 0;
    const std::vector<decoder::DecodeResult> together =
        RescoredFinals(GetParam(), kStreams, graphs, audio, &passes);
    ASSERT_EQ(together.size(), kStreams * alone.size());
    // The segments that end at endpoints in the same tick share a pass.
    EXPECT_LT(passes, static_cast<int64_t>(together.size()));
    for (size_t f = 0; f < together.size(); ++f) {
      SCOPED_TRACE(absl::StrCat("final ", f));
      const decoder::DecodeResult& want = alone[f % alone.size()];
      EXPECT_TRUE(together[f].rescored);
      ASSERT_EQ(together[f].nbest.size(), want.nbest.size());
      for (size_t i = 0; i < want.nbest.size(); ++i) {
        EXPECT_EQ(together[f].nbest[i].tokens, want.nbest[i].tokens) << "hyp " << i;
        EXPECT_NEAR(together[f].nbest[i].attention_score, want.nbest[i].attention_score, 1e-3)
            << "hyp " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EngineRescoringTest,
                         ::testing::Values("u2_rescoring", "u2pp_rescoring",
                                           "u2pp_rescoring_sub8"));

TEST(EngineRescoringFactoryTest, OnlyModelsWithADecoderAndTheBeamSearchRescore) {
  ModelOptions options;
  options.model_dir = kGolden + "/u2pp_rescoring/model";
  auto loaded = LoadModel(options);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EngineConfig config;
  auto on = CreateRescorer(*loaded->model, config);
  ASSERT_TRUE(on.ok()) << on.status();
  ASSERT_NE(*on, nullptr);
  // 30 s of its 60 ms frames (6x subsampling).
  EXPECT_EQ((*on)->options().max_frames, 500);
  config.attention_rescoring = false;
  EXPECT_EQ(*CreateRescorer(*loaded->model, config), nullptr);
  config.attention_rescoring = true;
  config.decoder.method = decoder::SearchMethod::kGreedy;
  EXPECT_EQ(*CreateRescorer(*loaded->model, config), nullptr);
  options.model_dir = kGolden + "/small_ln/model";
  auto plain = LoadModel(options);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*CreateRescorer(*plain->model, EngineConfig{}), nullptr);
}

}  // namespace
}  // namespace oasr::scheduler
