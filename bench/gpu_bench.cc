// oasr-bench-gpu: how many concurrent real-time streams one device holds
// through the whole engine -- front end, encoder, decoder, events; no gRPC.
//
// Real time: N streams, each sending 640 ms of 16 kHz audio every 640 ms from
// its own random phase, the audio cut from samples/ (cycled, each stream at a
// random place), each stream of a random length (half to all of --seconds);
// a stream that ends is replaced by a new one at once, so N stay open. After
// --warm seconds, --run seconds are measured: the chunk latency (the audio
// that completed a chunk arrived -> its result event; the engine's histogram,
// so figures are bucket bounds), where the scheduler thread's time goes per
// tick, the mean cohort, and any stream that ended in error. N is held when
// the p99 latency is at most --p99 and no stream failed; the search stops at
// the first N that is not.
//
// Offline: --offline-streams utterances of --offline-seconds each, all audio
// sent at once; RTFx = audio seconds / wall seconds.
//
// Also printed: device memory the engine took per stream, and the fraction
// of --peak-tflops the encoder reached (--mflop-per-frame of work per frame).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/thread_name.h"
#include "scheduler/engine.h"
#include "scheduler/model_factory.h"
#include "scheduler/search_flags.h"
#include "scheduler/wav_file.h"

#if OASR_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace oasr::scheduler {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRate = 16000;
constexpr int64_t kPiece = kRate * 64 / 100;  // 640 ms.

struct Settings {
  ModelOptions model;
  EngineConfig engine;
  double seconds = 30;  // Longest stream.
  double warm = 5;
  double run = 20;
  double p99 = 0.1;
  int drivers = 2;
  double mflop_per_frame = 63.1;
  double peak_tflops = 790;
};

// Device memory in use (0 on the CPU).
int64_t DeviceBytesUsed(const Device& device) {
#if OASR_WITH_CUDA
  if (device.is_cuda()) {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) return static_cast<int64_t>(total - free);
  }
#endif
  (void)device;
  return 0;
}

// What the engine's counters moved by between two reads.
struct Counters {
  int64_t ticks = 0, tick_ns = 0, frontend_ns = 0, model_ns = 0, decode_ns = 0, pool_ns = 0;
  int64_t wait_ns = 0, commands_ns = 0, emit_ns = 0, search_ns = 0, decode_wait_ns = 0;
  int64_t audio_ms = 0, padded = 0;
  bool decode_off_thread = false;
  Histogram::Snapshot latency, batch;

  static Counters Read(const EngineStats& s) {
    Counters c;
    c.ticks = s.ticks.load();
    c.tick_ns = s.tick_ns.load();
    c.frontend_ns = s.frontend_ns.load();
    c.model_ns = s.model_ns.load();
    c.decode_ns = s.decode_ns.load();
    c.pool_ns = s.frontend_pool_ns.load();
    c.wait_ns = s.device_wait_ns.load();
    c.commands_ns = s.commands_ns.load();
    c.emit_ns = s.emit_ns.load();
    c.search_ns = s.decode_search_ns.load();
    c.decode_wait_ns = s.decode_wait_ns.load();
    c.decode_off_thread = s.decode_off_thread.load();
    c.audio_ms = s.audio_ms_processed.load();
    c.padded = s.padded_rows.load();
    c.latency = s.chunk_latency_s.Read();
    c.batch = s.batch_size.Read();
    return c;
  }
};

// The bound of the bucket holding quantile q of the latencies observed
// between `a` and `b` (+inf past the last bound).
double Quantile(const Counters& a, const Counters& b, double q) {
  const uint64_t count = b.latency.count - a.latency.count;
  for (size_t i = 0; i < b.latency.upper_bounds.size(); ++i) {
    if (b.latency.cumulative[i] - a.latency.cumulative[i] >= q * count) {
      return b.latency.upper_bounds[i];
    }
  }
  return INFINITY;
}

// n samples of `audio`, looped, from `at` on (one copy per lap).
void CopyLooped(const std::vector<int16_t>& audio, int64_t at, int64_t n, int16_t* out) {
  const int64_t size = static_cast<int64_t>(audio.size());
  while (n > 0) {
    const int64_t run = std::min(n, size - at);
    std::copy_n(audio.data() + at, run, out);
    out += run;
    n -= run;
    at = 0;
  }
}

