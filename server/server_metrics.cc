#include "server/server_metrics.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/device.h"
#include "common/version.h"
#include "server/grpc_status.h"

namespace oasr::server {
namespace {

void Header(std::string* out, const char* name, const char* type, const char* help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void Sample(std::string* out, const char* name, int64_t value) {
  absl::StrAppend(out, name, " ", value, "\n");
}

std::string FormatBound(double bound) {
  if (std::isinf(bound)) return "+Inf";
  return absl::StrCat(bound);
}

void RenderHistogram(std::string* out, const char* name, const char* help,
                     const scheduler::Histogram& histogram) {
  Header(out, name, "histogram", help);
  const scheduler::Histogram::Snapshot snap = histogram.Read();
  for (size_t i = 0; i < snap.upper_bounds.size(); ++i) {
    absl::StrAppend(out, name, "_bucket{le=\"", FormatBound(snap.upper_bounds[i]), "\"} ",
                    snap.cumulative[i], "\n");
  }
  absl::StrAppend(out, name, "_bucket{le=\"+Inf\"} ", snap.count, "\n");
  absl::StrAppend(out, name, "_sum ", snap.sum, "\n");
  absl::StrAppend(out, name, "_count ", snap.count, "\n");
}

void RenderEngine(std::string* out, const scheduler::EngineStats& e) {
  Header(out, "oasr_streams_active", "gauge", "Streams holding a decoding slot.");
  Sample(out, "oasr_streams_active", e.streams_active.load());
  Header(out, "oasr_streams_waiting", "gauge", "Streams opened and waiting for a slot.");
  Sample(out, "oasr_streams_waiting", e.streams_waiting.load());
  Header(out, "oasr_streams_refused_total", "counter",
         "Streams refused at the stream limit (RESOURCE_EXHAUSTED).");
  Sample(out, "oasr_streams_refused_total", e.streams_refused.load());
  Header(out, "oasr_streams_finished_total", "counter", "Streams ended, by finish_reason.");
  for (int r = 0; r < static_cast<int>(e.finished.size()); ++r) {
    absl::StrAppend(out, "oasr_streams_finished_total{finish_reason=\"",
                    scheduler::FinishReasonName(static_cast<scheduler::FinishReason>(r)), "\"} ",
                    e.finished[r].load(), "\n");
  }
  Header(out, "oasr_kv_pool_blocks_used", "gauge", "K/V cache pool blocks in use.");
  Sample(out, "oasr_kv_pool_blocks_used", e.pool_blocks_used.load());
  Header(out, "oasr_kv_pool_blocks_total", "gauge", "K/V cache pool blocks.");
  Sample(out, "oasr_kv_pool_blocks_total", e.pool_blocks_total.load());
  Header(out, "oasr_rescoring_pool_blocks_used", "gauge",
         "Attention rescoring's segment memory blocks in use (one chunk's encoder output each).");
  Sample(out, "oasr_rescoring_pool_blocks_used", e.rescoring_blocks_used.load());
  Header(out, "oasr_rescoring_pool_blocks_total", "gauge",
         "Attention rescoring's segment memory blocks (0 without rescoring).");
  Sample(out, "oasr_rescoring_pool_blocks_total", e.rescoring_blocks_total.load());
  Header(out, "oasr_stream_slots_used", "gauge",
         "Per-stream state slots held by streams (0 when no stream is open).");
  Sample(out, "oasr_stream_slots_used", e.slots_used.load());
  Header(out, "oasr_stream_slots_total", "gauge", "Per-stream state slots.");
  Sample(out, "oasr_stream_slots_total", e.slots_total.load());
  Header(out, "oasr_decoder_states_in_use", "gauge",
         "Pooled decoder states held by streams (0 when no stream is open).");
  Sample(out, "oasr_decoder_states_in_use", e.decoder_states_in_use.load());
  Header(out, "oasr_kv_pool_bytes", "gauge",
         "Bytes of the K/V cache pool on the device the engine computes on (see oasr_build_info).");
  Sample(out, "oasr_kv_pool_bytes", e.pool_bytes.load());
  Header(out, "oasr_audio_seconds_processed_total", "counter", "Audio decoded, all streams.");
  absl::StrAppend(out, "oasr_audio_seconds_processed_total ", e.audio_ms_processed.load() / 1000.0,
                  "\n");
  Header(out, "oasr_chunks_processed_total", "counter", "Chunks decoded, all streams.");
  Sample(out, "oasr_chunks_processed_total", e.chunks_processed.load());
  Header(out, "oasr_segments_rescored_total", "counter",
         "Final results ordered by attention rescoring.");
  Sample(out, "oasr_segments_rescored_total", e.segments_rescored.load());
  Header(out, "oasr_segments_not_rescored_total", "counter",
         "Final results of rescoring streams left in CTC order (a segment longer than the "
         "rescoring window, or a rescoring error).");
  Sample(out, "oasr_segments_not_rescored_total", e.segments_not_rescored.load());
  Header(out, "oasr_cohort_graph_launches_total", "counter",
         "Cohort forwards replayed as a CUDA graph.");
  Sample(out, "oasr_cohort_graph_launches_total", e.graph_launches.load());
  Header(out, "oasr_cohort_padded_rows_total", "counter",
         "Padding-lane rows computed to reach a captured graph width.");
  Sample(out, "oasr_cohort_padded_rows_total", e.padded_rows.load());
  Header(out, "oasr_rescoring_seconds_total", "counter",
         "Scheduler time spent rescoring final results with the attention decoder.");
  absl::StrAppend(out, "oasr_rescoring_seconds_total ", e.rescoring_ns.load() / 1e9, "\n");
  // The scheduler thread's time by part (the serving path's profile: a
  // part near 1 s per s is the thread's limit), and the front-end workers'.
  Header(out, "oasr_engine_ticks_total", "counter", "Scheduler ticks (one cohort each at most).");
  Sample(out, "oasr_engine_ticks_total", e.ticks.load());
  Header(out, "oasr_engine_seconds_total", "counter",
         "Scheduler thread time by part: tick (all of it), and within it frontend (staging), "
         "model (enqueueing the forward), decode (outside tick on a decode thread, then "
         "decode_wait is the scheduler's wait for it), device_wait, commands, emit; "
         "frontend_workers is the front-end workers' summed time.");
  const std::pair<const char*, int64_t> parts[] = {{"tick", e.tick_ns.load()},
                                                   {"frontend", e.frontend_ns.load()},
                                                   {"model", e.model_ns.load()},
                                                   {"decode", e.decode_ns.load()},
                                                   {"decode_wait", e.decode_wait_ns.load()},
                                                   {"device_wait", e.device_wait_ns.load()},
                                                   {"commands", e.commands_ns.load()},
                                                   {"emit", e.emit_ns.load()},
                                                   {"frontend_workers", e.frontend_pool_ns.load()}};
  for (const auto& [part, ns] : parts) {
    absl::StrAppend(out, "oasr_engine_seconds_total{part=\"", part, "\"} ", ns / 1e9, "\n");
  }
  RenderHistogram(out, "oasr_chunk_latency_seconds",
                  "From the audio that completed a chunk arriving to its result.",
                  e.chunk_latency_s);
  RenderHistogram(out, "oasr_queue_time_seconds", "From a stream's open to its admission.",
                  e.queue_time_s);
  RenderHistogram(out, "oasr_batch_size", "Streams per cohort forward.", e.batch_size);
}

}  // namespace

std::string EscapeLabel(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

std::string RenderPrometheus(const MetricsSnapshotInput& input) {
  std::string out;
  Header(&out, "oasr_build_info", "gauge", "Build of the running server (always 1).");
  absl::StrAppend(&out, "oasr_build_info{version=\"", EscapeLabel(kVersion), "\",git_revision=\"",
                  EscapeLabel(kGitRevision), "\",cuda=\"", BuiltWithCuda() ? "on" : "off",
                  "\",device=\"", EscapeLabel(input.device), "\"} 1\n");
  Header(&out, "oasr_serving", "gauge", "1 while the health service reports SERVING.");
  Sample(&out, "oasr_serving", input.serving ? 1 : 0);
  Header(&out, "oasr_model_info", "gauge", "The served model (always 1; absent without one).");
  if (input.engine != nullptr) {
    absl::StrAppend(&out, "oasr_model_info{model=\"", EscapeLabel(input.model_name),
                    "\",model_dir=\"", EscapeLabel(input.model_dir), "\"} 1\n");
    Header(&out, "oasr_model_load_seconds", "gauge", "Seconds the model took to load.");
    absl::StrAppend(&out, "oasr_model_load_seconds ", input.model_load_seconds, "\n");
  }

  const ServerMetrics& s = *input.server;
  Header(&out, "oasr_grpc_streams_open", "gauge", "StreamingRecognize calls in progress.");
  Sample(&out, "oasr_grpc_streams_open", s.streaming_calls_active.load());
  Header(&out, "oasr_grpc_recognize_open", "gauge", "Recognize calls in progress.");
  Sample(&out, "oasr_grpc_recognize_open", s.recognize_calls_active.load());
  Header(&out, "oasr_grpc_calls_total", "counter", "Recognition calls started, by method.");
  absl::StrAppend(
      &out, "oasr_grpc_calls_total{method=\"StreamingRecognize\"} ", s.streaming_calls_total.load(),
      "\n", "oasr_grpc_calls_total{method=\"Recognize\"} ", s.recognize_calls_total.load(), "\n");
  Header(&out, "oasr_grpc_stream_idle_timeouts_total", "counter",
         "Streams ended because their client sent nothing for --stream-idle-timeout seconds.");
  Sample(&out, "oasr_grpc_stream_idle_timeouts_total", s.streams_idle_timed_out.load());
  Header(&out, "oasr_grpc_stream_max_duration_total", "counter",
         "Streams ended with finish_reason \"length\" at --max-stream-duration.");
  Sample(&out, "oasr_grpc_stream_max_duration_total", s.streams_max_duration.load());
  Header(&out, "oasr_grpc_stage_seconds_total", "counter",
         "Time of the streaming calls' messages by stage: read_wait (read started to "
         "delivered), reaction (delivered to the next read), write_wait (response write started "
         "to done), dispatch_wait (engine events posted to handled), dispatch_run.");
  for (size_t i = 0; i < s.stages.size(); ++i) {
    absl::StrAppend(&out, "oasr_grpc_stage_seconds_total{stage=\"",
                    StageName(static_cast<Stage>(i)), "\"} ",
                    static_cast<double>(s.stages[i].ns.load()) * 1e-9, "\n");
  }
  Header(&out, "oasr_grpc_stage_total", "counter",
         "Messages, responses and dispatcher runs counted in oasr_grpc_stage_seconds_total.");
  for (size_t i = 0; i < s.stages.size(); ++i) {
    absl::StrAppend(&out, "oasr_grpc_stage_total{stage=\"", StageName(static_cast<Stage>(i)),
                    "\"} ", s.stages[i].count.load(), "\n");
  }
  RenderHistogram(&out, "oasr_grpc_response_delivery_seconds",
                  "From the engine's result to the write of its response done (the dispatcher, "
                  "responses queued behind a write in flight, the transport).",
                  s.response_delivery_s);
  Header(&out, "oasr_grpc_interim_results_coalesced_total", "counter",
         "Interim responses replaced by a newer one before a slow client read them.");
  Sample(&out, "oasr_grpc_interim_results_coalesced_total", s.interim_results_coalesced.load());
  Header(&out, "oasr_refusals_total", "counter",
         "Calls refused before they started (tokens, quotas, limits), by reason.");
  for (size_t r = 0; r < s.refusals.size(); ++r) {
    absl::StrAppend(&out, "oasr_refusals_total{reason=\"", RefusalName(static_cast<Refusal>(r)),
                    "\"} ", s.refusals[r].load(), "\n");
  }
  Header(&out, "oasr_errors_total", "counter", "Recognition calls that failed, by gRPC code.");
  for (size_t code = 1; code < s.errors.size(); ++code) {
    absl::StrAppend(&out, "oasr_errors_total{code=\"", GrpcCodeName(static_cast<int>(code)), "\"} ",
                    s.errors[code].load(), "\n");
  }
  if (input.engine != nullptr) RenderEngine(&out, *input.engine);
  return out;
}

}  // namespace oasr::server
