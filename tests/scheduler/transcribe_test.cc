// oasr-transcribe run as a subprocess on generated WAV files (16-bit PCM mono
// and 32-bit float stereo, two rates) with the small_ln fixture model: its
// transcripts equal the in-process engine's for the same samples, with the
// beam and greedy searches and a num_left_chunks override, and its .npy
// log-probs equal the encoder's dense ForwardChunk run. Also: the model's
// declared stream states size the conv cache.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cache/cnn_cache_manager.h"
#include "decoder/symbol_table.h"
#include "encoder/conformer_encoder.h"
#include "encoder/npy_io.h"
#include "scheduler/conformer_streaming_model.h"
#include "scheduler/engine.h"
#include "scheduler/model_factory.h"

namespace oasr::scheduler {
namespace {

const std::string kModelDir = std::string(OASR_ENCODER_FIXTURES) + "/small_ln/model";

std::vector<int16_t> MakeAudio(double seconds, int rate, double f0) {
  std::vector<int16_t> out(static_cast<size_t>(seconds * rate));
  for (size_t i = 0; i < out.size(); ++i) {
    const double t = static_cast<double>(i) / rate;
    const double env = 0.5 + 0.5 * std::sin(2 * M_PI * 1.7 * t);
    const double x =
        6000 * env * (std::sin(2 * M_PI * f0 * t) + 0.4 * std::sin(2 * M_PI * 3.1 * f0 * t)) +
        200 * std::sin(2 * M_PI * 2917 * t);
    out[i] = static_cast<int16_t>(std::lround(x));
  }
  return out;
}

void Put(std::string& s, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A RIFF/WAVE file: 16-bit PCM, or 32-bit float (format 3) with every channel
// a copy of `samples`. A LIST chunk before the data, as many writers add.
void WriteWav(const std::string& path, const std::vector<int16_t>& samples, int rate, bool as_float,
              int channels) {
  const int bytes = as_float ? 4 : 2;
  std::string data;
  for (int16_t s : samples) {
    for (int ch = 0; ch < channels; ++ch) {
      if (as_float) {
        const float f = static_cast<float>(s) / 32768.0f;
        uint32_t u;
        std::memcpy(&u, &f, 4);
        Put(data, u, 4);
      } else {
        Put(data, static_cast<uint16_t>(s), 2);
      }
    }
  }
  std::string wav = "RIFF";
  Put(wav, static_cast<uint32_t>(4 + 24 + 14 + 8 + data.size()), 4);
  wav += "WAVEfmt ";
  Put(wav, 16, 4);
  Put(wav, as_float ? 3 : 1, 2);
  Put(wav, channels, 2);
  Put(wav, rate, 4);
  Put(wav, rate * channels * bytes, 4);
  Put(wav, channels * bytes, 2);
  Put(wav, bytes * 8, 2);
  wav += "LIST";
  Put(wav, 5, 4);
  wav += "abcde";
  wav.push_back('\0');  // Pad byte of the odd-sized chunk.
  wav += "data";
  Put(wav, static_cast<uint32_t>(data.size()), 4);
  wav += data;
  std::ofstream(path, std::ios::binary) << wav;
}

// A folder of this process's own: ctest runs the cases of this binary as
// parallel processes, which must not share file names.
std::filesystem::path TestDir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d = std::filesystem::temp_directory_path() /
                              ("oasr_transcribe_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

struct ToolRun {
  int status = -1;
  std::map<std::string, std::string> transcripts;  // file -> text
  std::string stderr_text;
};

ToolRun RunTool(const std::string& args, const std::string& tag) {
  const std::filesystem::path dir = TestDir();
  const std::string out = (dir / ("oasr_transcribe_" + tag + ".out")).string();
  const std::string err = (dir / ("oasr_transcribe_" + tag + ".err")).string();
  const std::string command = std::string(OASR_TRANSCRIBE_BIN) + " --model-dir " + kModelDir + " " +
                              args + " >" + out + " 2>" + err;
  ToolRun run;
  const int raw = std::system(command.c_str());
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream in(out);
  for (std::string line; std::getline(in, line);) {
    const size_t tab = line.find('\t');
    EXPECT_NE(tab, std::string::npos) << line;
    if (tab != std::string::npos) run.transcripts[line.substr(0, tab)] = line.substr(tab + 1);
  }
  std::stringstream text;
  text << std::ifstream(err).rdbuf();
  run.stderr_text = text.str();
  return run;
}

// The same samples through an in-process engine configured as the tool is.
std::string EngineTranscript(const std::vector<int16_t>& samples, int rate, bool greedy, int left) {
  EngineConfig config;
  config.num_left_chunks = left;
  config.max_buffered_audio_s = 3600;
  config.decoder.method =
      greedy ? decoder::SearchMethod::kGreedy : decoder::SearchMethod::kPrefixBeam;
  config.decoder.stream.nbest = 1;
  ModelOptions options;
  options.model_dir = kModelDir;
  options.decoder = config.decoder;
  auto engine = LoadEngine(options, config);
  EXPECT_TRUE(engine.ok()) << engine.status();
  StreamRequest request;
  request.sample_rate = rate;
  request.decode = config.decoder.stream;
  auto stream = (*engine)->OpenStream(request);
  EXPECT_TRUE(stream.ok()) << stream.status();
  // Pieces of 100 ms, as a live client would send them.
  for (size_t i = 0; i < samples.size(); i += rate / 10) {
    const size_t n = std::min<size_t>(rate / 10, samples.size() - i);
    EXPECT_TRUE((*stream)->PushAudio({samples.data() + i, n}).ok());
  }
  EXPECT_TRUE((*stream)->EndAudio().ok());
  std::string text;
  StreamEvent event;
  while ((*stream)->outbox().WaitPop(&event, 120)) {
    for (const auto& r : event.results) {
      if (r.is_final && !r.nbest.empty() && !r.nbest[0].transcript.empty()) {
        text += (text.empty() ? "" : " ") + r.nbest[0].transcript;
      }
    }
    if (event.finish.has_value()) {
      EXPECT_EQ(*event.finish, FinishReason::kStop);
      break;
    }
  }
  return text;
}

// The dense streaming path, written independently of the tool: whole
// features first, then WeNet's windows over them.
std::vector<float> DenseLogProbs(const std::vector<int16_t>& samples, int rate, int left,
                                 int64_t* frames) {
  auto model = ConformerStreamingModel::Load(kModelDir, {});
  EXPECT_TRUE(model.ok());
  const encoder::ModelConfig& c = (*model)->model().config();
  auto frontend = (*model)->CreateFrontEnd(rate);
  EXPECT_TRUE((*frontend)->AcceptPcm16(samples.data(), static_cast<int64_t>(samples.size())).ok());
  EXPECT_TRUE((*frontend)->InputFinished().ok());
  const int64_t total = (*frontend)->NumFramesReady();
  std::vector<float> feats(static_cast<size_t>(total * c.input_dim));
  EXPECT_TRUE((*frontend)->GetFrames(0, total, feats.data()).ok());
  encoder::ConformerEncoder& encoder = (*model)->encoder();
  Tensor att =
      *Tensor::Zeros({c.num_blocks, c.attention_heads, 0, 2 * c.head_dim()}, DType::kFloat32);
  Tensor cnn = *Tensor::Zeros(encoder.ConvStateShape(), DType::kFloat32);
  std::vector<float> out;
  *frames = 0;
  const int chunk = c.chunk_size;
  for (int64_t start = 0; start + c.right_context() < total;
       start += chunk * c.subsampling_rate()) {
    const int64_t n = std::min<int64_t>(c.WindowFrames(chunk), total - start);
    const TensorView window(feats.data() + start * c.input_dim, DType::kFloat32,
                            Shape{n, c.input_dim}, Device::Cpu());
    auto r = encoder.ForwardChunk({window, *frames, att.view(), cnn.view()},
                                  left < 0 ? -1 : chunk * left);
    EXPECT_TRUE(r.ok()) << r.status();
    out.insert(out.end(), r->log_probs.data<float>(),
               r->log_probs.data<float>() + r->log_probs.numel());
    *frames += r->log_probs.dim(0);
    att = std::move(r->att_cache);
    cnn = std::move(r->cnn_cache);
  }
  return out;
}

struct File {
  std::string path;
  std::string stem;
  std::vector<int16_t> samples;
  int rate;
};

std::vector<File> MakeFiles() {
  const std::filesystem::path dir = TestDir();
  std::vector<File> files = {
      {(dir / "oasr_tx_pcm16k.wav").string(), "oasr_tx_pcm16k", MakeAudio(2.3, 16000, 220), 16000},
      {(dir / "oasr_tx_float44k.wav").string(), "oasr_tx_float44k", MakeAudio(1.6, 44100, 310),
       44100},
  };
  WriteWav(files[0].path, files[0].samples, 16000, /*as_float=*/false, 1);
  WriteWav(files[1].path, files[1].samples, 44100, /*as_float=*/true, 2);
  return files;
}

void CheckNpy(const File& f, const std::string& dir, int left) {
  auto got = encoder::ReadNpyFloat32(dir + "/" + f.stem + ".npy");
  ASSERT_TRUE(got.ok()) << got.status();
  int64_t frames = 0;
  const std::vector<float> want = DenseLogProbs(f.samples, f.rate, left, &frames);
  ASSERT_EQ(got->shape().rank(), 2);
  EXPECT_EQ(got->dim(0), frames);
  EXPECT_EQ(got->dim(1), 53);
  ASSERT_EQ(got->numel(), static_cast<int64_t>(want.size()));
  float diff = 0;
  for (int64_t i = 0; i < got->numel(); ++i)
    diff = std::max(diff, std::abs(got->data<float>()[i] - want[i]));
  EXPECT_LT(diff, 1e-5f) << f.path;
}

TEST(TranscribeTest, BeamSearchMatchesTheEngineAndWritesLogProbs) {
  const std::vector<File> files = MakeFiles();
  const std::string npy = (TestDir() / "oasr_tx_npy").string();
  std::filesystem::remove_all(npy);
  const ToolRun run = RunTool("--npy " + npy + " " + files[0].path + " " + files[1].path, "beam");
  ASSERT_EQ(run.status, 0) << run.stderr_text;
  ASSERT_EQ(run.transcripts.size(), 2u);
  for (const File& f : files) {
    ASSERT_TRUE(run.transcripts.count(f.path)) << f.path;
    const std::string want = EngineTranscript(f.samples, f.rate, /*greedy=*/false, -2);
    EXPECT_FALSE(want.empty()) << "the random model emits tokens for this audio";
    EXPECT_EQ(run.transcripts.at(f.path), want) << f.path;
    CheckNpy(f, npy, -1);  // small_ln keeps all history.
  }
}

TEST(TranscribeTest, GreedyWithLeftChunksMatchesTheEngine) {
  const std::vector<File> files = MakeFiles();
  const std::string npy = (TestDir() / "oasr_tx_npy_l2").string();
  std::filesystem::remove_all(npy);
  const ToolRun run =
      RunTool("--greedy --num-left-chunks 2 --npy " + npy + " " + files[0].path, "greedy");
  ASSERT_EQ(run.status, 0) << run.stderr_text;
  ASSERT_TRUE(run.transcripts.count(files[0].path));
  EXPECT_EQ(run.transcripts.at(files[0].path),
            EngineTranscript(files[0].samples, files[0].rate, /*greedy=*/true, 2));
  CheckNpy(files[0], npy, 2);
}

TEST(TranscribeTest, BadFilesAreReportedAndTheRestTranscribed) {
  const std::vector<File> files = MakeFiles();
  const std::string junk = (TestDir() / "oasr_tx_junk.wav").string();
  std::ofstream(junk) << "not a wave file at all";
  const ToolRun run = RunTool(junk + " " + files[0].path + " /nonexistent/x.wav", "bad");
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.transcripts.size(), 1u);
  EXPECT_TRUE(run.transcripts.count(files[0].path));
  EXPECT_NE(run.stderr_text.find(junk + ": INVALID_ARGUMENT"), std::string::npos)
      << run.stderr_text;
  EXPECT_NE(run.stderr_text.find("/nonexistent/x.wav: NOT_FOUND"), std::string::npos)
      << run.stderr_text;
  EXPECT_EQ(RunTool("--beam 0 " + files[0].path, "args").status, 2);
}

// The declared conv state is what a CnnCacheManager for the model's cache
// config allocates (the seed's single-spec layout).
TEST(ConformerStreamingModelTest, StreamStatesSizeTheConvCache) {
  auto model = ConformerStreamingModel::Load(kModelDir, {});
  ASSERT_TRUE(model.ok());
  const std::vector<cache::StreamStateSpec> specs = (*model)->StreamStates();
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].name, cache::CnnCacheManager::kStateName);
  EXPECT_EQ(specs[0].per_slot_shape, (Shape{3, 14, 96}));  // layers, K - 1, d
  EXPECT_EQ(specs[0].dtype, DType::kFloat32);
  auto cnn = cache::CnnCacheManager::Create((*model)->BaseCacheConfig());
  ASSERT_TRUE(cnn.ok()) << cnn.status();
  EXPECT_EQ((*cnn)->states().spec(0).per_slot_shape, specs[0].per_slot_shape);
  EXPECT_EQ((*cnn)->states().spec(0).slot_axis, specs[0].slot_axis);
  EXPECT_EQ((*cnn)->states().spec(0).dtype, specs[0].dtype);
}

}  // namespace
}  // namespace oasr::scheduler
