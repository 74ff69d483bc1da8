// oasr-transcribe: WAV files through the streaming engine, as a server would
// run them, without the server. Every file becomes one engine stream (all
// opened at once, so the engine batches them); each prints
// "file<TAB>transcript" in argument order. With --npy DIR each file's CTC
// log-probs (float32 [frames, vocab]) are also written as DIR/<stem>.npy,
// computed through the encoder's dense streaming path (ForwardChunk chunk by
// chunk, the same windows and history as the engine), for comparison with
// other implementations.
//
// Exit status: 0 when every file was transcribed, 1 when any failed (its
// error goes to stderr), 2 for bad arguments or a model that does not load.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "encoder/conformer_encoder.h"
#include "encoder/npy_io.h"
#include "scheduler/conformer_streaming_model.h"
#include "scheduler/engine.h"
#include "scheduler/model_factory.h"
#include "scheduler/search_flags.h"
#include "scheduler/wav_file.h"

namespace oasr::scheduler {
namespace {

// The transcript of every final segment, joined by spaces.
absl::StatusOr<std::string> Collect(EngineStream& stream) {
  std::string text;
  StreamEvent event;
  while (true) {
    if (!stream.outbox().WaitPop(&event, 3600.0)) {
      return absl::DeadlineExceededError("no result within an hour");
    }
    for (const decoder::DecodeResult& r : event.results) {
      if (!r.is_final || r.nbest.empty() || r.nbest[0].transcript.empty()) continue;
      if (!text.empty()) text += ' ';
      text += r.nbest[0].transcript;
    }
    if (!event.finish.has_value()) continue;
    if (*event.finish == FinishReason::kError) return event.error;
    if (*event.finish == FinishReason::kCancelled || *event.finish == FinishReason::kLength) {
      return absl::AbortedError(absl::StrCat(
          "stream ended early (", FinishReasonName(*event.finish), "); transcript so far: ", text));
    }
    return text;
  }
}

// The file's CTC log-probs [frames, vocab] through the dense streaming path:
// the engine's windows (chunk_size frames, stride chunk_size * subsampling)
// and history (chunk_size * left frames; left < 0 keeps all).
absl::Status WriteLogProbs(const ConformerStreamingModel& model, const WavFile& wav, int left,
                           const std::string& path) {
  encoder::ConformerEncoder& encoder = model.encoder();
  const ModelGeometry& g = model.geometry();
  const encoder::ModelConfig& c = model.model().config();
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<encoder::FeatureSource> frontend,
                        model.CreateFrontEnd(wav.sample_rate));
  OASR_RETURN_IF_ERROR(
      frontend->AcceptPcm16(wav.samples.data(), static_cast<int64_t>(wav.samples.size())));
  OASR_RETURN_IF_ERROR(frontend->InputFinished());
  OASR_ASSIGN_OR_RETURN(
      Tensor att,
      Tensor::Zeros({c.num_blocks, c.attention_heads, 0, 2 * c.head_dim()}, DType::kFloat32));
  OASR_ASSIGN_OR_RETURN(Tensor cnn, Tensor::Zeros(encoder.ConvStateShape(), DType::kFloat32));
  const int required = left < 0 ? -1 : g.chunk_size * left;
  std::vector<float> log_probs;
  int64_t offset = 0;
  const int64_t ready = frontend->NumFramesReady();
  for (int64_t start = 0;; start += g.StrideFrames()) {
    const int64_t frames = std::min<int64_t>(g.WindowFrames(g.chunk_size), ready - start);
    if (frames <= g.right_context) break;
    OASR_ASSIGN_OR_RETURN(Tensor feats, Tensor::Empty({frames, g.feature_dim}, DType::kFloat32));
    OASR_RETURN_IF_ERROR(frontend->GetFrames(start, frames, feats.data<float>()));
    encoder::DenseChunkInput in;
    in.feats = feats.view();
    in.offset = offset;
    in.att_cache = att.view();
    in.cnn_cache = cnn.view();
    OASR_ASSIGN_OR_RETURN(encoder::DenseChunkOutput out, encoder.ForwardChunk(in, required));
    log_probs.insert(log_probs.end(), out.log_probs.data<float>(),
                     out.log_probs.data<float>() + out.log_probs.numel());
    offset += out.log_probs.dim(0);
    att = std::move(out.att_cache);
    cnn = std::move(out.cnn_cache);
  }
  const TensorView view(log_probs.data(), DType::kFloat32, Shape{offset, g.vocab_size},
                        Device::Cpu());
  return encoder::WriteNpyFloat32(path, view);
}

int Main(int argc, char** argv) {
  CLI::App app{"oasr-transcribe: WAV files through the streaming engine"};
  std::string model_dir, npy_dir, log_level = "warn";
  std::vector<std::string> files;
  int left = -2, beam = 10, threads = 1, max_batch = 16;
  float blank_skip = 0.0f, token_beam = 0.0f;
  bool greedy = false, no_lm = false, no_rescoring = false, no_graphs = false;
  float lm_weight = -1.0f;  // Negative: lm.json's.
  std::optional<float> lm_token_bonus, word_lm_weight, word_bonus, unknown_word_penalty;
  std::optional<float> min_word_confidence;
  std::string word_lm_path, device = "auto", dtype, front_end = "auto";
  app.add_option("--model-dir", model_dir, "Model directory (docs/model-format.md)")->required();
  app.add_option("--front-end", front_end,
                 "Where fbank and CMVN run: auto (on the GPU when on one), host or device")
      ->check(CLI::IsMember({"auto", "host", "device"}))
      ->capture_default_str();
  app.add_option("files", files, "WAV files (16-bit PCM or 32-bit float, any rate)")->required();
  app.add_option("--num-left-chunks", left,
                 "Chunks of attention history kept (-1 all; default: the model's)");
  app.add_flag("--greedy", greedy, "Greedy CTC search instead of prefix beam search");
  app.add_option("--beam", beam, "Prefix beam size")->check(CLI::Range(1, 1024));
  AddBeamPruningFlags(app, &blank_skip, &token_beam);
  app.add_flag("--no-lm", no_lm, "Beam search without the model directory's language models");
  app.add_flag("--no-rescoring", no_rescoring,
               "Keep the CTC order (no attention rescoring with the model's decoder.json)");
  app.add_flag("--no-cuda-graphs", no_graphs,
               "On CUDA, launch every op each chunk instead of replaying captured CUDA graphs");
  app.add_option("--lm-weight", lm_weight,
                 "Unit language model weight (negative: the one in the model's lm.json)");
  app.add_option("--lm-token-bonus", lm_token_bonus,
                 "Score added per token with the unit language model (default: lm.json's)");
  app.add_option("--word-lm", word_lm_path,
                 "Word ARPA file to fuse (default: the one lm.json names, if any)");
  app.add_option("--word-lm-weight", word_lm_weight,
                 "Word language model weight (default: lm.json's)");
  app.add_option("--word-bonus", word_bonus, "Score added per word (default: lm.json's)");
  app.add_option("--unknown-word-penalty", unknown_word_penalty,
                 "Score taken per word outside the lexicon (default: lm.json's)");
  app.add_option("--min-word-confidence", min_word_confidence,
                 "Words below this confidence are left out (default: the model's "
                 "config.json serving.min_word_confidence, else 0: none)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--npy", npy_dir, "Write each file's CTC log-probs to DIR/<stem>.npy");
  app.add_option("--threads", threads, "Encoder threads")->check(CLI::Range(1, 256));
  app.add_option("--device", device, "auto (the GPU when one is usable), cpu, cuda or cuda:N")
      ->capture_default_str();
  app.add_option("--dtype", dtype, "float32, bfloat16 or float16 (default: the device's)");
  app.add_option("--max-batch", max_batch, "Streams decoded at once")->check(CLI::Range(1, 4096));
  app.add_option("--log-level", log_level, "stderr log level");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints and succeeds; anything else is a usage error (2).
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (absl::Status s = InitLogging(log_level); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }

  ModelOptions options;
  options.model_dir = model_dir;
  options.cpu_threads = threads;
  if (absl::Status s = SetComputeFlags(device, dtype, &options); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  options.decoder.method =
      greedy ? decoder::SearchMethod::kGreedy : decoder::SearchMethod::kPrefixBeam;
  options.decoder.search.beam_size = beam;
  options.decoder.search.first_beam_size = beam;
  options.decoder.search.blank_skip_threshold = blank_skip;
  options.decoder.search.token_beam = token_beam;
  options.decoder.stream.nbest = 1;
  options.use_lm = !no_lm;
  options.lm_weight = lm_weight;
  options.lm_token_bonus = lm_token_bonus;
  options.min_word_confidence = min_word_confidence;
  options.word_lm_path = word_lm_path;
  options.word_lm_weight = word_lm_weight;
  options.word_bonus = word_bonus;
  options.unknown_word_penalty = unknown_word_penalty;
  EngineConfig config;
  config.max_batch_size = max_batch;
  config.max_waiting = static_cast<int>(files.size());
  config.num_left_chunks = left;
  config.attention_rescoring = !no_rescoring;
  config.cuda_graphs = !no_graphs;
  config.front_end = *ParseFrontEnd(front_end);  // Checked by the flag.
  config.max_buffered_audio_s = 86400.0;         // Whole files are queued at once.
  absl::StatusOr<std::unique_ptr<Engine>> engine = LoadEngine(options, config);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 2;
  }
  config.decoder = (*engine)->config().decoder;
  const int effective_left = (*engine)->cache_config().num_left_chunks;

  // Open every stream and queue all its audio, then read the results in order.
  std::vector<absl::StatusOr<WavFile>> wavs;
  std::vector<absl::StatusOr<std::unique_ptr<EngineStream>>> streams;
  for (const std::string& file : files) {
    wavs.push_back(ReadWav(file));
    if (!wavs.back().ok()) {
      streams.push_back(wavs.back().status());
      continue;
    }
    StreamRequest request;
    request.sample_rate = wavs.back()->sample_rate;
    request.interim_results = false;
    request.decode = config.decoder.stream;
    streams.push_back((*engine)->OpenStream(request));
    if (!streams.back().ok()) continue;
    EngineStream& stream = **streams.back();
    absl::Status pushed = stream.PushAudio(wavs.back()->samples);
    if (pushed.ok()) pushed = stream.EndAudio();
    if (!pushed.ok()) streams.back() = pushed;
  }

  std::vector<absl::StatusOr<std::string>> texts;
  for (size_t i = 0; i < files.size(); ++i) {
    texts.push_back(streams[i].ok() ? Collect(**streams[i])
                                    : absl::StatusOr<std::string>(streams[i].status()));
  }
  if (!npy_dir.empty()) {
    // The dense path runs on the model's context once the engine no longer
    // drives it.
    (*engine)->Stop();
    std::error_code ec;
    std::filesystem::create_directories(npy_dir, ec);
    const auto* model = dynamic_cast<const ConformerStreamingModel*>(&(*engine)->model());
    for (size_t i = 0; i < files.size() && model != nullptr; ++i) {
      if (!texts[i].ok()) continue;
      const std::string path =
          (std::filesystem::path(npy_dir) / std::filesystem::path(files[i]).stem()).string() +
          ".npy";
      if (absl::Status s = WriteLogProbs(*model, *wavs[i], effective_left, path); !s.ok()) {
        texts[i] = s;
      }
    }
  }
  int failed = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!texts[i].ok()) {
      std::fprintf(stderr, "%s: %s\n", files[i].c_str(), texts[i].status().ToString().c_str());
      ++failed;
      continue;
    }
    std::printf("%s\t%s\n", files[i].c_str(), texts[i]->c_str());
    std::fflush(stdout);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace oasr::scheduler

int main(int argc, char** argv) { return oasr::scheduler::Main(argc, argv); }
