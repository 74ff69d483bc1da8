// oasr-bench-decoder: what CTC decoding costs per frame of one stream on one
// core, for a BPE-sized vocabulary (V = 5002) and a small one (V = 30).
//
// Input: decoder/synthetic_log_probs.h, a realistically peaky distribution:
// 60% of frames won by blank, the rest by one token (30% of those repeat the
// previous token, the others drawn Zipf-like from the vocabulary), Gaussian
// noise (sd 1) on every logit, and the winner's margin set so that it holds
// about 90% of the probability mass (the rest spread over all other units),
// then log-softmax. 1500 frames (60 s at a 4x model's 40 ms), fed in chunks of
// 16 frames through CtcDecoder::DecodeChunk (search plus endpointing; partial
// results are not built). "x realtime" is the frame's length over its cost,
// on the clock of --model-dir's model (feature shift x subsampling).
//
// Boosting: 100 phrases of 2-4 tokens, half cut from the greedy transcript of
// the input (so they really match), half random, boost 2.0 per token.
//
// Language models: the units of --model-dir (default: the bundled model,
// V = 258), its unit 5-gram (lm.json, lm.arpa.gz) and then also its word
// model with the lexicon (words.arpa.gz), against beam 10 alone on the same
// input, when the model directory is there. --help lists the flags.
//
// Goal (issue 5): under 50 us per frame per stream at V = 5002, beam 10.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "decoder/ctc_decoder.h"
#include "decoder/greedy_search.h"
#include "decoder/synthetic_log_probs.h"
#include "encoder/fbank.h"
#include "encoder/model_config.h"
#include "encoder/npy_io.h"

