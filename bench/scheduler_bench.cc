// oasr-bench-scheduler
//
// 1. Scheduler overhead: 1,000 and 10,000 streams through the engine with a
//    no-op model (constant blank-heavy log-probs) and greedy decoding over 8
//    units. The engine's own clocks split its thread's time into front end,
//    model, decoder and the rest; "the rest" per stream per tick is the
//    scheduler's overhead (goal: under 1 us). It is measured twice: first
//    with a front end that only counts samples into frames (no resampling,
//    no fbank, no copy: the no-op model reads no features), so the
//    scheduler's share is measured directly; then with the real front end
//    (libsoxr + fbank, ~2.5 ms per stream-chunk here), whose share is timed
//    and taken out, so the figure is a small difference of large totals and
//    also carries what the front end's memory traffic does to the
//    scheduler's caches. --trivial-frontend or --real-frontend runs only
//    one. With --frontend-threads N the front end runs on N workers.
//    --chunks N sends N chunks of audio per stream (default 16 with the
//    counting front end, 4 with the real one; the first is not timed),
//    --streams N runs only that many streams (default 1,000 then 10,000), and
//    --repeat N measures each figure N times (default 3 with the counting
//    front end, 1 with the real one), a fresh engine each time, and also
//    prints the smallest scheduler figure: on a shared machine a preemption
//    inside a timed tick lands in it, and a process's first run is slowed by
//    its allocator's first large blocks, so the minimum is the estimate.
// 2. Real time: N streams, each sending 100 ms of audio every 100 ms, through
//    the CPU engine with the published geometry (12 x 256 x 2048, V = 5002,
//    640 ms chunks; a random model written by bench/encoder_torch.py), for
//    increasing N; prints chunk latency and whether the engine kept up.
// --live N,...: instead, the scheduler thread's time per row as a server
//    sees it at N streams (a 640 ms push and an interim event a row, in real
//    time from one driver thread; the no-op model writes a word a chunk),
//    split as the engine's clocks split it (Live below). By default the
//    engine runs the tick it serves a GPU with (--live-tick gpu): the device
//    front end's PCM rings filled by the front-end workers (2 unless
//    --frontend-threads says), overlapped ticks and the decode thread, all
//    on the CPU; --live-tick cpu runs the CPU server's tick (the counting
//    front end, the scheduler thread decoding).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/execution_context.h"
#include "decoder/symbol_table.h"
#include "encoder/feature_pipeline.h"
#include "encoder/pcm_source.h"
#include "scheduler/conformer_streaming_model.h"
#include "scheduler/engine.h"
#include "scheduler/model_factory.h"

namespace oasr::scheduler {
namespace {

using Clock = std::chrono::steady_clock;

// A front end that only turns samples into a frame count, as the fbank's
// 25 ms window and 10 ms shift at 16 kHz would; its frames are never written
// (GetRows checks the range and leaves `out` as it is), since the no-op
// model reads no features.
class CountingFeatures final : public encoder::FeatureSource {
 public:
  explicit CountingFeatures(int sample_rate) : rate_(sample_rate) {}
  absl::Status AcceptPcm16(const int16_t*, int64_t n) override {
    if (finished_) return absl::FailedPreconditionError("CountingFeatures: audio after the end");
    samples_ += n;
    const int64_t at_16k = samples_ * 16000 / rate_;
    frames_ = at_16k < 400 ? 0 : (at_16k - 400) / 160 + 1;
    return absl::OkStatus();
  }
  absl::Status InputFinished() override {
    finished_ = true;
    return absl::OkStatus();
  }
  int64_t NumRowsReady() const override { return frames_; }
  absl::Status GetRows(int64_t start, int64_t count, float*) const override {
    if (start < first_ || count < 0 || start + count > frames_) {
      return absl::OutOfRangeError("CountingFeatures: frames not held");
    }
    return absl::OkStatus();
  }
  void DiscardRowsBefore(int64_t row) override {
    first_ = std::clamp<int64_t>(row, first_, frames_);
  }

