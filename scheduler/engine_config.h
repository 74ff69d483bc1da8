// How the serving engine is sized and what each stream may do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "decoder/ctc_decoder.h"

namespace oasr::scheduler {

struct EngineConfig {
  static constexpr int kMaxFrontendThreads = 256;
  // The most slots an engine has (the K/V pool's block ids, the slot indices
  // the kernels read and the PCM rings are sized for it).
  static constexpr int kMaxSlots = 131072;
  // The widest cohort forward (rows of every activation and of the graph
  // ladder), and what max_cohort_rows = 0 takes when there are more slots.
  static constexpr int kMaxCohortRows = 65536;
  static constexpr int kDefaultCohortRows = 16384;
  // The most streams that may wait for a slot (max_waiting).
  static constexpr int kMaxWaiting = 4000000;

  // Streams admitted at once: each holds a cache slot (device memory for its
  // K/V window and conv state). Streams beyond it wait.
  int max_batch_size = 64;
  // The most rows one cohort forward runs; the workspace, the cohort's
  // staging, log-probs and candidates and the widest CUDA graph are sized
  // for it, not for the slots. Ready streams beyond it run in the next tick,
  // first. 0: max_batch_size, at most kDefaultCohortRows.
  int max_cohort_rows = 0;
  // Streams allowed to wait for a slot, at most kMaxWaiting; beyond it
  // OpenStream is refused (RESOURCE_EXHAUSTED).
  int max_waiting = 256;
  // A waiting stream is admitted ahead of the others once it has waited
  // this long, oldest first; until then admission prefers streams with a
  // chunk to run (in the order they got it), so a cohort fills with streams
  // that can run now. Each admission is O(1) whatever the queue's length.
  double max_wait_ms = 100.0;
  // K/V pool blocks; 0 derives it from memory (CUDA: free device memory;
  // CPU: cpu_pool_bytes), capped at max_batch_size x max_blocks_per_seq.
  int64_t max_num_blocks = 0;
  // The CPU pool's byte budget when max_num_blocks is 0.
  size_t cpu_pool_bytes = size_t{1} << 30;
  // Block-table width per stream; bounds a stream's history with unlimited
  // left context (max_stream_frames).
  int max_blocks_per_seq = 512;
  // Overrides the model's left chunks (-2 keeps the model's; -1 unlimited).
  int num_left_chunks = -2;
  // Audio a stream may have sent but not yet had decoded, in seconds; a
  // client sending faster than the engine decodes gets RESOURCE_EXHAUSTED
  // beyond it.
  double max_buffered_audio_s = 60.0;
  // Threads that run the streams' front ends (resampling, fbank, CMVN); 0
  // runs them inline on the scheduler thread. With threads, a stream's audio
  // is still processed in order, by one worker at a time, and the scheduler
  // never waits for it: a stream is ready once a full chunk's features have
  // been published.
  int frontend_threads = 0;
  // Where the streams' fbank and CMVN run. kHost: each stream's front end
  // (FeaturePipeline, inline or on frontend_threads). kDevice: inside the
  // cohort forward on the model's device, from each row's 16 kHz PCM window
  // (the streams' front ends only resample; the model must have a device
  // front end); on the CPU that is the scheduler thread, so it is there to
  // test the path. kAuto: kDevice on CUDA when the model can, else kHost.
  enum class FrontEnd { kAuto, kHost, kDevice };
  FrontEnd front_end = FrontEnd::kAuto;
  // The CTC decoder (search, frame shift, default stream options).
  decoder::CtcDecoderConfig decoder;
  // Attention rescoring of every final result, for a model with an attention
  // decoder and the prefix beam search (a request may turn it off): the
  // beam's n-best is rescored over the segment's encoder output, which the
  // engine keeps on its device in a paged pool (scheduler/segment_memory.h):
  // up to rescoring_max_segment_s of a segment (a longer one's final keeps
  // the CTC order), in a pool of rescoring_memory_mib MiB shared by every
  // slot (0: every slot its whole window; a segment that finds the pool
  // empty is not rescored either, and counted).
  bool attention_rescoring = true;
  double rescoring_max_segment_s = 30.0;
  double rescoring_memory_mib = 0.0;
  // CUDA only (ignored on the CPU): the cohort forward is captured as a CUDA
  // graph once per width of a ladder (GraphLadder: 1, 2, 4, ... 64, then
  // steps of ~1.25x, and max_batch_size itself) at start-up and replayed
  // every tick, a cohort padded to the next width with the padding lane
  // (rows whose K/V and state writes land where no stream reads). Off: every op is launched
  // each tick at the cohort's own size.
  bool cuda_graphs = true;
  // With CUDA graphs, a cohort of at least fill_widths_from rows is cut to
  // the widest captured width it fills instead of padded to the next one:
  // the rows left over (under a fifth of it) stay queued and go first next
  // tick, so a loaded device computes no padding rows and a stream waits at
  // most one tick more. Narrower cohorts are padded; 0 pads every cohort.
  // On an H100 it took 80,000 greedy streams from p99 150 ms to <= 100 ms
  // (bench/results/gpu-scale.md, session 44).
  int fill_widths_from = 256;
  // The decoder reads each frame's candidates -- its k best units and the
  // blank's log-prob, k being what the search expands (1 greedy,
  // first_beam_size beam) -- selected on the model's device right after the
  // forward, instead of whole rows of log-probs: on CUDA only (2k + 1) x 4
  // bytes per frame cross to the host. Exact (the full rows' results). Off,
  // or with k above 64, the whole log-probs are copied.
  bool pruned_decode = true;
  // CUDA with pruned_decode and no attention rescoring (ignored otherwise):
  // two ticks overlap. A tick enqueues its cohort (staging copy, forward,
  // candidates' copy to the host) and then decodes the previous tick's
  // cohort while the device computes, waiting on that cohort's event alone;
  // a stream has at most one chunk in flight. Off: each tick waits for its
  // own forward and decodes it.
  bool overlap_ticks = true;
  // overlap_ticks on the CPU too (else ignored there): the same tick as on
  // CUDA, its decode thread included. The CPU's forward runs synchronously,
  // so what overlaps is one cohort's decode with the next tick's commands,
  // pick and forward; it is there to run and measure the serving tick of a
  // GPU on machines without one (tests, oasr-bench-scheduler --live).
  bool overlap_on_cpu = false;
  // With overlap_ticks: the decode (search and results) runs on a thread of
  // its own with its own pool of the model's cpu_threads, so the scheduler
  // thread commands, picks and launches the next cohort meanwhile; a
  // cohort's events go out one tick later. Off: the scheduler thread decodes
  // (over the model's host threads) and waits.
  bool decode_thread = true;
  // With the device front end and front-end threads: each stream's PCM goes
  // straight into its slot's ring, which the forward reads (page-locked
  // host memory on CUDA, ~42 KB a slot for the bundled model), instead of
  // being copied into the staging by the scheduler thread every tick.
  bool pcm_rings = true;

  // INVALID_ARGUMENT naming the field, its value and the limit.
  absl::Status Validate() const;
};

// "auto", "host" or "device" (the --front-end flag of the tools) as an
// EngineConfig::FrontEnd; INVALID_ARGUMENT naming the value otherwise.
absl::StatusOr<EngineConfig::FrontEnd> ParseFrontEnd(std::string_view name);

// What one stream asks for.
struct StreamRequest {
  int sample_rate = 16000;        // Input rate in Hz, [8000, 48000].
  bool interim_results = true;    // Emit partial results after each chunk.
  decoder::StreamOptions decode;  // n-best, single utterance, endpointing, phrases.
  // Rescore this stream's finals when the engine rescores (EngineConfig).
  bool attention_rescoring = true;
};

}  // namespace oasr::scheduler