// One driver thread's streams.
struct Sim {
  std::unique_ptr<EngineStream> stream;
  int64_t source = 0;  // Where in the audio its samples start.
  int64_t length = 0;  // Samples it sends.
  int64_t sent = 0;
  bool ending = false;  // Audio ended; draining its last events.
};

class Driver {
 public:
  Driver(Engine& engine, const std::vector<int16_t>& audio, const Settings& settings, int streams,
         unsigned seed)
      : engine_(engine), audio_(audio), settings_(settings), rng_(seed), sims_(streams) {}

  // Runs until `stop`, then ends every stream and drains it.
  void Run(Clock::time_point start, Clock::time_point stop) {
    std::uniform_real_distribution<double> phase(0, 0.64);
    for (size_t i = 0; i < sims_.size(); ++i) {
      Open(sims_[i]);
      due_.push({start + Seconds(phase(rng_)), i});
    }
    std::vector<int16_t> piece(kPiece);
    while (Clock::now() < stop) {
      const Clock::time_point now = Clock::now();
      while (!due_.empty() && due_.top().first <= now) {
        const size_t i = due_.top().second;
        due_.pop();
        Sim& s = sims_[i];
        const int64_t n = std::min<int64_t>(kPiece, s.length - s.sent);
        CopyLooped(audio_, (s.source + s.sent) % static_cast<int64_t>(audio_.size()), n,
                   piece.data());
        if (!s.stream->PushAudio({piece.data(), static_cast<size_t>(n)}).ok()) ++errors_;
        s.sent += n;
        Drain(s);
        if (s.sent >= s.length) {
          (void)s.stream->EndAudio();
          s.ending = true;
          ending_.push_back(i);
        } else {
          due_.push({now + Seconds(0.64), i});
        }
      }
      // Streams whose last events arrived are replaced at once.
      for (size_t e = 0; e < ending_.size();) {
        Sim& s = sims_[ending_[e]];
        Drain(s);
        if (!s.stream->outbox().finished()) {
          ++e;
          continue;
        }
        Open(s);
        due_.push({Clock::now() + Seconds(phase(rng_)), ending_[e]});
        ending_[e] = ending_.back();
        ending_.pop_back();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (Sim& s : sims_) {
      if (!s.ending) (void)s.stream->EndAudio();
    }
    for (Sim& s : sims_) {
      StreamEvent event;
      while (!s.stream->outbox().finished() && s.stream->outbox().WaitPop(&event, 60)) {
        Count(event);
      }
      Drain(s);
    }
  }

  int64_t errors() const { return errors_; }
  int64_t finished() const { return finished_; }

 private:
  static Clock::duration Seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }
  void Open(Sim& s) {
    StreamRequest request;
    request.decode.nbest = 1;
    absl::StatusOr<std::unique_ptr<EngineStream>> stream = engine_.OpenStream(request);
    if (!stream.ok()) {
      std::fprintf(stderr, "OpenStream: %s\n", stream.status().ToString().c_str());
      std::exit(1);
    }
    std::uniform_int_distribution<int64_t> where(0, static_cast<int64_t>(audio_.size()) - 1);
    std::uniform_real_distribution<double> len(settings_.seconds / 2, settings_.seconds);
    s.stream = std::move(*stream);
    s.source = where(rng_);
    s.length = static_cast<int64_t>(len(rng_) * kRate);
    s.sent = 0;
    s.ending = false;
  }
  void Drain(Sim& s) {
    StreamEvent event;
    while (s.stream->outbox().TryPop(&event)) Count(event);
  }
  void Count(const StreamEvent& event) {
    if (!event.finish.has_value()) return;
    ++finished_;
    if (*event.finish == FinishReason::kError || !event.error.ok()) ++errors_;
  }

  Engine& engine_;
  const std::vector<int16_t>& audio_;
  const Settings& settings_;
  std::mt19937 rng_;
  std::vector<Sim> sims_;
  using Due = std::pair<Clock::time_point, size_t>;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> due_;
  std::vector<size_t> ending_;
  int64_t errors_ = 0;
  int64_t finished_ = 0;
};

std::unique_ptr<Engine> MakeEngine(const Settings& settings, int slots, int64_t* device_bytes) {
  EngineConfig config = settings.engine;
  config.max_batch_size = slots;
  config.max_waiting = slots;
  const int64_t before = DeviceBytesUsed(settings.model.device);
  absl::StatusOr<std::unique_ptr<Engine>> engine = LoadEngine(settings.model, config);
  if (!engine.ok()) {
    std::fprintf(stderr, "engine of %d slots: %s\n", slots, engine.status().ToString().c_str());
    return nullptr;
  }
  *device_bytes = DeviceBytesUsed(settings.model.device) - before;
  return std::move(*engine);
}

void PrintStages(const Counters& a, const Counters& b) {
  const double ticks = std::max<int64_t>(b.ticks - a.ticks, 1);
  const double batches = std::max<double>(static_cast<double>(b.batch.count - a.batch.count), 1);
  const double rows = std::max(1.0, b.batch.sum - a.batch.sum);
  auto ms = [&](int64_t Counters::*field) { return (b.*field - a.*field) / ticks / 1e6; };
  // With a decode thread the decode is outside the scheduler's ticks; the
  // ticks' share of it is their wait for that thread.
  const double in_tick_decode =
      b.decode_off_thread ? ms(&Counters::decode_wait_ns) : ms(&Counters::decode_ns);
  const double rest = ms(&Counters::tick_ns) - ms(&Counters::frontend_ns) -
                      ms(&Counters::model_ns) - in_tick_decode - ms(&Counters::wait_ns);
  const double other = rest - ms(&Counters::commands_ns) - ms(&Counters::emit_ns);
  const char* decode_where = b.decode_off_thread ? "decode thread" : "decode";
  std::printf(
      "    per tick: %.2f ms (front end %.2f, model %.2f, %s %.2f (search %.2f), decode wait "
      "%.2f, device wait %.2f, rest %.2f: commands %.2f, emit %.2f, other %.2f); mean cohort "
      "%.0f, padding %.1f%%; front-end workers %.2f ms per tick\n",
      ms(&Counters::tick_ns), ms(&Counters::frontend_ns), ms(&Counters::model_ns), decode_where,
      ms(&Counters::decode_ns), ms(&Counters::search_ns), ms(&Counters::decode_wait_ns),
      ms(&Counters::wait_ns), rest, ms(&Counters::commands_ns), ms(&Counters::emit_ns), other,
      (b.batch.sum - a.batch.sum) / batches,
      100.0 * (b.padded - a.padded) / (rows + (b.padded - a.padded)), ms(&Counters::pool_ns));
  auto us_per_row = [&](double ms_per_tick) { return ms_per_tick * 1e3 * ticks / rows; };
  std::printf(
      "    per row: front end %.2f us, model %.2f, %s %.2f (search %.2f), decode wait %.2f, "
      "device wait %.2f, rest %.2f (commands %.2f, emit %.2f, other %.2f)\n",
      us_per_row(ms(&Counters::frontend_ns)), us_per_row(ms(&Counters::model_ns)), decode_where,
      us_per_row(ms(&Counters::decode_ns)), us_per_row(ms(&Counters::search_ns)),
      us_per_row(ms(&Counters::decode_wait_ns)), us_per_row(ms(&Counters::wait_ns)),
      us_per_row(rest), us_per_row(ms(&Counters::commands_ns)), us_per_row(ms(&Counters::emit_ns)),
      us_per_row(other));
}

// Returns whether N streams were held.
bool RealTime(const Settings& settings, const std::vector<int16_t>& audio, int streams) {
  int64_t device_bytes = 0;
  std::unique_ptr<Engine> engine = MakeEngine(settings, streams, &device_bytes);
  if (engine == nullptr) return false;
  const int drivers = std::max(1, std::min(settings.drivers, streams));
  std::vector<std::unique_ptr<Driver>> d;
  for (int i = 0; i < drivers; ++i) {
    const int share = streams / drivers + (i < streams % drivers ? 1 : 0);
    d.push_back(std::make_unique<Driver>(*engine, audio, settings, share, 17 + i));
  }
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(100);
  const auto at = [&](double s) {
    return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  const Clock::time_point stop = at(settings.warm + settings.run);
  std::vector<std::thread> threads;
  for (auto& driver : d) {
    threads.emplace_back([&driver, start, stop] {
      SetThreadName("bench-driver");
      driver->Run(start, stop);
    });
  }
  std::this_thread::sleep_until(at(settings.warm));
  const Counters a = Counters::Read(engine->stats());
  std::this_thread::sleep_until(stop);
  const Counters b = Counters::Read(engine->stats());
  for (std::thread& t : threads) t.join();
  int64_t errors = 0, finished = 0;
  for (auto& driver : d) {
    errors += driver->errors();
    finished += driver->finished();
  }
  const double p50 = Quantile(a, b, 0.5), p95 = Quantile(a, b, 0.95), p99 = Quantile(a, b, 0.99);
  const double audio_s = (b.audio_ms - a.audio_ms) / 1000.0;
  const double frames_per_s = audio_s / 0.04 / settings.run;
  const bool held = p99 <= settings.p99 && errors == 0;
  std::printf(
      "%7d streams  latency p50 <= %.3f s  p95 <= %.3f s  p99 <= %.3f s  audio %.2fx real time  "
      "%lld finished, %lld errors  %s\n",
      streams, p50, p95, p99, audio_s / settings.run, static_cast<long long>(finished),
      static_cast<long long>(errors), held ? "HELD" : "NOT HELD");
  PrintStages(a, b);
  std::printf(
      "    device memory %.1f MiB per stream (%.2f GiB); encoder %.1f TFLOP/s, %.1f%% of %.0f\n",
      device_bytes / 1048576.0 / streams, device_bytes / 1073741824.0,
      frames_per_s * settings.mflop_per_frame / 1e6,
      100.0 * frames_per_s * settings.mflop_per_frame / 1e6 / settings.peak_tflops,
      settings.peak_tflops);
  std::fflush(stdout);
  return held;
}

void Offline(const Settings& settings, const std::vector<int16_t>& audio, int streams,
             double seconds) {
  int64_t device_bytes = 0;
  Settings s = settings;
  s.engine.max_buffered_audio_s = seconds + 1;
  std::unique_ptr<Engine> engine = MakeEngine(s, streams, &device_bytes);
  if (engine == nullptr) return;
  const int64_t length = static_cast<int64_t>(seconds * kRate);
  // Every utterance opened and its audio pushed at once, by the driver
  // threads side by side (one thread alone makes the engine see them arrive
  // a few at a time); each then waits for its utterances' last events.
  const int drivers = std::max(1, std::min(settings.drivers, streams));
  std::vector<std::unique_ptr<EngineStream>> handles(static_cast<size_t>(streams));
  std::atomic<int64_t> errors{0};
  const Counters a = Counters::Read(engine->stats());
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < drivers; ++t) {
    threads.emplace_back([&, t] {
      SetThreadName("bench-driver");
      std::vector<int16_t> utterance(static_cast<size_t>(length));
      std::mt19937 rng(5 + t);
      std::uniform_int_distribution<int64_t> where(0, static_cast<int64_t>(audio.size()) - 1);
      for (int i = t; i < streams; i += drivers) {
        CopyLooped(audio, where(rng), length, utterance.data());
        StreamRequest request;
        request.interim_results = false;
        absl::StatusOr<std::unique_ptr<EngineStream>> opened = engine->OpenStream(request);
        if (!opened.ok()) {
          ++errors;
          continue;
        }
        handles[i] = std::move(*opened);
        if (!handles[i]->PushAudio({utterance.data(), utterance.size()}).ok()) ++errors;
        (void)handles[i]->EndAudio();
      }
      for (int i = t; i < streams; i += drivers) {
        if (handles[i] == nullptr) continue;
        StreamEvent event;
        while (!handles[i]->outbox().finished() && handles[i]->outbox().WaitPop(&event, 600)) {
          if (event.finish.has_value() && *event.finish == FinishReason::kError) ++errors;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const Counters b = Counters::Read(engine->stats());
  std::printf("offline: %d utterances of %.0f s in %.2f s (%d drivers): RTFx %.0f, %lld errors\n",
              streams, seconds, wall, drivers, streams * seconds / wall,
              static_cast<long long>(errors.load()));
  PrintStages(a, b);
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  CLI::App app{"oasr-bench-gpu: concurrent real-time streams through the whole engine"};
  Settings settings;
  std::string model_dir = OASR_BUNDLED_MODEL, samples = OASR_SAMPLES_DIR, device = "auto", dtype;
  std::string search = "greedy", streams_list, front_end = "auto";
  int beam = 10,
      frontend_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) - 4);
  int decode_threads = 2, offline_streams = 0;
  double offline_seconds = 20;
  bool no_graphs = false, dense = false, no_lm = false;
  app.add_option("--model-dir", model_dir, "Model directory")->capture_default_str();
  app.add_option("--samples", samples, "Folder of 16 kHz WAV files, cycled")->capture_default_str();
  app.add_option("--device", device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--dtype", dtype, "float32, bfloat16 or float16 (default: the device's)");
  app.add_option("--search", search, "greedy or beam")->capture_default_str();
  app.add_option("--beam", beam, "Beam size (beam search)")->capture_default_str();
  app.add_flag("--no-lm", no_lm, "Beam search without the model's language models");
  float blank_skip = 0.0f, token_beam = 0.0f;
  AddBeamPruningFlags(app, &blank_skip, &token_beam);
  app.add_option("--streams", streams_list,
                 "Comma-separated stream counts, ascending (default: 1000 ... 80000 on CUDA, "
                 "2,4,8 on the CPU)");
  app.add_option("--seconds", settings.seconds, "Longest stream (s)")->capture_default_str();
  app.add_option("--warm", settings.warm, "Seconds before measuring")->capture_default_str();
  app.add_option("--run", settings.run, "Seconds measured per count")->capture_default_str();
  app.add_option("--p99", settings.p99, "Latency goal (s)")->capture_default_str();
  app.add_option("--drivers", settings.drivers, "Client threads")->capture_default_str();
  app.add_option("--frontend-threads", frontend_threads, "Front-end workers")
      ->capture_default_str();
  app.add_option("--decode-threads", decode_threads, "Host threads of the device context (decode)")
      ->capture_default_str();
  app.add_flag("--no-cuda-graphs", no_graphs, "Launch every op each tick");
  app.add_option("--fill-widths-from", settings.engine.fill_widths_from,
                 "Cohorts of this many rows or more run the widest captured width they fill, "
                 "the rest next tick, instead of padding (0: always pad)")
      ->check(CLI::Range(0, EngineConfig::kMaxCohortRows))
      ->capture_default_str();
  app.add_option("--max-cohort", settings.engine.max_cohort_rows,
                 "Most rows a cohort forward runs (0: the slots, at most 16384)")
      ->check(CLI::Range(0, EngineConfig::kMaxCohortRows))
      ->capture_default_str();
  bool no_overlap = false;
  app.add_flag("--no-overlap", no_overlap,
               "Each tick waits for its own forward (no two in flight)");
  bool no_decode_thread = false, no_pcm_rings = false;
  app.add_flag("--no-pcm-rings", no_pcm_rings,
               "Stage every row's PCM window on the scheduler thread instead of reading the "
               "streams' rings");
  app.add_flag("--no-decode-thread", no_decode_thread,
               "The scheduler thread decodes (over the host threads) instead of a decode thread");
  app.add_option("--front-end", front_end, "Where fbank runs: auto, host or device")
      ->check(CLI::IsMember({"auto", "host", "device"}))
      ->capture_default_str();
  app.add_flag("--dense-decode", dense, "Copy whole log-probs to the decoder");
  std::string stem = "implicit-gemm";
  app.add_option("--stem", stem,
                 "CUDA: how the subsampling stem computes, recompute, tensor-cores or "
                 "implicit-gemm")
      ->capture_default_str();
  std::string ffn = "unfused";
  app.add_option("--ffn", ffn,
                 "CUDA: the feed-forward modules fused (one kernel each) or unfused (separate "
                 "ops)")
      ->check(CLI::IsMember({"fused", "unfused"}))
      ->capture_default_str();
  std::string gemm = "auto";
  app.add_option("--gemm", gemm, kGemmFlagHelp)->capture_default_str();
  std::string wgmma_k256 = "default";
  app.add_option("--wgmma-k256", wgmma_k256, kWgmmaK256FlagHelp)->capture_default_str();
  std::string kv_dtype = "auto";
  app.add_option("--kv-dtype", kv_dtype, kKvDTypeFlagHelp)->capture_default_str();
  app.add_option("--offline-streams", offline_streams, "Utterances of the offline run (0: none)");
  app.add_option("--offline-seconds", offline_seconds, "Seconds per offline utterance")
      ->capture_default_str();
  app.add_option("--mflop-per-frame", settings.mflop_per_frame, "Encoder work per frame")
      ->capture_default_str();
  app.add_option("--peak-tflops", settings.peak_tflops, "Matrix rate of the device")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  (void)InitLogging("warn");
  settings.model.model_dir = model_dir;
  settings.model.cpu_threads = decode_threads;
  if (absl::Status s = SetComputeFlags(device, dtype, &settings.model, stem, gemm, kv_dtype);
      !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  if (absl::Status s = SetWgmmaK256Flag(wgmma_k256); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  settings.model.fused_feed_forward = ffn == "fused";
  if (search != "greedy" && search != "beam") {
    std::fprintf(stderr, "--search: %s is neither greedy nor beam\n", search.c_str());
    return 2;
  }
  settings.model.decoder.method =
      search == "greedy" ? decoder::SearchMethod::kGreedy : decoder::SearchMethod::kPrefixBeam;
  settings.model.decoder.search.beam_size = beam;
  settings.model.decoder.search.first_beam_size = beam;
  settings.model.decoder.search.blank_skip_threshold = blank_skip;
  settings.model.decoder.search.token_beam = token_beam;
  settings.model.use_lm = !no_lm;
  settings.engine.frontend_threads = frontend_threads;
  settings.engine.cuda_graphs = !no_graphs;
  settings.engine.overlap_ticks = !no_overlap;
  settings.engine.decode_thread = !no_decode_thread;
  settings.engine.pcm_rings = !no_pcm_rings;
  settings.engine.front_end = *ParseFrontEnd(front_end);  // Checked by the flag.
  settings.engine.pruned_decode = !dense;
  settings.engine.attention_rescoring = false;
  std::vector<int16_t> audio;
  for (const auto& entry : std::filesystem::directory_iterator(samples)) {
    if (entry.path().extension() != ".wav") continue;
    absl::StatusOr<WavFile> wav = ReadWav(entry.path().string());
    if (!wav.ok() || wav->sample_rate != kRate) continue;
    audio.insert(audio.end(), wav->samples.begin(), wav->samples.end());
  }
  if (audio.empty()) {
    std::fprintf(stderr, "no 16 kHz WAV files in %s\n", samples.c_str());
    return 2;
  }
  if (streams_list.empty()) {
    streams_list =
        settings.model.device.is_cuda() ? "1000,2000,5000,10000,20000,40000,60000,80000" : "2,4,8";
  }
  const std::string cohort_rows =
      settings.engine.max_cohort_rows > 0
          ? std::to_string(settings.engine.max_cohort_rows)
          : "min(slots, " + std::to_string(EngineConfig::kDefaultCohortRows) + ")";
  std::string graphs = settings.model.device.is_cuda() && !no_graphs ? "on" : "off";
  if (graphs == "on") {
    graphs += settings.engine.fill_widths_from > 0
                  ? " (cohorts from " + std::to_string(settings.engine.fill_widths_from) +
                        " rows fill a width)"
                  : " (cohorts padded)";
  }
  std::printf(
      "oasr-bench-gpu: %s on %s, %s%s, front end %s, %d front-end threads, %d decode threads, "
      "graphs %s, %s decode%s, ticks %s, PCM %s, cohorts of up to %s rows, %d drivers; %.0f s "
      "of sample audio "
      "cycled; streams of %.0f-%.0f s, 640 ms pieces; measured %.0f s after %.0f s; goal p99 <= "
      "%.3f s\n",
      model_dir.c_str(), settings.model.device.ToString().c_str(), search.c_str(),
      search == "beam" ? (no_lm ? " (no LM)" : " (LMs on)") : "", front_end.c_str(),
      frontend_threads, decode_threads, graphs.c_str(), dense ? "dense" : "pruned",
      no_decode_thread ? " on the scheduler thread" : "",
      !settings.model.device.is_cuda() || no_overlap ? "one at a time" : "overlapped",
      no_pcm_rings ? "staged" : "in rings", cohort_rows.c_str(), settings.drivers,
      audio.size() / double{kRate}, settings.seconds / 2, settings.seconds, settings.run,
      settings.warm, settings.p99);
  std::fflush(stdout);
  int held = 0;
  for (absl::string_view part : absl::StrSplit(streams_list, ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 1) continue;
    if (!RealTime(settings, audio, n)) break;
    held = n;
  }
  std::printf("streams held in real time (p99 <= %.3f s, no errors): %d\n", settings.p99, held);
  if (offline_streams > 0) Offline(settings, audio, offline_streams, offline_seconds);
  return 0;
}

}  // namespace
}  // namespace oasr::scheduler

int main(int argc, char** argv) { return oasr::scheduler::Main(argc, argv); }
