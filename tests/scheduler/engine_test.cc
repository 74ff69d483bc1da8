// Engine simulations: many streams with random lengths, arrival times,
// message sizes, cancellations and ends through one scheduler, each checked
// against what the same audio gives alone through the encoder and decoder.
#include "scheduler/cohort_decode.h"
#include "scheduler/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "common/pcm16.h"
#include "decoder/symbol_table.h"
#include "encoder/conformer_encoder.h"
#include "encoder/fbank.h"
#include "kernels/log_mel.h"
#include "scheduler/conformer_streaming_model.h"
#include "scheduler/model_factory.h"
#include "tests/encoder/test_util.h"

namespace oasr::scheduler {
namespace {

const std::string kModelDir = std::string(OASR_ENCODER_FIXTURES) + "/small_ln/model";

// The CUDA builds of these tests run eagerly (every op launched each tick)
// or, with OASR_TEST_CUDA_GRAPHS, replaying the captured graphs.
#ifndef OASR_TEST_CUDA_GRAPHS
#define OASR_TEST_CUDA_GRAPHS 0
#endif
constexpr bool kGraphs = OASR_TEST_CUDA && OASR_TEST_CUDA_GRAPHS;

std::vector<int16_t> MakeAudio(std::mt19937& rng, double seconds, int rate) {
  std::uniform_real_distribution<double> freq(100, 3000), amp(500, 8000);
  std::normal_distribution<double> noise(0, 300);
  const double f1 = freq(rng), f2 = freq(rng), a = amp(rng);
  std::vector<int16_t> out(static_cast<size_t>(seconds * rate));
  for (size_t i = 0; i < out.size(); ++i) {
    const double t = static_cast<double>(i) / rate;
    const double env = 0.5 + 0.5 * std::sin(2 * M_PI * 1.3 * t);
    const double x =
        a * env * (std::sin(2 * M_PI * f1 * t) + 0.5 * std::sin(2 * M_PI * f2 * t)) + noise(rng);
    out[i] = static_cast<int16_t>(std::clamp(x, -32768.0, 32767.0));
  }
  return out;
}

struct TestEngine {
  std::unique_ptr<Engine> engine;
  const ConformerStreamingModel* model = nullptr;  // Owned by the engine.
};

// The engine on the test model, or (with a test failure saying why) a
// null engine, which callers assert against.
TestEngine MakeEngine(EngineConfig config, int cpu_threads = 1) {
  config.cuda_graphs = kGraphs;
  ModelOptions options;
  options.cpu_threads = cpu_threads;
  options.model_dir = kModelDir;
  options.decoder = config.decoder;
  // float32 on every device: n-bests are compared across batch widths.
  options.device = encoder::testing::TestDevice();
  options.dtype = DType::kFloat32;
  auto engine = LoadEngine(options, config);
  EXPECT_TRUE(engine.ok()) << engine.status();
  TestEngine setup;
  if (!engine.ok()) return setup;
  setup.engine = std::move(*engine);
  setup.model = dynamic_cast<const ConformerStreamingModel*>(&setup.engine->model());
  return setup;
}

// The features of the whole of `audio`, [frames, feature_dim]: from the
// host front end, or with the engine's device front end from the PCM it
// stages, by the same kernel on the same device (each frame is computed
// from its own samples alone, so all at once equals chunk by chunk).
std::vector<float> AllFeatures(const Engine& engine, const ConformerStreamingModel& model,
                               const std::vector<int16_t>& audio, int rate) {
  const int dim = model.geometry().feature_dim;
  auto source = engine.device_front_end() ? model.CreateDeviceFrontEnd(rate)
                                          : model.CreateFrontEnd(rate);
  EXPECT_TRUE(source.ok()) << source.status();
  if (!source.ok()) return {};
  EXPECT_TRUE((*source)->AcceptPcm16(audio.data(), static_cast<int64_t>(audio.size())).ok());
  EXPECT_TRUE((*source)->InputFinished().ok());
  const int64_t frames = (*source)->NumFramesReady();
  std::vector<float> window(static_cast<size_t>((*source)->layout().WindowRows(frames) *
                                                (*source)->layout().width));
  EXPECT_TRUE((*source)->GetFrames(0, frames, window.data()).ok());
  if (!engine.device_front_end() || frames == 0) return window;
  if (engine.pcm_rings()) {  // The rings hold the samples rounded to 16 bits.
    std::vector<int16_t> rounded(window.size());
    RoundToPcm16(window.data(), static_cast<int64_t>(window.size()), rounded.data());
    Pcm16ToFloat(rounded.data(), static_cast<int64_t>(rounded.size()), window.data());
  }

  const Device device = encoder::testing::TestDevice();
  ExecutionContextOptions o;
  o.device = device;
  auto ctx = ExecutionContext::Create(o);
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  std::vector<float> table_window, mel;
  encoder::Fbank::DenseTables(&table_window, &mel);
  const encoder::GlobalCmvn& cmvn = model.model().cmvn();
  auto on_device = [&](const void* data, int64_t n, DType dtype) {
    Tensor t = *Tensor::Empty({n}, dtype, device);
    EXPECT_TRUE(
        CopyTensor(t.view(), TensorView(const_cast<void*>(data), dtype, {n}, Device::Cpu())).ok());
    return t;
  };
  const int32_t count = static_cast<int32_t>(frames);
  Tensor pcm = on_device(window.data(), static_cast<int64_t>(window.size()), DType::kFloat32);
  Tensor n = on_device(&count, 1, DType::kInt32);
  Tensor w = on_device(table_window.data(), kernels::kLogMelWindowFloats, DType::kFloat32);
  Tensor m = on_device(mel.data(), static_cast<int64_t>(mel.size()), DType::kFloat32);
  Tensor mean = on_device(cmvn.mean().data(), dim, DType::kFloat32);
  Tensor istd = on_device(cmvn.istd().data(), dim, DType::kFloat32);
  Tensor out = *Tensor::Empty({frames * dim}, DType::kFloat32, device);
  kernels::LogMelParams p;
  p.pcm = pcm.data<float>();
  p.pcm_stride = static_cast<int64_t>(window.size());
  p.frames = n.data<int32_t>();
  p.rows = 1;
  p.max_frames = count;
  p.bins = dim;
  p.window = w.data<float>();
  p.mel = m.data<float>();
  p.mean = mean.data<float>();
  p.istd = istd.data<float>();
  p.out = out.data<float>();
  EXPECT_TRUE(kernels::LogMel(**ctx, p).ok());
  EXPECT_TRUE((*ctx)->Synchronize().ok());  // The copy below is not on the context's stream.
  std::vector<float> feats(static_cast<size_t>(frames * dim));
  EXPECT_TRUE(
      CopyTensor(TensorView(feats.data(), DType::kFloat32, {frames * dim}, Device::Cpu()), out.view())
          .ok());
  return feats;
}

// The same audio alone: front end, dense-cache encoder chunk by chunk, decoder.
std::vector<decoder::DecodeResult> TranscribeAlone(const Engine& engine,
                                                   const ConformerStreamingModel& model,
                                                   const std::vector<int16_t>& audio, int rate,
                                                   const decoder::StreamOptions& options,
                                                   int64_t max_chunks = -1) {
  const ModelGeometry& g = model.geometry();
  const std::vector<float> all_feats = AllFeatures(engine, model, audio, rate);
  const int64_t ready = static_cast<int64_t>(all_feats.size()) / g.feature_dim;
  // Its own context: the engine's scheduler thread drives the model's.
  auto encoder = encoder::testing::MakeTestEncoder(&model.model());
  EXPECT_TRUE(encoder.ok()) << encoder.status();
  const decoder::CtcDecoder& dec = engine.decoder();
  auto dec_mut = const_cast<decoder::CtcDecoder*>(&dec);
  auto state = dec_mut->CreateState();
  EXPECT_TRUE(dec_mut->ConfigureStream(*state, options).ok());

  const cache::CacheConfig& cc = engine.cache_config();
  const int required = cc.num_left_chunks < 0 ? -1 : cc.chunk_size * cc.num_left_chunks;
  Tensor att = *Tensor::Zeros({cc.num_layers, cc.n_kv_head, 0, 2 * cc.head_dim}, DType::kFloat32);
  Tensor cnn =
      *Tensor::Zeros({cc.num_layers, cc.cnn_cache_frames(), cc.hidden_dim}, DType::kFloat32);
  int64_t offset = 0;
  for (int64_t k = 0; max_chunks < 0 || k < max_chunks; ++k) {
    const int64_t start = k * g.StrideFrames();
    const int64_t frames = std::min<int64_t>(g.WindowFrames(g.chunk_size), ready - start);
    if (frames <= g.right_context) break;
    Tensor feats = *Tensor::Empty({frames, g.feature_dim}, DType::kFloat32);
    std::copy_n(all_feats.data() + start * g.feature_dim, frames * g.feature_dim,
                feats.data<float>());
    encoder::DenseChunkInput in;
    in.feats = feats.view();
    in.offset = offset;
    in.att_cache = att.view();
    in.cnn_cache = cnn.view();
    auto out = (*encoder)->ForwardChunk(in, required);
    EXPECT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(dec_mut->DecodeChunk(*state, out->log_probs.view()).ok());
    offset += out->log_probs.dim(0);
    att = std::move(out->att_cache);
    cnn = std::move(out->cnn_cache);
  }
  EXPECT_TRUE(dec_mut->FinalizeStream(*state).ok());
  return dec_mut->TakeFinalResults(*state);
}

void ExpectSameResults(const std::vector<decoder::DecodeResult>& got,
                       const std::vector<decoder::DecodeResult>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].nbest.size(), want[i].nbest.size()) << what << " segment " << i;
    for (size_t n = 0; n < got[i].nbest.size(); ++n) {
      EXPECT_EQ(got[i].nbest[n].tokens, want[i].nbest[n].tokens) << what << " hyp " << n;
      EXPECT_NEAR(got[i].nbest[n].score, want[i].nbest[n].score,
                  1e-3 * (1 + std::fabs(want[i].nbest[n].score)))
          << what << " hyp " << n;
    }
  }
}