 private:
  const int rate_;
  int64_t samples_ = 0;
  int64_t frames_ = 0;
  int64_t first_ = 0;
  bool finished_ = false;
};

class NoopModel final : public StreamingModel {
 public:
  // With `token_per_chunk`, each chunk's first frame is a word ("▁a"), so
  // every chunk changes the transcript and makes an interim event. Its
  // device front end is the real one's source of 16 kHz PCM rows (the
  // forward reads none of them). A forward of B rows takes `device_us`
  // {fixed, per row} microseconds of a modelled device: synchronously (a
  // sleep), or with `async_device` as a GPU's stream runs it, after the
  // forward before it and while the scheduler thread goes on, which then
  // waits for a cohort's results one tick later (here: the next forward
  // sleeps until the previous one is done, as the overlapped tick's retire
  // would wait for it).
  explicit NoopModel(bool trivial_frontend, bool token_per_chunk = false,
                     std::pair<double, double> device_us = {0, 0}, bool async_device = false)
      : trivial_frontend_(trivial_frontend),
        token_per_chunk_(token_per_chunk),
        device_us_(device_us),
        async_device_(async_device),
        ctx_(*ExecutionContext::Create({})) {
    geometry_.chunk_size = 16;
    geometry_.vocab_size = 8;
  }
  const ModelGeometry& geometry() const override { return geometry_; }
  cache::CacheConfig BaseCacheConfig() const override {
    cache::CacheConfig c;
    c.num_layers = 1;
    c.n_kv_head = 1;
    c.head_dim = 4;
    c.hidden_dim = 4;
    c.kernel_size = 2;
    c.dtype = DType::kFloat32;
    return c;
  }
  absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> CreateFrontEnd(
      int sample_rate) const override {
    if (trivial_frontend_) return std::make_unique<CountingFeatures>(sample_rate);
    return encoder::FeaturePipeline::Create({sample_rate}, nullptr);
  }
  bool has_device_front_end() const override { return true; }
  absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> CreateDeviceFrontEnd(
      int sample_rate) const override {
    encoder::FeaturePipelineOptions options;
    options.sample_rate = sample_rate;
    return encoder::PcmSource::Create(options);
  }
  std::vector<cache::StreamStateSpec> StreamStates() const override {
    return {cache::StreamStateSpec{"none", Shape{1}, 0, false, DType::kFloat32}};
  }
  ExecutionContext& context() const override { return *ctx_; }
  size_t WorkspaceBytes(int) const override { return 0; }
  absl::Status ForwardCohort(const CohortPlan& plan, const TensorView& log_probs) override {
    const double device_us = device_us_.first + device_us_.second * plan.batch;
    if (device_us > 0) {
      const Clock::time_point start = Clock::now();
      const auto cost = std::chrono::nanoseconds(static_cast<int64_t>(device_us * 1e3));
      if (async_device_) {
        const Clock::time_point previous = device_done_;
        device_done_ = std::max(start, previous) + cost;
        std::this_thread::sleep_until(previous);
      } else {
        std::this_thread::sleep_for(cost);
      }
      slept_ns_.fetch_add(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count(),
          std::memory_order_relaxed);
    }
    float* out = static_cast<float*>(log_probs.data());
    for (int b = 0; b < plan.batch; ++b) {
      for (int t = 0; t < plan.host_frames[b]; ++t) {
        float* r = out + (int64_t{b} * plan.chunk + t) * geometry_.vocab_size;
        for (int v = 0; v < geometry_.vocab_size; ++v) r[v] = -7.0f;
        r[token_per_chunk_ && t == 0 ? 2 : 0] = -0.01f;
      }
    }
    return absl::OkStatus();
  }

 private:
  const bool trivial_frontend_;
  const bool token_per_chunk_;
  const std::pair<double, double> device_us_;
  const bool async_device_;
  Clock::time_point device_done_{};  // When the modelled device finishes the last forward.

 public:
  // Nanoseconds the forwards slept (the modelled device time).
  std::atomic<int64_t> slept_ns_{0};

