// The bundled model served for real: oasr-server started on it as a
// subprocess (CPU), ListModels, and every sample of samples/ streamed over
// gRPC in 100 ms messages, the total word error rate against
// samples/transcripts.tsv under OASR_MODEL_MAX_WER percent (the environment
// variable of that name overrides the build's value).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "oasr/asr/v1/asr.grpc.pb.h"
#include "server/audio_codec.h"
#include "server/stream_client.h"
#include "tests/server/recognition_helpers.h"
#include "tests/server/server_process.h"

namespace oasr {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> Words(const std::string& text) {
  return absl::StrSplit(text, ' ', absl::SkipEmpty());
}

// Word-level Levenshtein distance (substitutions, insertions, deletions).
int EditDistance(const std::vector<std::string>& ref, const std::vector<std::string>& hyp) {
  std::vector<int> prev(hyp.size() + 1), cur(hyp.size() + 1);
  for (size_t j = 0; j <= hyp.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= ref.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= hyp.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ref[i - 1] != hyp[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[hyp.size()];
}

struct Sample {
  std::string file;
  std::string voice;
  std::string text;
};

// samples/transcripts.tsv: a header line, then file, voice, held_out, text.
std::vector<Sample> ReadSamples(const std::string& dir) {
  std::istringstream in(ReadFile(dir + "/transcripts.tsv"));
  std::vector<Sample> samples;
  std::string line;
  for (bool header = true; std::getline(in, line); header = false) {
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    if (header || fields.size() != 4) continue;
    samples.push_back({fields[0], fields[1], fields[3]});
  }
  return samples;
}

double MaxWer() {
  const char* env = std::getenv("OASR_MODEL_MAX_WER");
  return env != nullptr ? std::atof(env) : OASR_MODEL_MAX_WER;
}

class BundledModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::ServerProcess();
    ASSERT_TRUE(
        server_->Start(OASR_SERVER_BINARY,
                       {"--model-dir", OASR_MODEL_DIR, "--device", "cpu", "--shutdown-grace", "1"},
                       /*timeout_s=*/120.0))
        << server_->error() << server_->ReadLog();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    // The server listens before it writes its port file: no wait needed.
    stub_ = asr::v1::Speech::NewStub(
        grpc::CreateChannel(server_->grpc_target(), grpc::InsecureChannelCredentials()));
  }

  static testing::ServerProcess* server_;
  std::unique_ptr<asr::v1::Speech::Stub> stub_;
};

testing::ServerProcess* BundledModelTest::server_ = nullptr;

// Issue #8's budget: the model directory, language models included, is at
// most 50 MB, in files of at most 16 MiB (what a GPU machine's transfers take).
TEST(BundledModelDirectoryTest, FitsInFiftyMegabytesOfSmallFiles) {
  uintmax_t total = 0;
  for (const auto& entry : std::filesystem::directory_iterator(OASR_MODEL_DIR)) {
    if (!entry.is_regular_file()) continue;
    EXPECT_LE(entry.file_size(), 16u << 20) << entry.path();
    total += entry.file_size();
  }
  EXPECT_LE(total, 50'000'000u);
  EXPECT_GT(total, 0u);
}

TEST_F(BundledModelTest, ServerLoadsItsLanguageModels) {
  const std::string log = server_->ReadLog();
  EXPECT_NE(log.find("] language model: order 5"), std::string::npos) << log;
  EXPECT_NE(log.find("] word language model: order 2"), std::string::npos) << log;
}

TEST_F(BundledModelTest, ServerLoadsItAndListsIt) {
  grpc::ClientContext context;
  context.set_deadline(testing::In(10));
  asr::v1::ListModelsResponse models;
  grpc::Status status = stub_->ListModels(&context, {}, &models);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(models.models_size(), 1);
  const asr::v1::ModelInfo& info = models.models(0);
  EXPECT_EQ(info.model_dir(), OASR_MODEL_DIR);
  EXPECT_EQ(info.sample_rate_hertz(), 16000);

  const nlohmann::json config =
      nlohmann::json::parse(ReadFile(std::string(OASR_MODEL_DIR) + "/config.json"));
  EXPECT_EQ(info.vocabulary_size(), config["output_dim"].get<int>());
  EXPECT_EQ(info.chunk_frames(), config["serving"]["chunk_size"].get<int>());
  std::printf("served: %s\n", info.DebugString().c_str());
}

TEST_F(BundledModelTest, SamplesTranscribedOverGrpc) {
  const std::vector<Sample> samples = ReadSamples(OASR_SAMPLES_DIR);
  ASSERT_FALSE(samples.empty()) << OASR_SAMPLES_DIR "/transcripts.tsv has no samples";
  int errors = 0, words = 0;
  for (const Sample& sample : samples) {
    const std::string bytes = ReadFile(std::string(OASR_SAMPLES_DIR) + "/" + sample.file);
    absl::StatusOr<server::WavAudio> wav = server::ParseWav(bytes);
    ASSERT_TRUE(wav.ok()) << sample.file << ": " << wav.status();
    ASSERT_EQ(wav->channels, 1) << sample.file;
    std::vector<int16_t> audio;
    ASSERT_TRUE(server::DecodeSamples(wav->encoding, wav->data, &audio).ok()) << sample.file;

    server::StreamClientOptions options;
    options.config = testing::Config(wav->sample_rate);
    options.chunk_ms = 100;
    options.realtime = false;
    options.timeout_s = 120;
    server::StreamOutcome got = server::RunStream(*stub_, audio, options);
    ASSERT_TRUE(got.status.ok()) << sample.file << ": " << got.status.error_message()
                                 << server_->ReadLog();
    EXPECT_EQ(got.finish_reason, "stop") << sample.file;
    const std::vector<std::string> ref = Words(sample.text);
    const std::vector<std::string> hyp = Words(absl::StrJoin(got.finals, " "));
    const int e = EditDistance(ref, hyp);
    errors += e;
    words += static_cast<int>(ref.size());
    std::printf("%s (%s): %d errors / %zu words\n  ref: %s\n  hyp: %s\n", sample.file.c_str(),
                sample.voice.c_str(), e, ref.size(), sample.text.c_str(),
                absl::StrJoin(hyp, " ").c_str());
  }
  const double wer = 100.0 * errors / std::max(words, 1);
  std::printf("total: %d errors / %d words = WER %.2f%% (limit %.2f%%)\n", errors, words, wer,
              MaxWer());
  EXPECT_LT(wer, MaxWer());
}

}  // namespace
}  // namespace oasr