struct Collected {
  std::vector<decoder::DecodeResult> finals;
  int partials = 0;
  std::optional<FinishReason> finish;
  absl::Status error;
  double audio_processed_s = 0;
};

// Drains a stream's events until its last one (bounded wait).
Collected Collect(EngineStream& stream, double timeout_s = 120) {
  Collected c;
  StreamEvent event;
  while (!c.finish.has_value()) {
    if (!stream.outbox().WaitPop(&event, timeout_s)) {
      ADD_FAILURE() << "stream " << stream.id() << " never finished";
      break;
    }
    for (auto& r : event.results) {
      if (r.is_final) {
        c.finals.push_back(std::move(r));
      } else {
        ++c.partials;
      }
    }
    c.audio_processed_s = event.audio_processed_s;
    c.finish = event.finish;
    c.error = event.error;
  }
  return c;
}

void ExpectAllFreed(const Engine& engine) {
  // The gauges are updated at the end of each tick; give the last one a moment.
  for (int i = 0; i < 200 && (engine.stats().streams_active.load() != 0 ||
                              engine.stats().pool_blocks_used.load() != 0);
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(engine.stats().streams_active.load(), 0);
  EXPECT_EQ(engine.stats().streams_waiting.load(), 0);
  EXPECT_EQ(engine.stats().pool_blocks_used.load(), 0);
}

// Runs with the streams' front ends inline and on a pool of workers, each
// computing the fbank itself (host) or resampling for the device front end;
// and with overlapped ticks and the decode thread on the CPU as well (on
// CUDA they are on in every case): the tick a GPU serves with.
struct FrontEndParam {
  int threads = 0;
  bool device = false;
  bool overlap = false;
};

void PrintTo(const FrontEndParam& p, std::ostream* os) {
  *os << (p.device ? "device" : "host") << " front end, " << p.threads << " threads"
      << (p.overlap ? ", overlapped ticks" : "");
}

class EngineFrontEndTest : public ::testing::TestWithParam<FrontEndParam> {
 protected:
  EngineConfig Config() const {
    EngineConfig config;
    config.frontend_threads = GetParam().threads;
    config.front_end =
        GetParam().device ? EngineConfig::FrontEnd::kDevice : EngineConfig::FrontEnd::kHost;
    config.overlap_on_cpu = GetParam().overlap;
    return config;
  }
};

INSTANTIATE_TEST_SUITE_P(FrontEnd, EngineFrontEndTest,
                         ::testing::Values(FrontEndParam{0, false}, FrontEndParam{3, false},
                                           FrontEndParam{0, true}, FrontEndParam{3, true},
                                           FrontEndParam{0, false, true},
                                           FrontEndParam{3, true, true}),
                         [](const ::testing::TestParamInfo<FrontEndParam>& info) {
                           return std::string(info.param.device ? "Device" : "Host") +
                                  (info.param.threads == 0
                                       ? std::string("Inline")
                                       : "Pool" + std::to_string(info.param.threads)) +
                                  (info.param.overlap ? "Overlapped" : "");
                         });

TEST_P(EngineFrontEndTest, ManyStreamsEachGetWhatTheyGetAlone) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  EngineConfig config = Config();
  config.max_batch_size = 24;
  config.max_waiting = 400;
  config.max_wait_ms = 5;
  TestEngine setup = MakeEngine(config);
  ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
  Engine& engine = *setup.engine;

  struct Sim {
    std::unique_ptr<EngineStream> stream;
    std::vector<int16_t> audio;
    int rate = 16000;
    size_t sent = 0;
    int64_t cancel_at = -1;  // Sample index after which the client leaves.
    bool cancelled = false;
    decoder::StreamOptions options;
  };
  std::mt19937 rng(1234);
  const int kStreams = 200;
  std::vector<Sim> sims(kStreams);
  const int rates[] = {16000, 16000, 8000, 44100};
  for (int i = 0; i < kStreams; ++i) {
    Sim& s = sims[i];
    s.rate = rates[rng() % 4];
    s.audio = MakeAudio(rng, 0.3 + (rng() % 2800) / 1000.0, s.rate);
    if (rng() % 10 == 0) s.cancel_at = static_cast<int64_t>(rng() % s.audio.size());
    s.options.nbest = 1 + static_cast<int>(rng() % 4);
  }
  // Streams arrive over time and send messages of 20-250 ms, interleaved.
  size_t opened = 0;
  std::vector<size_t> live;
  for (int round = 0; round < 100000 && (opened < sims.size() || !live.empty()); ++round) {
    if (opened < sims.size() && rng() % 3 == 0) {
      Sim& s = sims[opened];
      StreamRequest request;
      request.sample_rate = s.rate;
      request.interim_results = rng() % 2 == 0;
      request.decode = s.options;
      auto stream = engine.OpenStream(request);
      ASSERT_TRUE(stream.ok()) << stream.status();
      s.stream = std::move(*stream);
      live.push_back(opened++);
    }
    if (live.empty()) continue;
    const size_t pick = rng() % live.size();
    Sim& s = sims[live[pick]];
    const size_t n =
        std::min(s.audio.size() - s.sent, static_cast<size_t>(s.rate * (20 + rng() % 231) / 1000));
    ASSERT_TRUE(s.stream->PushAudio({s.audio.data() + s.sent, n}).ok());
    s.sent += n;
    if (s.cancel_at >= 0 && static_cast<int64_t>(s.sent) >= s.cancel_at) {
      s.stream->Cancel();
      s.cancelled = true;
      live.erase(live.begin() + pick);
    } else if (s.sent == s.audio.size()) {
      ASSERT_TRUE(s.stream->EndAudio().ok());
      live.erase(live.begin() + pick);
    }
  }

  int cancelled = 0;
  for (int i = 0; i < kStreams; ++i) {
    Sim& s = sims[i];
    Collected c = Collect(*s.stream);
    if (s.cancelled) {
      ++cancelled;
      EXPECT_EQ(c.finish, FinishReason::kCancelled) << "stream " << i;
      continue;
    }
    ASSERT_EQ(c.finish, FinishReason::kStop) << "stream " << i << ": " << c.error;
    ExpectSameResults(c.finals, TranscribeAlone(engine, *setup.model, s.audio, s.rate, s.options),
                      "stream " + std::to_string(i));
  }
  EXPECT_GT(cancelled, 0);
  ExpectAllFreed(engine);
  // The decode thread ran the cohorts wherever ticks overlapped.
  EXPECT_EQ(engine.stats().decode_off_thread.load(), GetParam().overlap || OASR_TEST_CUDA);
  EXPECT_GT(engine.stats().batch_size.Read().sum / engine.stats().batch_size.Read().count, 1.5)
      << "streams were never batched together";
  EXPECT_EQ(engine.stats().finished[static_cast<int>(FinishReason::kStop)].load() + cancelled,
            kStreams);
  // Every cohort ran as a graph replay (padded to the ladder) or none did.
  if (kGraphs) {
    EXPECT_EQ(engine.stats().graph_launches.load(), engine.stats().batch_size.Read().count);
    EXPECT_GT(engine.stats().padded_rows.load(), 0);
  } else {
    EXPECT_EQ(engine.stats().graph_launches.load(), 0);
    EXPECT_EQ(engine.stats().padded_rows.load(), 0);
  }
}

