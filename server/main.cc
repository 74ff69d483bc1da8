// oasr-server: the streaming speech-recognition server.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "CLI/CLI.hpp"
#include "common/logging.h"
#include "common/version.h"
#include "scheduler/model_factory.h"
#include "scheduler/search_flags.h"
#include "server/env_flags.h"
#include "server/server.h"
#include "spdlog/spdlog.h"

namespace {

// SIGTERM/SIGINT/SIGHUP write the signal number here; a thread reads it. A handler
// (rather than blocking the signals and sigwait) works whichever thread the
// kernel picks, including threads that libraries start before main (OpenBLAS).
int g_signal_pipe[2] = {-1, -1};

void OnShutdownSignal(int signal_number) {
  const char byte = static_cast<char>(signal_number);
  const int saved = errno;
  (void)!write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

void InstallShutdownHandlers() {
  if (pipe(g_signal_pipe) != 0) return;
  struct sigaction action = {};
  action.sa_handler = OnShutdownSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGHUP, &action, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  InstallShutdownHandlers();

  oasr::server::ServerOptions options;
  CLI::App app{"oasr-server: streaming speech recognition over gRPC"};
  app.set_version_flag("--version", std::string(oasr::kVersion) + " (" + oasr::kGitRevision + ")");
  app.set_config("--config", "", "Read options from a TOML or INI file (flag names as keys)");
  app.add_option("--address", options.address, "Address to bind")->capture_default_str();
  app.add_option("--port", options.port, "gRPC port (0: pick a free one)")->capture_default_str();
  app.add_option("--metrics-port", options.metrics_port,
                 "Prometheus /metrics HTTP port (0: pick a free one, -1: off)")
      ->capture_default_str();
  app.add_option("--metrics-address", options.metrics_address,
                 "Address the metrics endpoint binds (default: --address)");
  app.add_option("--tls-cert", options.tls_cert,
                 "PEM certificate chain of the server: serve TLS only (with --tls-key)");
  app.add_option("--tls-key", options.tls_key, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", options.tls_client_ca,
                 "PEM CA bundle: require client certificates that chain to it (mutual TLS)");
  app.add_option("--tokens-file", options.tokens_file,
                 "Bearer tokens clients must send (one per line: TOKEN or sha256:HEX, then "
                 "optional name=NAME max_streams=N); SIGHUP reloads it");
  app.add_option("--max-streams-per-token", options.max_streams_per_token,
                 "Concurrent recognition calls per token without its own max_streams (0: no limit)")
      ->capture_default_str();
  app.add_option("--max-streams-per-peer", options.max_streams_per_peer,
                 "Concurrent recognition calls per client IP address (0: no limit)")
      ->capture_default_str();
  app.add_option("--max-stream-duration", options.max_stream_duration_seconds,
                 "Seconds of audio per stream; then it ends with its transcript and finish_reason "
                 "\"length\" (0: no limit)")
      ->capture_default_str();
  app.add_option("--stream-open-rate", options.stream_open_rate,
                 "Recognition calls opened per second, server-wide (0: no limit)")
      ->capture_default_str();
  app.add_option("--stream-open-burst", options.stream_open_burst,
                 "Opens allowed at once above --stream-open-rate (0: the rate rounded up)")
      ->capture_default_str();
  app.add_option("--model-dir", options.model_dir, "Model directory to serve");
  app.add_option("--device", options.device, "Inference device: auto, cpu, cuda, cuda:N")
      ->capture_default_str();
  app.add_option("--dtype", options.dtype,
                 "Compute dtype: float32, bfloat16, float16 (default: float32 on the CPU, "
                 "bfloat16 on CUDA)");
  app.add_option("--kv-dtype", options.kv_dtype, oasr::scheduler::kKvDTypeFlagHelp)
      ->capture_default_str();
  app.add_option("--log-level", options.log_level,
                 "trace, debug, info, warn, error, critical or off")
      ->capture_default_str();
  app.add_option("--port-file", options.port_file,
                 "Write the bound ports there as JSON once serving");
  app.add_option("--shutdown-grace", options.shutdown_grace_seconds,
                 "Seconds in-flight calls get after SIGTERM/SIGINT")
      ->capture_default_str();
  app.add_option("--model-name", options.model_name,
                 "Model name for RecognitionConfig.model (default: the directory's name)");
  app.add_option("--language-code", options.language_code, "The model's language (BCP-47)")
      ->capture_default_str();
  app.add_option("--max-active-streams", options.max_active_streams,
                 "Streams decoded at once (cache slots, largest cohort)")
      ->capture_default_str();
  app.add_option("--max-waiting-streams", options.max_waiting_streams,
                 "Streams that may wait for a slot; beyond: RESOURCE_EXHAUSTED")
      ->capture_default_str();
  app.add_option("--max-buffered-audio", options.max_buffered_audio_seconds,
                 "Seconds of audio a stream may send ahead of decoding; Recognize's longest file")
      ->capture_default_str();
  app.add_option("--num-threads", options.num_threads, "Encoder threads per cohort forward")
      ->capture_default_str();
  app.add_option("--search", options.search,
                 "CTC search: beam (language models, boosting, n-best) or greedy (one "
                 "alternative, no language models; the cheapest per stream)")
      ->check(CLI::IsMember({"beam", "greedy"}))
      ->capture_default_str();
  app.add_option("--beam-size", options.beam_size, "Prefixes the beam search keeps per frame")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  oasr::scheduler::AddBeamPruningFlags(app, &options.blank_skip, &options.token_beam);
  app.add_flag("!--no-lm", options.use_lm,
               "Decode without the model directory's language models (lm.json: unit and word)");
  app.add_option("--lm-weight", options.lm_weight,
                 "Unit language model weight (negative: the one in the model's lm.json)")
      ->capture_default_str();
  app.add_option("--min-word-confidence", options.min_word_confidence,
                 "Words below this confidence (0-1) are left out of transcripts; noise makes "
                 "such words (negative: the model's config.json serving.min_word_confidence)")
      ->capture_default_str();
  app.add_flag("!--no-rescoring", options.attention_rescoring,
               "Keep the CTC n-best order of finals (no attention rescoring with the model's "
               "attention decoder)");
  app.add_option("--rescoring-max-segment", options.rescoring_max_segment_seconds,
                 "Seconds of a segment attention rescoring holds; longer ones keep the CTC order")
      ->capture_default_str();
  app.add_option("--rescoring-memory-mib", options.rescoring_memory_mib,
                 "MiB of device (or host) memory for the open segments' encoder output that "
                 "attention rescoring reads, shared by every stream; 0 gives every stream its "
                 "whole --rescoring-max-segment window. A segment that finds it full keeps the "
                 "CTC order")
      ->capture_default_str();
  app.add_flag("!--no-cuda-graphs", options.cuda_graphs,
               "On CUDA, launch the cohort forward's ops every tick instead of replaying CUDA "
               "graphs captured at start-up");
  app.add_flag("!--no-overlap-ticks", options.overlap_ticks,
               "On CUDA, let each tick wait for its own forward instead of decoding the previous "
               "cohort while the next one computes");
  app.add_flag("!--no-decode-thread", options.decode_thread,
               "On CUDA with overlapping ticks, decode on the scheduler thread instead of a "
               "decode thread of its own");
  app.add_option("--front-end", options.front_end,
                 "Where fbank and CMVN run: auto (on the GPU when serving on one), host (the "
                 "front-end threads) or device (the model's device, in the batched forward)")
      ->check(CLI::IsMember({"auto", "host", "device"}))
      ->capture_default_str();
  app.add_option("--frontend-threads", options.frontend_threads,
                 "Threads for resampling and fbank off the scheduler thread (0: on it)")
      ->capture_default_str();
  app.add_option("--grpc-threads", options.grpc_threads,
                 "Threads (one completion queue each) that run the streaming calls (0: five "
                 "eighths of the hardware threads, 2 to 32)")
      ->capture_default_str();
  app.add_option("--event-threads", options.event_threads,
                 "Threads that turn the engine's results into responses (0: a quarter of the "
                 "hardware threads, 2 to 4)")
      ->capture_default_str();
  app.add_option("--max-pending-responses", options.max_pending_responses,
                 "Responses waiting for a slow reader before reading pauses")
      ->capture_default_str();
  app.add_option("--stream-idle-timeout", options.stream_idle_timeout_seconds,
                 "Seconds a stream may send nothing before it ends with OUT_OF_RANGE (0: never)")
      ->capture_default_str();
  app.add_option("--max-message-bytes", options.max_message_bytes, "Largest request message")
      ->capture_default_str();
  app.add_option("--keepalive-time", options.keepalive_time_seconds,
                 "Seconds before pinging an idle connection")
      ->capture_default_str();
  app.add_option("--keepalive-timeout", options.keepalive_timeout_seconds,
                 "Seconds to wait for a ping's answer before dropping the connection")
      ->capture_default_str();
  app.add_option("--min-client-ping", options.min_client_ping_seconds,
                 "Shortest interval between client pings tolerated, in seconds")
      ->capture_default_str();
  // Every flag also from OASR_<FLAG> (--max-active-streams: OASR_MAX_ACTIVE_STREAMS).
  oasr::server::ReadOptionsFromEnvironment(&app, "OASR_");
  app.footer(
      "Every option also reads OASR_<NAME> (--model-dir: OASR_MODEL_DIR); the command line wins, "
      "then --config, then the environment.");
  CLI11_PARSE(app, argc, argv);

  if (absl::Status status = oasr::InitLogging(options.log_level); !status.ok()) {
    fprintf(stderr, "oasr-server: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  oasr::server::Server server(options);
  if (absl::Status status = server.Start(); !status.ok()) {
    spdlog::error("cannot start: {}", status.ToString());
    return status.code() == absl::StatusCode::kInvalidArgument ||
                   status.code() == absl::StatusCode::kNotFound
               ? 2
               : 1;
  }

  std::thread signal_waiter([&server] {
    while (true) {
      char signal_number = 0;
      const ssize_t got = read(g_signal_pipe[0], &signal_number, 1);
      if (got < 0 && errno == EINTR) continue;
      if (got == 1 && signal_number == SIGHUP) {
        // Certificates and tokens for new connections and calls; open ones keep theirs.
        spdlog::info("received SIGHUP: reloading");
        if (absl::Status status = server.Reload(); !status.ok()) {
          spdlog::error("reload failed, still serving the previous files: {}", status.ToString());
        }
        continue;
      }
      spdlog::info("received {}", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
      server.Shutdown();
      return;
    }
  });
  server.Wait();
  signal_waiter.join();
  return 0;
}