namespace oasr::decoder {
namespace {

constexpr int kFrames = 1500;
constexpr int kChunk = 16;
constexpr int kRepeats = 5;

std::shared_ptr<const SymbolTable> Units(int vocab_size) {
  std::vector<std::string> units = {"<blank>", "<unk>"};
  for (int i = 2; i + 1 < vocab_size; ++i) units.push_back("\xe2\x96\x81p" + std::to_string(i));
  units.push_back("<sos/eos>");
  return std::make_shared<const SymbolTable>(*SymbolTable::FromUnits(units));
}

std::shared_ptr<const ContextGraph> Phrases(const std::vector<float>& lp, int vocab_size) {
  GreedySearch greedy(0);
  greedy.Search(lp.data(), kFrames, vocab_size);
  Hypothesis best;
  greedy.GetHypothesis(0, &best);
  std::mt19937 rng(7);
  std::vector<TokenPhrase> phrases;
  for (int i = 0; i < 100; ++i) {
    const int length = 2 + static_cast<int>(rng() % 3);
    TokenPhrase phrase;
    phrase.boost = 2.0f;
    if (i % 2 == 0 && best.tokens.size() > static_cast<size_t>(length)) {
      const size_t start = rng() % (best.tokens.size() - length);
      phrase.tokens.assign(best.tokens.begin() + start, best.tokens.begin() + start + length);
    } else {
      for (int k = 0; k < length; ++k) phrase.tokens.push_back(2 + rng() % (vocab_size - 3));
    }
    phrases.push_back(std::move(phrase));
  }
  return *ContextGraph::Build(phrases, vocab_size);
}

struct Figures {
  double best_us = 1e30;  // per frame, fastest repeat
  double mean_us = 0.0;   // per frame, mean over repeats
  std::string transcript_head;
};

Figures Run(const CtcDecoderConfig& config, const std::shared_ptr<const SymbolTable>& units,
            std::vector<float>& lp, const std::shared_ptr<const ContextGraph>& context) {
  auto decoder = *CtcDecoder::Create(config, units);
  auto state = decoder->CreateState();
  const int v = units->size();
  Figures figures;
  for (int repeat = 0; repeat <= kRepeats; ++repeat) {
    decoder->ResetState(*state);
    StreamOptions options = config.stream;
    options.context = context;
    if (!decoder->ConfigureStream(*state, options).ok()) std::abort();
    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < kFrames; t += kChunk) {
      const int n = std::min(kChunk, kFrames - t);
      TensorView view(lp.data() + static_cast<size_t>(t) * v, DType::kFloat32, Shape{n, v},
                      Device::Cpu());
      if (!decoder->DecodeChunk(*state, view).ok()) std::abort();
    }
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count() /
        kFrames;
    if (repeat == 0) continue;  // warm-up: sizes the state's buffers
    figures.best_us = std::min(figures.best_us, us);
    figures.mean_us += us / kRepeats;
  }
  (void)decoder->FinalizeStream(*state);
  const std::vector<DecodeResult> finals = decoder->TakeFinalResults(*state);
  figures.transcript_head = finals.empty() ? "" : finals[0].nbest[0].transcript.substr(0, 24);
  return figures;
}

std::vector<float> PeakyLogProbs(int v) {
  SyntheticLogProbsOptions gen;
  gen.num_frames = kFrames;
  gen.vocab_size = v;
  // Winner margin for ~90% of the mass: e^peak = 9 (V - 1) E[e^noise].
  gen.peak = std::log(9.0f * (v - 1) * std::exp(0.5f));
  gen.seed = 11;
  return SyntheticLogProbs(gen);
}

// The search over real log-probs: every utterance decoded from its start in
// chunks, through the decoder with endpointing as the server runs it; the
// cost per frame over all of them (fastest of kRepeats passes).
Figures RunUtterances(const CtcDecoderConfig& config,
                      const std::shared_ptr<const SymbolTable>& units,
                      const std::vector<std::vector<float>>& utterances) {
  auto decoder = *CtcDecoder::Create(config, units);
  auto state = decoder->CreateState();
  const int v = units->size();
  int64_t frames = 0;
  for (const auto& lp : utterances) frames += static_cast<int64_t>(lp.size()) / v;
  Figures figures;
  for (int repeat = 0; repeat <= kRepeats; ++repeat) {
    const auto start = std::chrono::steady_clock::now();
    for (const auto& lp : utterances) {
      decoder->ResetState(*state);
      if (!decoder->ConfigureStream(*state, config.stream).ok()) std::abort();
      const int n_frames = static_cast<int>(lp.size()) / v;
      for (int t = 0; t < n_frames; t += kChunk) {
        const int n = std::min(kChunk, n_frames - t);
        TensorView view(const_cast<float*>(lp.data()) + static_cast<size_t>(t) * v, DType::kFloat32,
                        Shape{n, v}, Device::Cpu());
        if (!decoder->DecodeChunk(*state, view).ok()) std::abort();
        (void)decoder->TakeFinalResults(*state);
      }
      (void)decoder->FinalizeStream(*state);
      const std::vector<DecodeResult> finals = decoder->TakeFinalResults(*state);
      if (repeat == 0 && &lp == &utterances.front() && !finals.empty()) {
        figures.transcript_head = finals[0].nbest[0].transcript.substr(0, 24);
      }
    }
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count() /
        static_cast<double>(frames);
    if (repeat == 0) continue;
    figures.best_us = std::min(figures.best_us, us);
    figures.mean_us += us / kRepeats;
  }
  return figures;
}

// One CTC frame of audio, in ms: the model's clock.
double g_frame_ms = 40.0;

void PrintRow(int v, const char* name, const Figures& f) {
  std::printf("%-6d %-28s %12.2f %12.2f %10.0f", v, name, f.best_us, f.mean_us,
              g_frame_ms * 1000.0 / f.best_us);
}

// The frame clock of the model in `dir` (config.json: the front end's shift x
// the subsampling); 40 ms, with a note, when it cannot be read.
double ModelFrameShiftMs(const std::string& dir) {
  std::ifstream in(dir + "/config.json");
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<encoder::ModelConfig> config = encoder::ModelConfig::FromJson(text.str());
  if (!in || !config.ok()) {
    std::printf("(no model clock in %s/config.json: %s; 40 ms frames assumed)\n", dir.c_str(),
                in ? config.status().ToString().c_str() : "unreadable");
    return 40.0;
  }
  return 1000.0 * encoder::Fbank::kFrameShift / encoder::Fbank::kSampleRate *
         config->subsampling_rate();
}

// The language models' rows again over real log-probs (every .npy in
// `npy_dir`, as oasr-transcribe --npy writes them for the model in `dir`),
// with the search's pruning: blank skipping and the token beam.
void RealSpeechRows(const std::string& dir, const std::string& npy_dir) {
  absl::StatusOr<SymbolTable> loaded = SymbolTable::Load(dir + "/units.txt");
  if (!loaded.ok()) return;
  auto units = std::make_shared<const SymbolTable>(std::move(*loaded));
  const int v = units->size();
  std::vector<std::vector<float>> utterances;
  int64_t frames = 0;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(npy_dir)) {
    if (entry.path().extension() == ".npy") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  for (const std::string& file : files) {
    absl::StatusOr<Tensor> t = encoder::ReadNpyFloat32(file);
    if (!t.ok() || t->shape().rank() != 2 || t->shape()[1] != v) {
      std::printf("(skipping %s: not [frames, %d] float32 log-probs)\n", file.c_str(), v);
      continue;
    }
    const float* data = t->data<float>();
    utterances.emplace_back(data, data + t->numel());
    frames += t->shape()[0];
  }
  if (utterances.empty()) {
    std::printf("(no real log-probs in %s)\n", npy_dir.c_str());
    return;
  }
  std::printf("real log-probs: %zu utterances, %lld frames (%s)\n", utterances.size(),
              static_cast<long long>(frames), npy_dir.c_str());
  CtcDecoderConfig config;
  absl::StatusOr<bool> lm = UseModelLanguageModel(dir, *units, &config.search);
  if (!lm.ok() || !*lm) return;
  struct Row {
    const char* name;
    float skip, token_beam;
  };
  for (const Row& row :
       {Row{"beam 10 + LMs", 0.0f, 0.0f}, Row{"beam 10 + LMs, skip 0.999", 0.999f, 0.0f},
        Row{"beam 10 + LMs, token beam 8", 0.0f, 8.0f},
        Row{"beam 10 + LMs, token beam 5", 0.0f, 5.0f},
        Row{"  ... skip 0.999, beam 5", 0.999f, 5.0f}}) {
    config.search.blank_skip_threshold = row.skip;
    config.search.token_beam = row.token_beam;
    const Figures f = RunUtterances(config, units, utterances);
    PrintRow(v, row.name, f);
    std::printf("   %s\n", f.transcript_head.c_str());
  }
}

// Beam 10 with and without the bundled model's language model.
void LanguageModelRows(const std::string& dir) {
  absl::StatusOr<SymbolTable> loaded = SymbolTable::Load(dir + "/units.txt");
  if (!loaded.ok()) {
    std::printf("(no language model rows: %s)\n", loaded.status().ToString().c_str());
    return;
  }
  auto units = std::make_shared<const SymbolTable>(std::move(*loaded));
  const int v = units->size();
  std::vector<float> lp = PeakyLogProbs(v);
  CtcDecoderConfig config;
  config.stream.endpoint.enabled = false;
  PrintRow(v, "beam 10 (the model's units)", Run(config, units, lp, nullptr));
  std::printf("\n");
  absl::StatusOr<bool> lm = UseModelLanguageModel(dir, *units, &config.search);
  if (!lm.ok() || !*lm) {
    std::printf("(no language model row: %s)\n",
                lm.ok() ? "the model has no lm.json" : lm.status().ToString().c_str());
    return;
  }
  const std::shared_ptr<const WordLm> word_lm = config.search.word_lm;
  config.search.word_lm = nullptr;
  if (config.search.lm != nullptr) {
    PrintRow(v, "beam 10 + unit 5-gram LM", Run(config, units, lp, nullptr));
    std::printf("\n");
  }
  if (word_lm != nullptr) {
    config.search.word_lm = word_lm;
    PrintRow(v, "beam 10 + unit and word LMs", Run(config, units, lp, nullptr));
    std::printf("\n");
  }
}

int Main(int argc, char** argv) {
  CLI::App app{"oasr-bench-decoder: CTC decoding cost per frame of one stream on one core"};
#ifdef OASR_BENCH_MODEL_DIR
  std::string model_dir = OASR_BENCH_MODEL_DIR;
#else
  std::string model_dir;
#endif
  app.add_option("--model-dir", model_dir,
                 "Model whose units and language models the last rows decode with, and whose "
                 "frame clock the x-realtime column uses")
      ->capture_default_str();
  std::string npy_dir;
  app.add_option("--npy", npy_dir,
                 "Folder of the model's real CTC log-probs (oasr-transcribe --npy) for the rows "
                 "with the search's pruning");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!model_dir.empty()) g_frame_ms = ModelFrameShiftMs(model_dir);
  std::printf(
      "oasr-bench-decoder: CTC decoding, one stream on one core, %d frames (%.0f s at %g ms) in "
      "chunks of %d\n",
      kFrames, kFrames * g_frame_ms / 1000.0, g_frame_ms, kChunk);
  std::printf("%-6s %-28s %12s %12s %10s\n", "V", "search", "us/frame", "mean", "x realtime");
  std::printf("(us/frame: fastest of %d runs after a warm-up; mean: their average)\n", kRepeats);
  for (const int v : {5002, 30}) {
    std::vector<float> lp = PeakyLogProbs(v);
    const auto units = Units(v);
    const auto phrases = Phrases(lp, v);

    struct Row {
      const char* name;
      SearchMethod method;
      float skip;
      bool boost;
    };
    const Row rows[] = {
        {"greedy", SearchMethod::kGreedy, 0.0f, false},
        {"beam 10", SearchMethod::kPrefixBeam, 0.0f, false},
        {"beam 10 + 100 phrases", SearchMethod::kPrefixBeam, 0.0f, true},
        {"beam 10, blank skip 0.999", SearchMethod::kPrefixBeam, 0.999f, false},
        {"beam 10, blank skip 0.85", SearchMethod::kPrefixBeam, 0.85f, false},
    };
    for (const Row& row : rows) {
      CtcDecoderConfig config;
      config.method = row.method;
      config.search.blank_skip_threshold = row.skip;
      config.stream.endpoint.enabled = false;  // one 60 s segment, like the raw search
      PrintRow(v, row.name, Run(config, units, lp, row.boost ? phrases : nullptr));
      if (row.skip > 0.0f) {
        int skipped = 0;
        for (int t = 0; t < kFrames; ++t)
          skipped += lp[static_cast<size_t>(t) * v] >= std::log(row.skip);
        std::printf("   (%d%% of frames skipped)", 100 * skipped / kFrames);
      }
      std::printf("\n");
    }
  }
  if (!model_dir.empty()) LanguageModelRows(model_dir);
  if (!model_dir.empty() && !npy_dir.empty()) RealSpeechRows(model_dir, npy_dir);
  std::printf("goal: < 50 us/frame per stream at V = 5002, beam 10 (x realtime = %g ms / cost)\n",
              g_frame_ms);
  return 0;
}

}  // namespace
}  // namespace oasr::decoder

int main(int argc, char** argv) { return oasr::decoder::Main(argc, argv); }