 private:
  std::unique_ptr<ExecutionContext> ctx_;
  ModelGeometry geometry_;
};

std::vector<int16_t> Audio(double seconds, int rate, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0, 2000);
  std::vector<int16_t> out(static_cast<size_t>(seconds * rate));
  for (auto& s : out) s = static_cast<int16_t>(std::clamp(noise(rng), -32768.0, 32767.0));
  return out;
}

std::unique_ptr<decoder::CtcDecoder> Decoder(std::vector<std::string> units,
                                             decoder::SearchMethod method) {
  decoder::CtcDecoderConfig config;
  config.method = method;
  auto table = decoder::SymbolTable::FromUnits(std::move(units));
  auto dec = decoder::CtcDecoder::Create(
      config, std::make_shared<const decoder::SymbolTable>(std::move(*table)));
  if (!dec.ok()) {
    std::fprintf(stderr, "decoder: %s\n", dec.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*dec);
}

struct OverheadOptions {
  int frontend_threads = 0;
  bool trivial_frontend = false;
  int chunks = 0;  // Per stream; the first is not timed. 0: 16 trivial, 4 real.
};

// Prints one line of figures; returns the scheduler's (us per stream per tick).
double Overhead(int streams, const OverheadOptions& options) {
  const int frontend_threads = options.frontend_threads;
  EngineConfig config;
  config.max_batch_size = streams;
  config.frontend_threads = frontend_threads;
  config.max_waiting = 0;
  config.decoder.method = decoder::SearchMethod::kGreedy;
  auto engine = Engine::Create(config, std::make_unique<NoopModel>(options.trivial_frontend),
                               Decoder({"<blank>", "<unk>", "▁a", "▁b", "c", "d", "e", "<sos/eos>"},
                                       decoder::SearchMethod::kGreedy));
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", engine.status().ToString().c_str());
    std::exit(1);
  }
  // Steady state only: every stream is admitted and has decoded its first
  // chunk before the clocks are read, so opening and finishing streams (a
  // one-off cost per stream) stays out of the per-tick figure.
  const int rate = 8000;  // Keeps the front end's share small.
  // The resampler holds back a few ms, so each part carries a margin.
  const int chunks_per_stream = options.chunks > 0         ? options.chunks
                                : options.trivial_frontend ? 16
                                                           : 4;
  const std::vector<int16_t> audio = Audio(0.64 * chunks_per_stream + 0.4, rate, 1);
  const size_t first = static_cast<size_t>(0.64 * rate + 0.3 * rate);
  std::vector<std::unique_ptr<EngineStream>> handles;
  for (int i = 0; i < streams; ++i) {
    StreamRequest request;
    request.sample_rate = rate;
    request.interim_results = false;
    handles.push_back(std::move(*(*engine)->OpenStream(request)));
    (void)handles.back()->PushAudio({audio.data(), first});
  }
  const EngineStats& s = (*engine)->stats();
  auto wait_chunks = [&](int64_t n) {
    while (s.chunks_processed.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  wait_chunks(streams);
  const int64_t t0 = s.tick_ns, f0 = s.frontend_ns, m0 = s.model_ns, d0 = s.decode_ns, k0 = s.ticks,
                c0 = s.chunks_processed, p0 = s.frontend_pool_ns, w0 = s.device_wait_ns,
                h0 = s.commands_ns, e0 = s.emit_ns;
  for (auto& h : handles) (void)h->PushAudio({audio.data() + first, audio.size() - first});
  wait_chunks(int64_t{chunks_per_stream} * streams);
  const double chunks = static_cast<double>(s.chunks_processed - c0);
  const double tick = static_cast<double>(s.tick_ns - t0),
               fe = static_cast<double>(s.frontend_ns - f0),
               model = static_cast<double>(s.model_ns - m0),
               dec = static_cast<double>(s.decode_ns - d0),
               wait = static_cast<double>(s.device_wait_ns - w0),
               commands = static_cast<double>(s.commands_ns - h0),
               emit = static_cast<double>(s.emit_ns - e0);
  const double scheduler = (tick - fe - model - dec - wait) / chunks / 1e3;
  // With a pool, the front end's share of the scheduler thread (copying
  // published frames into the cohort's windows, dropping old ones) is shown
  // after the workers' time; it is not in the scheduler figure either.
  const std::string pool =
      frontend_threads > 0 ? absl::StrFormat(" (pool) + %.2f us here", fe / chunks / 1e3) : "";
  std::printf(
      "%8d streams  %5lld ticks  %7.0f stream-chunks  front end %7.2f us%s  model %6.2f us  "
      "decode %6.2f us  scheduler %6.3f us (commands %.3f, emit %.3f)  (per stream per tick)\n",
      streams, static_cast<long long>(s.ticks - k0), chunks,
      (frontend_threads > 0 ? static_cast<double>(s.frontend_pool_ns - p0) : fe) / chunks / 1e3,
      pool.c_str(), model / chunks / 1e3, dec / chunks / 1e3, scheduler, commands / chunks / 1e3,
      emit / chunks / 1e3);
  for (auto& h : handles) (void)h->EndAudio();
  for (auto& h : handles) {
    StreamEvent event;
    while (!h->outbox().finished()) (void)h->outbox().WaitPop(&event, 60);
  }
  return scheduler;
}

// The scheduler thread's work per row as a server sees it: `streams` streams
// of 16 kHz audio, each sent in 640 ms pieces every 640 ms from its own
// phase by one driver thread (which also drains the streams' events, as a
// server's dispatcher would), through the counting front end and the no-op
// model writing a word each chunk with interim results on: a push and an
// event a row. With `gpu_tick` the engine runs the tick it serves a GPU
// with (device front end in PCM rings, overlapped ticks, a decode thread),
// else the CPU server's. Prints, after `warm` seconds, `run` seconds' rows
// per second and the scheduler thread's time per row, split as the engine's
// clocks do.
void Live(int streams, double warm, double run, int frontend_threads, bool gpu_tick,
          std::pair<double, double> device_us) {
  EngineConfig config;
  config.max_batch_size = streams;
  config.frontend_threads = frontend_threads;
  config.max_waiting = 0;
  if (gpu_tick) {
    config.front_end = EngineConfig::FrontEnd::kDevice;
    config.overlap_on_cpu = true;
  }
  config.decoder.method = decoder::SearchMethod::kGreedy;
  auto noop = std::make_unique<NoopModel>(true, true, device_us, /*async_device=*/gpu_tick);
  const std::atomic<int64_t>& slept = noop->slept_ns_;  // The engine owns the model.
  auto engine = Engine::Create(config, std::move(noop),
                               Decoder({"<blank>", "<unk>", "▁a", "▁b", "c", "d", "e", "<sos/eos>"},
                                       decoder::SearchMethod::kGreedy));
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", engine.status().ToString().c_str());
    std::exit(1);
  }
  constexpr int kRate = 16000;
  constexpr size_t kPiece = kRate * 64 / 100;  // 640 ms
  const std::vector<int16_t> piece = Audio(0.64, kRate, 2);
  std::vector<std::unique_ptr<EngineStream>> handles;
  for (int i = 0; i < streams; ++i) {
    StreamRequest request;
    request.sample_rate = kRate;
    request.interim_results = true;
    request.decode.nbest = 1;
    handles.push_back(std::move(*(*engine)->OpenStream(request)));
  }
  using Due = std::pair<Clock::time_point, int>;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> due;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> phase(0.0, 0.64);
  const auto seconds = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < streams; ++i) due.push({start + seconds(phase(rng)), i});
  const EngineStats& s = (*engine)->stats();
  struct Mark {
    int64_t tick, fe, model, dec, wait, commands, emit, chunks, ticks, decode_wait, slept;
  };
  const auto mark = [&s, &slept] {
    return Mark{s.tick_ns,        s.frontend_ns,    s.model_ns,  s.decode_ns,
                s.device_wait_ns, s.commands_ns,    s.emit_ns,   s.chunks_processed,
                s.ticks,          s.decode_wait_ns, slept.load()};
  };
  Mark before{};
  bool marked = false;
  int64_t events = 0, errors = 0;
  const Clock::time_point measure = start + seconds(warm), stop = measure + seconds(run);
  StreamEvent event;
  while (true) {
    const Clock::time_point now = Clock::now();
    if (!marked && now >= measure) {
      before = mark();
      marked = true;
    }
    if (now >= stop) break;
    while (!due.empty() && due.top().first <= now) {
      const auto [at, i] = due.top();
      due.pop();
      if (!handles[i]->PushAudio({piece.data(), kPiece}).ok()) ++errors;
      while (handles[i]->outbox().TryPop(&event)) ++events;
      // From when it was due, not from now: a late pass keeps each stream's
      // phase (from `now`, streams pushed in one pass would stay bunched).
      due.push({at + seconds(0.64), i});
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  const Mark after = mark();
  const double rows = static_cast<double>(after.chunks - before.chunks);
  const auto per_row = [rows](int64_t a, int64_t b) {
    return rows > 0 ? static_cast<double>(a - b) / rows / 1e3 : 0.0;
  };
  const double tick = per_row(after.tick, before.tick), fe = per_row(after.fe, before.fe),
               model = per_row(after.model, before.model), dec = per_row(after.dec, before.dec),
               wait = per_row(after.wait, before.wait),
               commands = per_row(after.commands, before.commands),
               emit = per_row(after.emit, before.emit),
               decode_wait = per_row(after.decode_wait, before.decode_wait),
               device = per_row(after.slept, before.slept);
  // With a decode thread, decode is that thread's time (outside the tick)
  // and the scheduler thread's share of it is the wait for it.
  const bool off_thread = s.decode_off_thread.load();
  const double own_decode = off_thread ? decode_wait : dec;
  // The scheduler thread's own work: the tick less the modelled device time
  // and the waits (for the decode thread, for the device's copies).
  const double own = tick - device - (off_thread ? decode_wait : 0.0) - wait;
  const std::string decode_thread =
      off_thread ? absl::StrFormat("  decode thread %.3f us a row", dec) : std::string();
  std::printf(
      "%8d streams  %8.0f rows/s (%.0f due)  cohort %6.1f  scheduler thread per row: own work "
      "%.3f us (commands %.3f, emit %.3f, other %.3f, front end %.3f, model %.3f%s) + device "
      "%.3f + waits %.3f%s  busy %.0f %%  %lld events %lld errors\n",
      streams, rows / run, streams / 0.64,
      rows / std::max<double>(1.0, static_cast<double>(after.ticks - before.ticks)), own, commands,
      emit, tick - fe - model - own_decode - wait - commands - emit, fe, model - device,
      off_thread ? "" : absl::StrFormat(", decode %.3f", dec).c_str(), device,
      wait + (off_thread ? decode_wait : 0.0), decode_thread.c_str(),
      100.0 * tick * rows / 1e6 / run, static_cast<long long>(events),
      static_cast<long long>(errors));
  for (auto& h : handles) (void)h->EndAudio();
  for (auto& h : handles) {
    while (!h->outbox().finished()) (void)h->outbox().WaitPop(&event, 60);
  }
}

std::string EnsureBenchModel() {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "oasr_bench_encoder_model";
  if (!std::filesystem::exists(dir / "model.safetensors")) {
    const std::string cmd = std::string("cd ") + OASR_SOURCE_DIR +
                            " && /usr/bin/python3 -B bench/encoder_torch.py write-model " +
                            dir.string();
    if (std::system(cmd.c_str()) != 0 || !std::filesystem::exists(dir / "model.safetensors")) {
      return "";
    }
  }
  return dir.string();
}

// "== real-time streams, <layers> x <d> x <FFN>, V = .., <chunk> ms chunks,
// beam .., N threads" from the model as loaded; empty (and the error on
// stderr) when it does not load.
std::string RealTimeBanner(const std::string& model_dir, int threads) {
  ModelOptions options;
  options.model_dir = model_dir;
  absl::StatusOr<LoadedModel> loaded = LoadModel(options);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s: %s\n", model_dir.c_str(), loaded.status().ToString().c_str());
    return "";
  }
  const ModelGeometry& g = loaded->geometry;
  std::string layers;
  if (const auto* conformer = dynamic_cast<const ConformerStreamingModel*>(loaded->model.get())) {
    const encoder::ModelConfig& c = conformer->model().config();
    layers = absl::StrFormat("%d x %d x %d", c.num_blocks, c.output_size, c.linear_units);
  } else {
    const cache::CacheConfig c = loaded->model->BaseCacheConfig();
    layers = absl::StrFormat("%d layers x %d", c.num_layers, c.hidden_dim);
  }
  const std::string search =
      loaded->decoder_config.method == decoder::SearchMethod::kGreedy
          ? std::string("greedy")
          : absl::StrFormat("beam %d", loaded->decoder_config.search.beam_size);
  return absl::StrFormat("== real-time streams, %s, V = %d, %g ms chunks, %s, %d threads", layers,
                         g.vocab_size, g.chunk_size * g.FrameShiftMs(), search, threads);
}

// Returns true when the engine kept all streams in real time.
bool RealTime(const std::string& model_dir, int streams, double seconds, int threads) {
  ModelOptions options;
  options.model_dir = model_dir;
  options.cpu_threads = threads;
  EngineConfig config;
  config.max_batch_size = std::max(streams, 1);
  auto engine = LoadEngine(options, config);
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", engine.status().ToString().c_str());
    std::exit(1);
  }
  const int rate = 16000;
  const std::vector<int16_t> audio = Audio(seconds, rate, 2);
  std::vector<std::unique_ptr<EngineStream>> handles;
  for (int i = 0; i < streams; ++i) handles.push_back(std::move(*(*engine)->OpenStream({})));
  const size_t step = rate / 10;
  const Clock::time_point start = Clock::now();
  for (size_t sent = 0, k = 0; sent < audio.size(); sent += step, ++k) {
    std::this_thread::sleep_until(start + std::chrono::milliseconds(100 * k));
    const size_t n = std::min(step, audio.size() - sent);
    for (auto& h : handles) (void)h->PushAudio({audio.data() + sent, n});
  }
  for (auto& h : handles) (void)h->EndAudio();
  const Clock::time_point ended = Clock::now();
  for (auto& h : handles) {
    StreamEvent event;
    while (!h->outbox().finished()) (void)h->outbox().WaitPop(&event, 120);
  }
  const double tail_s = std::chrono::duration<double>(Clock::now() - ended).count();
  const Histogram::Snapshot lat = (*engine)->stats().chunk_latency_s.Read();
  auto quantile = [&](double q) -> double {
    const double target = q * lat.count;
    for (size_t i = 0; i < lat.upper_bounds.size(); ++i) {
      if (lat.cumulative[i] >= target) return lat.upper_bounds[i];
    }
    return static_cast<double>(INFINITY);
  };
  const double p95 = quantile(0.95);
  const bool kept_up = p95 <= 0.3 && tail_s < 1.0;
  std::printf(
      "%4d streams  chunk latency p50 <= %5.3f s  p95 <= %5.3f s  mean %5.3f s  "
      "final after end %5.2f s  %s\n",
      streams, quantile(0.5), p95, lat.sum / std::max<uint64_t>(lat.count, 1), tail_s,
      kept_up ? "kept up" : "FELL BEHIND");
  return kept_up;
}

}  // namespace
}  // namespace oasr::scheduler

