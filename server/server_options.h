// Everything oasr-server is configured with, from flags or a config file.
#pragma once

#include <algorithm>
#include <string>
#include <thread>

#include "absl/status/status.h"

namespace oasr::server {

struct ServerOptions {
  // Address the gRPC server binds, without the port ("0.0.0.0", "127.0.0.1", "[::]").
  std::string address = "0.0.0.0";
  // gRPC port; 0 picks a free port (reported in the log and in port_file).
  int port = 50051;
  // Prometheus /metrics HTTP port; 0 picks a free port, -1 disables the
  // endpoint.
  int metrics_port = 8080;
  // Address the metrics endpoint binds; empty: `address` (e.g. "127.0.0.1"
  // keeps /metrics off the network while gRPC listens on every interface).
  std::string metrics_address;
  // Model directory to serve; empty serves no model.
  std::string model_dir;
  // Inference device: "auto" (cuda:0 when a GPU is usable, else cpu), "cpu", "cuda:N".
  std::string device = "auto";
  // Compute dtype: "float32", "bfloat16" or "float16"; empty: the device's
  // (float32 on the CPU, bfloat16 on CUDA).
  std::string dtype;
  // The K/V pool's dtype: "auto" (the compute dtype) or "float8_e4m3" ("fp8"):
  // half the pool's memory a stream (the CPU, and CUDA in 16 bits).
  std::string kv_dtype = "auto";
  // trace, debug, info, warn, error, critical, off.
  std::string log_level = "info";
  // When set, the bound ports are written there as JSON once the server
  // serves: {"grpc_port": N, "metrics_port": M}. For tests and supervisors.
  std::string port_file;
  // Seconds in-flight calls get to finish after SIGTERM/SIGINT; streams
  // still open then end with finish_reason "cancelled" and UNAVAILABLE, and
  // the process exits within about a second more (at most: the cancelled
  // calls' endings). The default stays below `docker stop`'s 10 s, so a
  // plain stop exits 0 rather than being killed.
  double shutdown_grace_seconds = 7.0;