// Opens a stream per 16 kHz clip with `request`, sends each clip whole and
// ends it at once, then expects every stream to finish with what its clip
// gives alone (and with interim results on the way when `partials`).
void ExpectAllAtOnceAsAlone(const TestEngine& setup, const std::vector<std::vector<int16_t>>& audio,
                            const StreamRequest& request, bool partials) {
  Engine& engine = *setup.engine;
  std::vector<std::unique_ptr<EngineStream>> streams;
  for (size_t i = 0; i < audio.size(); ++i) streams.push_back(*engine.OpenStream(request));
  for (size_t i = 0; i < audio.size(); ++i) {
    ASSERT_TRUE(streams[i]->PushAudio(audio[i]).ok());
    ASSERT_TRUE(streams[i]->EndAudio().ok());
  }
  for (size_t i = 0; i < audio.size(); ++i) {
    Collected c = Collect(*streams[i]);
    ASSERT_EQ(c.finish, FinishReason::kStop) << "stream " << i << ": " << c.error;
    if (partials) EXPECT_GT(c.partials, 0) << "stream " << i;
    ExpectSameResults(c.finals,
                      TranscribeAlone(engine, *setup.model, audio[i], 16000, request.decode),
                      "stream " + std::to_string(i));
  }
}

TEST(EngineTest, WideCohortsReadTheirResultsOnEveryHostThread) {
  // 96 streams of the same length, all audio at once: their chunks run as
  // cohorts of 96 rows, staged, searched and read (interim results included)
  // in parts on the context's three threads.
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  EngineConfig config;
  config.max_batch_size = 96;
  config.max_wait_ms = 1000;  // Wait for the whole cohort to be admitted.
  // One tick at a time on CUDA too: with overlapped ticks the streams'
  // chunks alternate between two cohorts of half the width.
  config.overlap_ticks = false;
  TestEngine setup = MakeEngine(config, /*cpu_threads=*/3);
  ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
  Engine& engine = *setup.engine;
  std::mt19937 rng(21);
  std::vector<std::vector<int16_t>> audio;
  for (int i = 0; i < 96; ++i) audio.push_back(MakeAudio(rng, 1.3, 16000));
  ASSERT_NO_FATAL_FAILURE(ExpectAllAtOnceAsAlone(setup, audio, {}, /*partials=*/true));
  const Histogram::Snapshot batches = engine.stats().batch_size.Read();
  EXPECT_GE(batches.sum / batches.count, 2 * kMinLightRowsPerPart) << "the cohorts were not wide";
  ExpectAllFreed(engine);
}