int main(int argc, char** argv) {
  using namespace oasr::scheduler;
  CLI::App app{
      "oasr-bench-scheduler: scheduler overhead per stream per tick with a no-op model, then "
      "streams kept in real time by the CPU engine"};
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  bool overhead_only = false, trivial_only = false, real_only = false;
  OverheadOptions options;
  int repeat = 0;   // 0: 3 with the counting front end (a few seconds), 1 with the real one.
  int streams = 0;  // 0: 1,000 then 10,000.
  std::string model_dir;
  app.add_option("threads,--threads", threads, "Encoder threads of the real-time part")
      ->check(CLI::Range(1, 256));
  app.add_flag("--overhead-only", overhead_only, "Only the scheduler overhead (no model)");
  auto* trivial_flag = app.add_flag("--trivial-frontend", trivial_only,
                                    "Only the counting front end (no resampling, no fbank)");
  app.add_flag("--real-frontend", real_only, "Only the real front end (libsoxr + fbank)")
      ->excludes(trivial_flag);
  app.add_option("--frontend-threads", options.frontend_threads,
                 "Front-end workers (0: inline on the scheduler thread)")
      ->check(CLI::Range(0, EngineConfig::kMaxFrontendThreads));
  app.add_option("--chunks", options.chunks,
                 "Chunks of audio per stream, the first not timed (default 16 counting, 4 real)")
      ->check(CLI::Range(2, 100000));
  app.add_option("--streams", streams, "Streams of the overhead figure (default 1000 then 10000)")
      ->check(CLI::Range(1, 65536));
  app.add_option("--repeat", repeat, "Runs per overhead figure (default 3 counting, 1 real)")
      ->check(CLI::Range(1, 1000));
  std::string live, live_tick = "gpu", live_device;
  double live_warm = 3, live_run = 10;
  app.add_option("--live", live,
                 "Comma-separated stream counts: the scheduler thread's time per row with a push "
                 "and an event a row (16 kHz, 640 ms pieces in real time, a word a chunk), then "
                 "exit");
  app.add_option("--live-tick", live_tick,
                 "The tick --live runs: gpu (PCM rings, overlapped ticks, decode thread, on the "
                 "CPU) or cpu (counting front end, the scheduler thread decoding)")
      ->check(CLI::IsMember({"gpu", "cpu"}))
      ->capture_default_str();
  app.add_option("--live-device-us", live_device,
                 "FIXED,PER_ROW: the no-op forward's time in us, a sleep (default 1000,6 with "
                 "--live-tick gpu: the H200's chunk step of the bundled model, ~1 ms + 6 us a row; "
                 "0,0 with cpu)");
  app.add_option("--live-warm", live_warm, "Seconds before measuring (--live)")
      ->capture_default_str();
  app.add_option("--live-run", live_run, "Seconds measured per count (--live)")
      ->capture_default_str();
  app.add_option("--model-dir", model_dir,
                 "Model of the real-time part (default: the random 12 x 256 x 2048, V = 5002 "
                 "model bench/encoder_torch.py writes)")
      ->check(CLI::ExistingDirectory);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!live.empty()) {
    const bool gpu_tick = live_tick == "gpu";
    std::pair<double, double> device_us = gpu_tick ? std::pair{1000.0, 6.0} : std::pair{0.0, 0.0};
    if (!live_device.empty()) {
      const std::vector<std::string> v = absl::StrSplit(live_device, ',');
      if (v.size() != 2 || !absl::SimpleAtod(v[0], &device_us.first) ||
          !absl::SimpleAtod(v[1], &device_us.second) || device_us.first < 0 ||
          device_us.second < 0) {
        std::fprintf(stderr, "--live-device-us: '%s' is not FIXED,PER_ROW\n", live_device.c_str());
        return 2;
      }
    }
    // The GPU's tick fills the rings on front-end workers.
    if (gpu_tick && options.frontend_threads == 0) options.frontend_threads = 2;
    std::printf(
        "== live: no-op model writing a word a chunk, greedy, %s (%s), interim results, one "
        "driver thread pushing 640 ms pieces and draining events; a forward %g us + %g us a row; "
        "%.0f s after %.0f s\n",
        gpu_tick ? "the GPU's tick: PCM rings, overlapped ticks, decode thread"
                 : "the CPU's tick: counting front end",
        options.frontend_threads > 0
            ? (std::to_string(options.frontend_threads) + " front-end threads").c_str()
            : "inline",
        device_us.first, device_us.second, live_run, live_warm);
    for (absl::string_view part : absl::StrSplit(live, ',')) {
      int n = 0;
      if (!absl::SimpleAtoi(part, &n) || n < 1 || n > EngineConfig::kMaxSlots) {
        std::fprintf(stderr, "--live: '%s' is not a stream count\n", std::string(part).c_str());
        return 2;
      }
      Live(n, live_warm, live_run, options.frontend_threads, gpu_tick, device_us);
    }
    return 0;
  }
  std::vector<bool> trivial = {true, false};
  if (trivial_only) trivial = {true};
  if (real_only) trivial = {false};
  const std::vector<int> sizes =
      streams > 0 ? std::vector<int>{streams} : std::vector<int>{1000, 10000};
  for (const bool counting : trivial) {
    options.trivial_frontend = counting;
    std::printf(
        "== scheduler overhead, no-op model, greedy decoding over 8 units, front end %s%s, "
        "%d chunks per stream\n",
        counting ? "counting samples only, " : "",
        options.frontend_threads > 0
            ? (std::to_string(options.frontend_threads) + " threads").c_str()
            : "inline",
        options.chunks > 0 ? options.chunks
        : counting         ? 16
                           : 4);
    for (const int n : sizes) {
      const int runs = repeat > 0 ? repeat : counting ? 3 : 1;
      double best = INFINITY;
      for (int r = 0; r < runs; ++r) best = std::min(best, Overhead(n, options));
      if (runs > 1) {
        std::printf("%8d streams  scheduler min of %d runs %6.3f us  (per stream per tick)\n", n,
                    runs, best);
      }
    }
  }

  if (overhead_only) return 0;
  if (model_dir.empty()) model_dir = EnsureBenchModel();
  if (model_dir.empty()) {
    std::printf(
        "== real-time streams: skipped (no model: /usr/bin/python3 with torch is needed)\n");
    return 0;
  }
  const std::string banner = RealTimeBanner(model_dir, threads);
  if (banner.empty()) return 1;
  std::printf("%s\n", banner.c_str());
  int best = 0;
  for (int n : {1, 2, 4, 6, 8, 12, 16, 24, 32}) {
    if (!RealTime(model_dir, n, 8.0, threads)) break;
    best = n;
  }
  std::printf("streams kept in real time (p95 chunk latency <= 300 ms): %d\n", best);
  return 0;
}