  // Recognition (used when model_dir is set).
  // Name clients pass as RecognitionConfig.model; empty: the directory's name.
  std::string model_name;
  // The served model's language (BCP-47); requests naming another are refused.
  std::string language_code = "en-US";
  // Streams decoded at once (each holds a cache slot; one cohort forward
  // runs at most this many).
  int max_active_streams = 64;
  // Streams that may wait for a slot beyond max_active_streams; more get
  // RESOURCE_EXHAUSTED.
  int max_waiting_streams = 256;
  // Audio a stream may send ahead of decoding, in seconds; a client faster
  // than that gets RESOURCE_EXHAUSTED. Also Recognize's longest file.
  double max_buffered_audio_seconds = 60.0;
  // Encoder threads per cohort forward.
  int num_threads = 1;
  // The CTC search: "beam" (prefix beam search with the language models,
  // phrase boosting and n-best) or "greedy" (the best unit of each frame:
  // one alternative, no language models, no boosting; several times
  // cheaper per frame, for serving the most streams).
  std::string search = "beam";
  // Prefixes the beam search keeps after each frame (and tokens it expands).
  int beam_size = 10;
  // The beam search's pruning (decoder::PrefixBeamSearchOptions; 0: off,
  // the exact search): frames whose P(blank) reaches blank_skip only take
  // the blank; tokens more than token_beam nats below a frame's best are
  // not expanded. --blank-skip 0.999 --token-beam 8 cuts the search's cost
  // per frame ~6x for the bundled model (docs/decoder.md).
  float blank_skip = 0.0f;
  float token_beam = 0.0f;
  // Decode with the model directory's language models (lm.json: unit and word)
  // when it has them; false: the acoustic model alone.
  bool use_lm = true;
  // The unit language model's weight; negative: the one in lm.json.
  double lm_weight = -1.0;
  // Words below this confidence are left out of transcripts (noise makes
  // low-confidence words); negative: the model's config.json
  // serving.min_word_confidence (0 when it has none).
  double min_word_confidence = -1.0;
  // Rescore final results with the model's attention decoder (U2 / U2++
  // models) when it has one; a request may still turn it off. Segments
  // longer than rescoring_max_segment_seconds keep the CTC order. Their
  // encoder output is held in a pool of rescoring_memory_mib MiB on the
  // serving device (0: every stream's whole window).
  bool attention_rescoring = true;
  double rescoring_max_segment_seconds = 30.0;
  double rescoring_memory_mib = 0.0;
  // On CUDA, replay the cohort forward as CUDA graphs captured at start-up
  // (scheduler::EngineConfig::cuda_graphs); false launches every op eagerly.
  bool cuda_graphs = true;
  // Where the fbank and CMVN run: "auto" (on the GPU when serving on one),
  // "host" (the front-end threads) or "device" (scheduler::EngineConfig::
  // front_end).
  std::string front_end = "auto";
  // On CUDA, decode each cohort while the next one computes
  // (scheduler::EngineConfig::overlap_ticks).
  bool overlap_ticks = true;
  // A decode thread beside the scheduler thread (scheduler::EngineConfig::decode_thread).
  bool decode_thread = true;
  // Threads that run the streams' front ends (resampling, fbank) off the
  // scheduler thread; 0 runs them on it. Default: half the hardware
  // threads, at most 4, at least 1.
  int frontend_threads = DefaultFrontendThreads();
  // Completion queues (one polling thread each) the streaming calls run on;
  // 0: CallQueues::DefaultThreads() (five eighths of the hardware threads,
  // 2 to 32).
  int grpc_threads = 0;
  // Threads that turn the engine's events into responses (EventDispatcher);
  // 0: EventDispatcher::DefaultThreads() (a quarter of the hardware threads,
  // 2 to 4).
  int event_threads = 0;
  // Responses a stream may have waiting for a slow reader before the server
  // stops reading its audio.
  int max_pending_responses = 16;
  // A stream whose client sends nothing (no audio, no half-close) for this
  // many seconds is ended with OUT_OF_RANGE and its engine stream freed, so
  // a client that hangs without closing its connection cannot hold a slot
  // forever. Counted only while the server waits for the client's next
  // message (not while flow control has paused reading). 0 disables.
  double stream_idle_timeout_seconds = 30.0;

  // Transport.
  // TLS: the server's PEM certificate chain and private key (both or
  // neither); with them the port speaks only TLS. tls_client_ca (PEM CA
  // bundle, needs the two) asks every client for a certificate that chains
  // to it (mutual TLS) and refuses the handshake without one. SIGHUP reloads
  // the three files for new connections (server/tls_credentials.h).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;

  // Authentication and limits (server/access_control.h). A tokens file
  // makes every recognition and info call need `authorization: Bearer
  // <token>` (health and reflection stay open); SIGHUP reloads it.
  std::string tokens_file;
  // Concurrent recognition calls (StreamingRecognize and Recognize, every
  // API) one token may hold unless its line sets max_streams; 0: no limit.
  int max_streams_per_token = 0;
  // Concurrent recognition calls from one client IP address; 0: no limit.
  int max_streams_per_peer = 0;
  // Seconds of audio a stream may send; the stream then ends cleanly with
  // its transcript so far and finish_reason "length"; 0: no limit.
  double max_stream_duration_seconds = 0.0;
  // Recognition calls the server opens per second (a token bucket of
  // stream_open_burst, default the rate rounded up); above it they get
  // RESOURCE_EXHAUSTED. 0: no limit.
  double stream_open_rate = 0.0;
  double stream_open_burst = 0.0;

  // Largest request message in bytes (gRPC answers RESOURCE_EXHAUSTED above).
  int max_message_bytes = 4 << 20;
  // Ping an idle connection after this many seconds, and drop it when the
  // ping is not answered within keepalive_timeout_seconds.
  int keepalive_time_seconds = 60;
  int keepalive_timeout_seconds = 20;
  // Shortest interval between client pings the server tolerates.
  int min_client_ping_seconds = 10;

  // Rejects out-of-range values with a message naming field, value and limit.
  absl::Status Validate() const;

  static int DefaultFrontendThreads() {
    return std::clamp(static_cast<int>(std::thread::hardware_concurrency()) / 2, 1, 4);
  }
};

}  // namespace oasr::server