TEST_P(EngineFrontEndTest, CohortsAreCappedAtMaxCohortRowsAndTheRestRunNext) {
  // 40 streams, all audio at once, but cohorts of at most 8 rows: every
  // tick leaves ready streams for the next, none is starved or reordered,
  // and each stream gets what it gets alone.
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  EngineConfig config = Config();
  config.max_batch_size = 40;
  config.max_cohort_rows = 8;
  config.max_wait_ms = 1000;
  TestEngine setup = MakeEngine(config);
  ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
  Engine& engine = *setup.engine;
  std::mt19937 rng(77);
  std::vector<std::vector<int16_t>> audio;
  for (int i = 0; i < 40; ++i) audio.push_back(MakeAudio(rng, 0.8 + 0.05 * (i % 7), 16000));
  // The best hypothesis only: on CUDA a deep n-best's near-ties may order
  // differently between cohort widths (the GEMMs' tiling), which is not
  // what this test is about.
  StreamRequest request;
  request.decode.nbest = 1;
  ASSERT_NO_FATAL_FAILURE(ExpectAllAtOnceAsAlone(setup, audio, request, /*partials=*/false));
  const Histogram::Snapshot batches = engine.stats().batch_size.Read();
  ASSERT_EQ(batches.upper_bounds[3], 8.0);
  EXPECT_EQ(batches.cumulative[3], batches.count) << "a cohort was wider than 8 rows";
  // The streams' chunks were batched (eight rows most ticks), not run alone.
  EXPECT_GT(batches.sum / batches.count, 4.0);
  ExpectAllFreed(engine);
}

TEST(EngineTest, LoadedCohortsFillACapturedWidthAndTheRestRunNext) {
  // 40 streams, all audio at once, cohorts from 4 rows cut to a captured
  // width (1, 2, 4, ... 64): with CUDA graphs no cohort of 4 rows or more is
  // padded, the rows left over run next tick, and every stream gets what it
  // gets alone. (Without graphs nothing is cut.)
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  EngineConfig config;
  config.max_batch_size = 40;
  config.max_wait_ms = 1000;
  config.fill_widths_from = 4;
  TestEngine setup = MakeEngine(config);
  ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
  Engine& engine = *setup.engine;
  std::mt19937 rng(91);
  std::vector<std::vector<int16_t>> audio;
  for (int i = 0; i < 40; ++i) audio.push_back(MakeAudio(rng, 0.7 + 0.07 * (i % 5), 16000));
  StreamRequest request;
  request.decode.nbest = 1;
  ASSERT_NO_FATAL_FAILURE(ExpectAllAtOnceAsAlone(setup, audio, request, /*partials=*/false));
  const Histogram::Snapshot batches = engine.stats().batch_size.Read();
  EXPECT_GT(batches.sum / batches.count, 4.0) << "the streams were not batched";
  // Only a cohort of 3 rows is padded (by one); 40 streams padded to the
  // ladder would pad 24 rows at once.
  EXPECT_LE(engine.stats().padded_rows.load(), kGraphs ? batches.count : 0);
  ExpectAllFreed(engine);
}

TEST(EngineTest, LengthFinishesAtTheCeilingWithTheTranscriptSoFar) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  EngineConfig config;
  config.max_batch_size = 4;
  config.max_blocks_per_seq = 3;  // 3 chunks of history, unlimited left context.
  config.num_left_chunks = -1;
  TestEngine setup = MakeEngine(config);
  ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
  Engine& engine = *setup.engine;
  const cache::CacheConfig& cc = engine.cache_config();
  const int64_t ceiling_frames = cc.max_stream_frames();
  ASSERT_EQ(ceiling_frames, 3 * cc.chunk_size);

  std::mt19937 rng(7);
  const double ceiling_s = ceiling_frames * 0.04;
  std::vector<int16_t> audio = MakeAudio(rng, 3 * ceiling_s, 16000);  // Past the ceiling.
  std::vector<int16_t> short_audio = MakeAudio(rng, 0.6 * ceiling_s, 16000);
  auto stream = *engine.OpenStream({});
  auto other = *engine.OpenStream({});
  ASSERT_TRUE(stream->PushAudio(audio).ok());
  ASSERT_TRUE(other->PushAudio(short_audio).ok());
  ASSERT_TRUE(other->EndAudio().ok());
  Collected c = Collect(*stream);
  EXPECT_EQ(c.finish, FinishReason::kLength);
  EXPECT_DOUBLE_EQ(c.audio_processed_s, ceiling_frames * 0.04);
  ExpectSameResults(c.finals,
                    TranscribeAlone(engine, *setup.model, audio, 16000, {}, /*max_chunks=*/3),
                    "length stream");
  // The other stream is unaffected.
  Collected o = Collect(*other);
  EXPECT_EQ(o.finish, FinishReason::kStop);
  ExpectSameResults(o.finals, TranscribeAlone(engine, *setup.model, short_audio, 16000, {}),
                    "other stream");
  // Audio after the ceiling is refused or ignored, never an error.
  (void)stream->EndAudio();
  ExpectAllFreed(engine);
}

TEST(EngineTest, WaitingStreamsAreAdmittedInOrder) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  EngineConfig config;
  config.max_batch_size = 1;
  config.max_wait_ms = 0;  // Everyone is past the window: strict arrival order.
  TestEngine setup = MakeEngine(config);
  ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
  Engine& engine = *setup.engine;
  std::mt19937 rng(3);
  std::vector<std::unique_ptr<EngineStream>> streams;
  for (int i = 0; i < 6; ++i) {
    StreamRequest request;
    request.interim_results = false;
    streams.push_back(*engine.OpenStream(request));
    // Later streams have more audio: length-sorting alone would reorder them.
    ASSERT_TRUE(streams.back()->PushAudio(MakeAudio(rng, 0.4 + 0.2 * i, 16000)).ok());
    ASSERT_TRUE(streams.back()->EndAudio().ok());
  }
  // With one slot, each stream finishes before the next is admitted, so the
  // order of finishes is the order of admission.
  std::vector<int64_t> order;
  std::vector<bool> done(streams.size(), false);
  for (int spins = 0; spins < 20000 && order.size() < streams.size(); ++spins) {
    for (size_t i = 0; i < streams.size(); ++i) {
      if (!done[i] && streams[i]->outbox().finished()) {
        done[i] = true;
        order.push_back(streams[i]->id());
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ASSERT_EQ(order.size(), streams.size());
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], streams[i]->id());
}

TEST(EngineTest, WaitingStreamsThatCanRunAreAdmittedFirstAndLeaveTheQueueAnywhere) {
  // One slot, held by A. Waiting behind it, in arrival order: B (no audio
  // yet), C (a whole utterance), D (cancelled while it waits), E (a whole
  // utterance). Within the admission window, streams with a chunk to run
  // go first, in the order they got it: C, then E; B only once they are
  // done. D leaves from the middle of the queue at once.
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  EngineConfig config;
  config.max_batch_size = 1;
  config.max_wait_ms = 600000;  // Nobody is late: the order below is the rule's.
  TestEngine setup = MakeEngine(config);
  ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
  Engine& engine = *setup.engine;
  std::mt19937 rng(43);
  auto a = *engine.OpenStream({});
  ASSERT_TRUE(a->PushAudio(MakeAudio(rng, 1.0, 16000)).ok());
  StreamEvent first;
  ASSERT_TRUE(a->outbox().WaitPop(&first, 60)) << "A was never decoded";
  auto b = *engine.OpenStream({});
  auto c = *engine.OpenStream({});
  const std::vector<int16_t> c_audio = MakeAudio(rng, 0.8, 16000);
  ASSERT_TRUE(c->PushAudio(c_audio).ok());
  ASSERT_TRUE(c->EndAudio().ok());
  auto d = *engine.OpenStream({});
  d->Cancel();
  auto e = *engine.OpenStream({});
  const std::vector<int16_t> e_audio = MakeAudio(rng, 0.8, 16000);
  ASSERT_TRUE(e->PushAudio(e_audio).ok());
  ASSERT_TRUE(e->EndAudio().ok());
  EXPECT_EQ(Collect(*d).finish, FinishReason::kCancelled);
  // B, C and E wait (the gauge is set at the end of the tick that handled
  // their commands).
  for (int i = 0; i < 2000 && engine.stats().streams_waiting.load() != 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(engine.stats().streams_waiting.load(), 3);
  ASSERT_TRUE(a->EndAudio().ok());
  EXPECT_EQ(Collect(*a).finish, FinishReason::kStop);
  // One slot, so each stream's events come between its admission and its
  // end: C's last event precedes E's first, and E's last B's first.
  struct Timed {
    Collected c;
    std::chrono::steady_clock::time_point first, last;
  };
  auto collect = [](EngineStream& stream) {
    Timed t;
    StreamEvent event;
    while (!t.c.finish.has_value() && stream.outbox().WaitPop(&event, 60)) {
      if (t.first == std::chrono::steady_clock::time_point()) t.first = event.pushed;
      t.last = event.pushed;
      for (auto& r : event.results) {
        if (r.is_final) t.c.finals.push_back(std::move(r));
      }
      t.c.finish = event.finish;
    }
    return t;
  };
  const Timed got_c = collect(*c), got_e = collect(*e);
  ASSERT_EQ(got_c.c.finish, FinishReason::kStop);
  ASSERT_EQ(got_e.c.finish, FinishReason::kStop);
  EXPECT_LT(got_c.last, got_e.first) << "E was admitted before C";
  ExpectSameResults(got_c.c.finals, TranscribeAlone(engine, *setup.model, c_audio, 16000, {}), "C");
  ExpectSameResults(got_e.c.finals, TranscribeAlone(engine, *setup.model, e_audio, 16000, {}), "E");
  StreamEvent none;
  EXPECT_FALSE(b->outbox().TryPop(&none)) << "B was admitted before streams that could run";
  const std::vector<int16_t> b_audio = MakeAudio(rng, 0.8, 16000);
  ASSERT_TRUE(b->PushAudio(b_audio).ok());
  ASSERT_TRUE(b->EndAudio().ok());
  const Timed got_b = collect(*b);
  ASSERT_EQ(got_b.c.finish, FinishReason::kStop);
  EXPECT_LT(got_e.last, got_b.first);
  ExpectSameResults(got_b.c.finals, TranscribeAlone(engine, *setup.model, b_audio, 16000, {}), "B");
  ExpectAllFreed(engine);
}

TEST(EngineTest, FloodBeyondTheLimitsIsRefusedAndAdmittedStreamsAreUnaffected) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  EngineConfig config;
  config.max_batch_size = 2;
  config.max_waiting = 3;
  TestEngine setup = MakeEngine(config);
  ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
  Engine& engine = *setup.engine;
  std::mt19937 rng(11);
  std::vector<std::unique_ptr<EngineStream>> streams;
  std::vector<std::vector<int16_t>> audio;
  for (int i = 0; i < 5; ++i) {
    auto s = engine.OpenStream({});
    ASSERT_TRUE(s.ok()) << s.status();
    streams.push_back(std::move(*s));
    audio.push_back(MakeAudio(rng, 1.0, 16000));
  }
  for (int i = 0; i < 20; ++i) {
    auto refused = engine.OpenStream({});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(refused.status().message().find("stream limit"), std::string::npos);
  }
  EXPECT_EQ(engine.stats().streams_refused.load(), 20);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(streams[i]->PushAudio(audio[i]).ok());
    ASSERT_TRUE(streams[i]->EndAudio().ok());
  }
  for (int i = 0; i < 5; ++i) {
    Collected c = Collect(*streams[i]);
    EXPECT_EQ(c.finish, FinishReason::kStop);
    ExpectSameResults(c.finals, TranscribeAlone(engine, *setup.model, audio[i], 16000, {}),
                      "stream " + std::to_string(i));
  }
  // Room again once they are done.
  EXPECT_TRUE(engine.OpenStream({}).ok());
}

TEST_P(EngineFrontEndTest, CancelMidStreamFreesEverything) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  EngineConfig config = Config();
  config.max_batch_size = 4;
  TestEngine setup = MakeEngine(config);
  ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
  Engine& engine = *setup.engine;
  std::mt19937 rng(5);
  for (int i = 0; i < 20; ++i) {
    auto s = *engine.OpenStream({});
    ASSERT_TRUE(s->PushAudio(MakeAudio(rng, 0.05 + 0.1 * (i % 7), 16000)).ok());
    s->Cancel();
    Collected c = Collect(*s);
    EXPECT_EQ(c.finish, FinishReason::kCancelled);
    EXPECT_TRUE(s->PushAudio(MakeAudio(rng, 0.1, 16000)).code() ==
                absl::StatusCode::kFailedPrecondition);
  }
  ExpectAllFreed(engine);
}

TEST_P(EngineFrontEndTest, ManySmallPiecesStayInOrder) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  // 10 ms messages (the front end's frame shift): every piece is a separate
  // unit of front-end work, so a pool that reordered or overlapped a
  // stream's pieces would change its features and its transcript.
  EngineConfig config = Config();
  config.max_batch_size = 4;
  TestEngine setup = MakeEngine(config);
  ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
  std::mt19937 rng(31);
  const int rates[] = {16000, 8000, 44100, 16000};
  std::vector<std::unique_ptr<EngineStream>> streams;
  std::vector<std::vector<int16_t>> audio;
  for (int rate : rates) {
    StreamRequest request;
    request.sample_rate = rate;
    streams.push_back(*setup.engine->OpenStream(request));
    audio.push_back(MakeAudio(rng, 2.5, rate));
  }
  for (size_t sent = 0; sent < audio[2].size();) {
    bool any = false;
    for (size_t i = 0; i < streams.size(); ++i) {
      const size_t step = static_cast<size_t>(rates[i] / 100);
      const size_t from = sent * rates[i] / rates[2];
      if (from >= audio[i].size()) continue;
      const size_t n = std::min(step, audio[i].size() - from);
      ASSERT_TRUE(streams[i]->PushAudio({audio[i].data() + from, n}).ok());
      any = true;
    }
    sent += static_cast<size_t>(rates[2] / 100);
    if (!any) break;
  }
  for (auto& s : streams) ASSERT_TRUE(s->EndAudio().ok());
  for (size_t i = 0; i < streams.size(); ++i) {
    Collected c = Collect(*streams[i]);
    ASSERT_EQ(c.finish, FinishReason::kStop) << c.error;
    ExpectSameResults(c.finals,
                      TranscribeAlone(*setup.engine, *setup.model, audio[i], rates[i], {}),
                      "stream " + std::to_string(i));
  }
  ExpectAllFreed(*setup.engine);
}

TEST_P(EngineFrontEndTest, CancelWhileFrontEndWorkIsInFlight) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  // Each stream is cancelled (or its engine destroyed) right after a large
  // push, so its front-end work is still queued or running: it must end
  // "cancelled", free its slot and pipeline once, and leave others intact.
  EngineConfig config = Config();
  config.max_batch_size = 4;
  config.max_waiting = 64;
  std::mt19937 rng(37);
  {
    TestEngine setup = MakeEngine(config);
    ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
    Engine& engine = *setup.engine;
    const std::vector<int16_t> survivor_audio = MakeAudio(rng, 1.5, 16000);
    auto survivor = *engine.OpenStream({});
    ASSERT_TRUE(survivor->PushAudio(survivor_audio).ok());
    for (int i = 0; i < 24; ++i) {
      StreamRequest request;
      request.sample_rate = i % 2 == 0 ? 44100 : 8000;
      auto s = *engine.OpenStream(request);
      ASSERT_TRUE(s->PushAudio(MakeAudio(rng, 2.0, request.sample_rate)).ok());
      if (i % 3 == 0) {
        ASSERT_TRUE(s->EndAudio().ok());
      }
      s->Cancel();
      Collected c = Collect(*s);
      if (i % 3 == 0) {
        // Ended before the cancel: on a loaded machine the owner's thread can
        // stall between EndAudio and Cancel long enough for the stream to
        // finish first, and then "stop" is the right ending.
        EXPECT_TRUE(c.finish == FinishReason::kCancelled || c.finish == FinishReason::kStop)
            << "stream " << i << ": " << c.error;
      } else {
        EXPECT_EQ(c.finish, FinishReason::kCancelled) << "stream " << i;
      }
      // The owner lets go at once: s is destroyed here, work or not.
    }
    ASSERT_TRUE(survivor->EndAudio().ok());
    Collected c = Collect(*survivor);
    EXPECT_EQ(c.finish, FinishReason::kStop) << c.error;
    ExpectSameResults(c.finals, TranscribeAlone(engine, *setup.model, survivor_audio, 16000, {}),
                      "survivor");
    ExpectAllFreed(engine);
  }
  {
    // The engine goes away while streams' front-end work is queued.
    TestEngine setup = MakeEngine(config);
    ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
    std::vector<std::unique_ptr<EngineStream>> streams;
    for (int i = 0; i < 8; ++i) {
      streams.push_back(*setup.engine->OpenStream({}));
      ASSERT_TRUE(streams.back()->PushAudio(MakeAudio(rng, 3.0, 16000)).ok());
    }
    setup.engine->Stop();
    for (auto& s : streams) EXPECT_EQ(Collect(*s, 10).finish, FinishReason::kCancelled);
    setup.engine.reset();
  }
}

TEST(EngineTest, AudioFasterThanDecodedIsBoundedWithAClearError) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  EngineConfig config;
  config.max_buffered_audio_s = 0.5;
  TestEngine setup = MakeEngine(config);
  ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
  std::mt19937 rng(9);
  auto s = *setup.engine->OpenStream({});
  absl::Status pushed = s->PushAudio(MakeAudio(rng, 1.0, 16000));
  EXPECT_EQ(pushed.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(pushed.message().find("audio buffer full"), std::string::npos) << pushed;
  Collected c = Collect(*s);
  EXPECT_EQ(c.finish, FinishReason::kError);
  EXPECT_EQ(c.error.code(), absl::StatusCode::kResourceExhausted);
  ExpectAllFreed(*setup.engine);
}

TEST(EngineTest, SingleUtteranceEndsAtTheFirstEndpoint) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  EngineConfig config;
  TestEngine setup = MakeEngine(config);
  ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
  std::mt19937 rng(13);
  StreamRequest request;
  request.decode.single_utterance = true;
  request.decode.endpoint.rules = {{false, 0, 1000}};  // A segment ends after 1 s.
  auto s = *setup.engine->OpenStream(request);
  ASSERT_TRUE(s->PushAudio(MakeAudio(rng, 3.0, 16000)).ok());
  Collected c = Collect(*s);
  EXPECT_EQ(c.finish, FinishReason::kEndpoint);
  EXPECT_EQ(c.finals.size(), 1u);
  EXPECT_LT(c.audio_processed_s, 2.0);
  EXPECT_EQ(s->PushAudio(MakeAudio(rng, 0.1, 16000)).code(), absl::StatusCode::kFailedPrecondition);
  ExpectAllFreed(*setup.engine);
}

TEST(EngineTest, StopEndsEveryStreamIncludingOnesJustOpened) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  EngineConfig config;
  config.max_batch_size = 4;
  config.max_waiting = 100;
  TestEngine setup = MakeEngine(config);
  ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
  std::mt19937 rng(17);
  std::vector<std::unique_ptr<EngineStream>> streams;
  for (int i = 0; i < 50; ++i) {
    streams.push_back(*setup.engine->OpenStream({}));
    if (i % 2 == 0) {
      ASSERT_TRUE(streams.back()->PushAudio(MakeAudio(rng, 0.5, 16000)).ok());
    }
  }
  const EngineStats& stats = setup.engine->stats();
  for (int i = 0; i < 500 && stats.streams_active.load() < config.max_batch_size; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(stats.streams_active.load(), config.max_batch_size);
  setup.engine->Stop();
  for (auto& s : streams) {
    Collected c = Collect(*s, 10);
    EXPECT_EQ(c.finish, FinishReason::kCancelled);
  }
  // A draining server's /metrics reads these after the stop (issue 20).
  EXPECT_EQ(stats.streams_active.load(), 0);
  EXPECT_EQ(stats.streams_waiting.load(), 0);
  EXPECT_EQ(setup.engine->OpenStream({}).status().code(), absl::StatusCode::kUnavailable);
}

TEST(EngineTest, BadRequestsNameTheField) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  TestEngine setup = MakeEngine({});
  ASSERT_NE(setup.engine, nullptr);  // MakeEngine said why.
  StreamRequest request;
  request.sample_rate = 96000;
  auto s = setup.engine->OpenStream(request);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("sample_rate_hertz: 96000"), std::string::npos);
  EngineConfig bad;
  bad.max_batch_size = 0;
  EXPECT_NE(bad.Validate().message().find("max_batch_size: 0"), std::string::npos);
  bad.max_batch_size = EngineConfig::kMaxSlots + 1;
  EXPECT_NE(bad.Validate().message().find("max_batch_size: 131073"), std::string::npos);
  EngineConfig wide;
  wide.max_cohort_rows = EngineConfig::kMaxCohortRows + 1;
  EXPECT_NE(wide.Validate().message().find("max_cohort_rows: 65537"), std::string::npos);
  EngineConfig threads;
  threads.frontend_threads = -1;
  EXPECT_NE(threads.Validate().message().find("frontend_threads: -1"), std::string::npos);
}

}  // namespace
}  // namespace oasr::scheduler
