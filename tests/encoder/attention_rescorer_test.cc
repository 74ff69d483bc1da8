// The attention decoder and attention rescoring against the PyTorch
// reference (tools/reference/decoder.py): for the U2 (transformer) and U2++
// (bitransformer) fixtures, the C++ decoder scores of the reference's CTC
// n-best over the reference's encoder output, the rescoring totals and the
// winner for several weight settings; grouping independence; the loader's
// and the rescorer's refusals. The *_gpu_test build runs the same on CUDA
// (the encoder output on the device), and checks CUDA's scores against the
// CPU's.
#include "encoder/attention_rescorer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "encoder/conformer_model.h"
#include "encoder/npy_io.h"
#include "gtest/gtest.h"
#include "tests/encoder/test_util.h"

namespace oasr::encoder {
namespace {

constexpr double kTolerance = 2e-3;  // On sums of ~10 float32 log-probabilities.

struct Case {
  std::string name;
  std::unique_ptr<ConformerModel> model;
  Tensor memory;       // [T, d] on the test device
  Tensor host_memory;  // The same on the host
  std::vector<std::vector<int32_t>> hyps;
  std::vector<double> ctc_scores;
  nlohmann::json runs;
};

std::vector<Case> LoadCases() {
  std::vector<Case> cases;
  const nlohmann::json manifest = testing::LoadManifest();
  for (const auto& c : manifest["rescoring"]) {
    Case k;
    k.name = c["name"].get<std::string>();
    auto model = ConformerModel::Load(c["model_dir"].get<std::string>());
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) continue;
    k.model = std::move(*model);
    auto memory = ReadNpyFloat32(c["encoder_out"].get<std::string>());
    EXPECT_TRUE(memory.ok()) << memory.status();
    k.host_memory = std::move(*memory);
    auto on_device = Tensor::Empty(k.host_memory.shape(), DType::kFloat32, testing::TestDevice());
    EXPECT_TRUE(on_device.ok()) << on_device.status();
    if (!on_device.ok()) continue;
    k.memory = std::move(*on_device);
    EXPECT_TRUE(CopyTensor(k.memory.view(), k.host_memory.view()).ok());
    for (const auto& h : c["hyps"]) k.hyps.push_back(h.get<std::vector<int32_t>>());
    k.ctc_scores = c["ctc_scores"].get<std::vector<double>>();
    k.runs = c["runs"];
    cases.push_back(std::move(k));
  }
  return cases;
}

std::unique_ptr<ExecutionContext> Context(Device device) {
  ExecutionContextOptions options;
  options.device = device;
  auto ctx = ExecutionContext::Create(options);
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  return ctx.ok() ? std::move(*ctx) : nullptr;
}

std::unique_ptr<ExecutionContext> TestContext() { return Context(testing::TestDevice()); }

std::vector<std::span<const int32_t>> Spans(const std::vector<std::vector<int32_t>>& hyps) {
  return {hyps.begin(), hyps.end()};
}

TEST(AttentionRescorerTest, ScoresAndWinnerMatchTheReference) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  std::vector<Case> cases = LoadCases();
  ASSERT_GE(cases.size(), 2u) << "the fixtures have a U2 and a U2++ rescoring case";
  auto ctx = TestContext();
  bool saw_bidirectional = false;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const AttentionDecoderModel* dec = k.model->attention_decoder();
    ASSERT_NE(dec, nullptr);
    saw_bidirectional = saw_bidirectional || dec->config.bidirectional;
    const int64_t frames = k.memory.dim(0);
    RescorerOptions options;
    options.max_frames = frames;
    auto rescorer = AttentionRescorer::Create(k.model.get(), ctx.get(), options);
    ASSERT_TRUE(rescorer.ok()) << rescorer.status();
    const size_t n = k.hyps.size();
    ASSERT_GE(n, 2u);
    std::vector<double> left(n, -1.0), right(dec->config.bidirectional ? n : 0, -1.0);
    ASSERT_TRUE(
        (*rescorer)->Score(k.memory.data<float>(), frames, Spans(k.hyps), left, right).ok());
    for (const auto& run : k.runs) {
      const double cw = run["ctc_weight"], rw = run["reverse_weight"], sw = run["rescoring_weight"];
      SCOPED_TRACE(
          absl::StrCat("ctc_weight ", cw, " reverse_weight ", rw, " rescoring_weight ", sw));
      const auto ref_left = run["left_scores"].get<std::vector<double>>();
      const auto ref_right = run["right_scores"].get<std::vector<double>>();
      const auto ref_total = run["scores"].get<std::vector<double>>();
      std::vector<double> total(n);
      for (size_t i = 0; i < n; ++i) {
        EXPECT_NEAR(left[i], ref_left[i], kTolerance) << "hypothesis " << i;
        const bool both = rw > 0.0;
        if (both) {
          EXPECT_NEAR(right[i], ref_right[i], kTolerance) << "hypothesis " << i;
        }
        const double decoder = both ? (1 - rw) * left[i] + rw * right[i] : left[i];
        total[i] = sw * decoder + cw * k.ctc_scores[i];
        EXPECT_NEAR(total[i], ref_total[i], kTolerance) << "hypothesis " << i;
      }
      // The winner, when the reference's margin is beyond the tolerance.
      std::vector<double> sorted = ref_total;
      std::sort(sorted.rbegin(), sorted.rend());
      if (sorted[0] - sorted[1] > 10 * kTolerance) {
        const size_t best = std::max_element(total.begin(), total.end()) - total.begin();
        EXPECT_EQ(best, run["best"].get<size_t>());
      }
    }
  }
  EXPECT_TRUE(saw_bidirectional);
}

TEST(AttentionRescorerTest, GroupingDoesNotChangeAScore) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  std::vector<Case> cases = LoadCases();
  ASSERT_FALSE(cases.empty());
  auto ctx = TestContext();
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const int64_t frames = k.memory.dim(0);
    const size_t n = k.hyps.size();
    std::vector<std::vector<double>> scores;
    // Every hypothesis in one group, then groups of the fewest rows allowed
    // (one hypothesis or a few), and a longer window than the segment.
    for (int64_t max_rows : {int64_t{0}, frames + 1}) {
      for (int64_t max_frames : {frames, 4 * frames}) {
        RescorerOptions options;
        options.max_frames = max_frames;
        options.max_rows = max_rows == 0 ? 0 : max_frames + 1;
        auto rescorer = AttentionRescorer::Create(k.model.get(), ctx.get(), options);
        ASSERT_TRUE(rescorer.ok()) << rescorer.status();
        std::vector<double> left(n);
        ASSERT_TRUE(
            (*rescorer)->Score(k.memory.data<float>(), frames, Spans(k.hyps), left, {}).ok());
        scores.push_back(left);
      }
    }
    for (size_t v = 1; v < scores.size(); ++v) {
      for (size_t i = 0; i < n; ++i) EXPECT_NEAR(scores[v][i], scores[0][i], 1e-4) << v << " " << i;
    }
    // A hypothesis scored alone gets what it gets among the others.
    RescorerOptions options;
    options.max_frames = frames;
    auto rescorer = AttentionRescorer::Create(k.model.get(), ctx.get(), options);
    ASSERT_TRUE(rescorer.ok());
    std::vector<std::vector<int32_t>> last = {k.hyps.back()};
    std::vector<double> alone(1);
    ASSERT_TRUE((*rescorer)->Score(k.memory.data<float>(), frames, Spans(last), alone, {}).ok());
    EXPECT_NEAR(alone[0], scores[0][n - 1], 1e-4);
  }
}

// Several segments packed into one memory score as each does alone, in one
// group and in the smallest groups, with a right-to-left pass for one of
// them only.
TEST(AttentionRescorerTest, PackedSegmentsScoreAsEachAlone) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  std::vector<Case> cases = LoadCases();
  ASSERT_FALSE(cases.empty());
  auto ctx = TestContext();
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const int64_t frames = k.memory.dim(0), d = k.memory.dim(1);
    const int64_t cut = frames / 3, tail = frames - cut;
    const bool both = k.model->attention_decoder()->config.bidirectional;
    // Segment 0: every frame, every hypothesis; segment 1: the last two
    // thirds, the first three hypotheses.
    const size_t n = k.hyps.size(), m = std::min<size_t>(3, n);
    std::vector<std::vector<int32_t>> some(k.hyps.begin(), k.hyps.begin() + m);
    auto packed = Tensor::Empty({frames + tail, d}, DType::kFloat32, testing::TestDevice());
    ASSERT_TRUE(packed.ok());
    const float* host = k.host_memory.data<float>();
    std::vector<float> rows(host, host + frames * d);
    rows.insert(rows.end(), host + cut * d, host + frames * d);
    ASSERT_TRUE(CopyTensor(packed->view(), TensorView(rows.data(), DType::kFloat32,
                                                      {frames + tail, d}, Device::Cpu()))
                    .ok());
    for (int64_t max_rows : {int64_t{0}, frames + 1}) {
      RescorerOptions options;
      options.max_frames = frames;
      options.max_rows = max_rows;
      options.max_batch_frames = frames + tail;
      auto rescorer = AttentionRescorer::Create(k.model.get(), ctx.get(), options);
      ASSERT_TRUE(rescorer.ok()) << rescorer.status();
      std::vector<double> left0(n), right0(both ? n : 0), left1(m);
      const auto spans0 = Spans(k.hyps), spans1 = Spans(some);
      std::vector<RescoreSegment> segments(2);
      segments[0] = {0, frames, spans0, left0, right0};
      segments[1] = {frames, tail, spans1, left1, {}};
      ASSERT_TRUE((*rescorer)->ScoreSegments(packed->data<float>(), frames + tail, segments).ok());
      std::vector<double> alone_left(n), alone_right(both ? n : 0), alone1(m);
      ASSERT_TRUE(
          (*rescorer)->Score(k.memory.data<float>(), frames, spans0, alone_left, alone_right).ok());
      ASSERT_TRUE(
          (*rescorer)->Score(k.memory.data<float>() + cut * d, tail, spans1, alone1, {}).ok());
      for (size_t i = 0; i < n; ++i) {
        EXPECT_NEAR(left0[i], alone_left[i], 1e-4) << "hypothesis " << i;
        if (both) {
          EXPECT_NEAR(right0[i], alone_right[i], 1e-4) << "hypothesis " << i;
        }
      }
      for (size_t i = 0; i < m; ++i) EXPECT_NEAR(left1[i], alone1[i], 1e-4) << "hypothesis " << i;
      // Too many frames for one call, and a segment outside the memory.
      EXPECT_EQ(
          (*rescorer)->ScoreSegments(packed->data<float>(), frames + tail + 1, segments).code(),
          absl::StatusCode::kInvalidArgument);
      segments[1].first_frame = frames + 1;
      EXPECT_EQ((*rescorer)->ScoreSegments(packed->data<float>(), frames + tail, segments).code(),
                absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(AttentionRescorerTest, RefusesWhatItCannotScore) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  std::vector<Case> cases = LoadCases();
  ASSERT_FALSE(cases.empty());
  auto ctx = TestContext();
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const int64_t frames = k.memory.dim(0);
    RescorerOptions options;
    options.max_frames = frames - 1;
    auto rescorer = AttentionRescorer::Create(k.model.get(), ctx.get(), options);
    ASSERT_TRUE(rescorer.ok());
    std::vector<double> left(k.hyps.size());
    absl::Status long_segment =
        (*rescorer)->Score(k.memory.data<float>(), frames, Spans(k.hyps), left, {});
    EXPECT_EQ(long_segment.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(long_segment.message().find("encoder frames"), std::string::npos) << long_segment;
    std::vector<std::vector<int32_t>> bad = {{1, k.model->config().output_dim}};
    std::vector<double> one(1);
    absl::Status unit = (*rescorer)->Score(k.memory.data<float>(), 4, Spans(bad), one, {});
    EXPECT_EQ(unit.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(unit.message().find("outside"), std::string::npos) << unit;
    if (!k.model->attention_decoder()->config.bidirectional) {
      std::vector<double> r(k.hyps.size());
      EXPECT_EQ((*rescorer)->Score(k.memory.data<float>(), 4, Spans(k.hyps), left, r).code(),
                absl::StatusCode::kInvalidArgument);
    }
  }
  // A CTC-only model has no decoder to rescore with.
  auto plain = ConformerModel::Load(std::string(OASR_ENCODER_FIXTURES) + "/small_ln/model");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->attention_decoder(), nullptr);
  EXPECT_EQ(AttentionRescorer::Create(plain->get(), ctx.get(), {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

#if OASR_TEST_CUDA
// CUDA's scores equal the CPU's (both float32) far inside the reference's
// tolerance, for both directions, with the hypotheses in one group and in
// the smallest groups.
TEST(AttentionRescorerTest, CudaScoresEqualTheCpuScores) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  std::vector<Case> cases = LoadCases();
  ASSERT_GE(cases.size(), 2u);
  auto cpu = Context(Device::Cpu());
  auto cuda = TestContext();
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const int64_t frames = k.memory.dim(0);
    const size_t n = k.hyps.size();
    const bool both = k.model->attention_decoder()->config.bidirectional;
    RescorerOptions options;
    options.max_frames = frames;
    auto on_cpu = AttentionRescorer::Create(k.model.get(), cpu.get(), options);
    ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
    std::vector<double> left(n), right(both ? n : 0);
    ASSERT_TRUE(
        (*on_cpu)->Score(k.host_memory.data<float>(), frames, Spans(k.hyps), left, right).ok());
    for (int64_t max_rows : {int64_t{0}, frames + 1}) {
      options.max_rows = max_rows;
      auto on_cuda = AttentionRescorer::Create(k.model.get(), cuda.get(), options);
      ASSERT_TRUE(on_cuda.ok()) << on_cuda.status();
      std::vector<double> l(n, 1.0), r(both ? n : 0, 1.0);
      ASSERT_TRUE((*on_cuda)->Score(k.memory.data<float>(), frames, Spans(k.hyps), l, r).ok());
      for (size_t i = 0; i < n; ++i) {
        EXPECT_NEAR(l[i], left[i], 1e-4) << "hypothesis " << i << ", max_rows " << max_rows;
        if (both) {
          EXPECT_NEAR(r[i], right[i], 1e-4) << "hypothesis " << i;
        }
      }
    }
    // The linears on the tensor cores: close to float32, at bfloat16's
    // precision (8 bits of mantissa through every layer).
    for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
      SCOPED_TRACE(DTypeName(dtype));
      options.max_rows = 0;
      options.dtype = dtype;
      auto low = AttentionRescorer::Create(k.model.get(), cuda.get(), options);
      ASSERT_TRUE(low.ok()) << low.status();
      std::vector<double> l(n, 1.0), r(both ? n : 0, 1.0);
      ASSERT_TRUE((*low)->Score(k.memory.data<float>(), frames, Spans(k.hyps), l, r).ok());
      for (size_t i = 0; i < n; ++i) {
        EXPECT_NEAR(l[i], left[i], 0.1 + 0.03 * std::fabs(left[i])) << "hypothesis " << i;
        if (both) {
          EXPECT_NEAR(r[i], right[i], 0.1 + 0.03 * std::fabs(right[i])) << "hypothesis " << i;
        }
      }
    }
  }
}
#else
TEST(AttentionRescorerTest, HalfPrecisionIsForCudaOnly) {
  std::vector<Case> cases = LoadCases();
  ASSERT_FALSE(cases.empty());
  auto ctx = TestContext();
  RescorerOptions options;
  options.dtype = DType::kBFloat16;
  EXPECT_EQ(AttentionRescorer::Create(cases[0].model.get(), ctx.get(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}
#endif

// A copy of a rescoring case's model directory with decoder.json edited.
class DecoderJsonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const nlohmann::json manifest = testing::LoadManifest();
    ASSERT_FALSE(manifest["rescoring"].empty());
    for (const auto& c : manifest["rescoring"]) {
      if (c["name"] == "u2_rescoring") source_ = c["model_dir"].get<std::string>();
    }
    ASSERT_FALSE(source_.empty());
    // One directory per process and test: ctest runs the tests of this
    // fixture side by side.
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("decoder_json_model_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::copy(source_, dir_, std::filesystem::copy_options::recursive);
    std::ifstream in(dir_ / "decoder.json");
    conf_ = nlohmann::json::parse(in);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  absl::Status LoadWith(const nlohmann::json& conf) {
    std::ofstream(dir_ / "decoder.json") << conf.dump();
    return ConformerModel::Load(dir_.string()).status();
  }

  std::string source_;
  std::filesystem::path dir_;
  nlohmann::json conf_;
};

TEST_F(DecoderJsonTest, LoadsAsWritten) {
  ASSERT_TRUE(LoadWith(conf_).ok());
  auto model = ConformerModel::Load(dir_.string());
  ASSERT_TRUE(model.ok());
  const AttentionDecoderConfig& c = (*model)->attention_decoder()->config;
  EXPECT_FALSE(c.bidirectional);
  EXPECT_EQ(c.num_blocks, conf_["decoder_conf"]["num_blocks"].get<int>());
  EXPECT_EQ(c.sos, conf_["sos"].get<int>());
  EXPECT_FLOAT_EQ(c.rescoring.ctc_weight, conf_["rescoring"]["ctc_weight"].get<float>());
}

TEST_F(DecoderJsonTest, EachProblemIsNamed) {
  struct Edit {
    std::string expect;
    std::function<void(nlohmann::json&)> apply;
  };
  const std::vector<Edit> edits = {
      {"unknown field 'extra'", [](nlohmann::json& j) { j["extra"] = 1; }},
      {"missing field 'eos'", [](nlohmann::json& j) { j.erase("eos"); }},
      {"decoder=\"transducer\"", [](nlohmann::json& j) { j["decoder"] = "transducer"; }},
      {"format", [](nlohmann::json& j) { j["format_version"] = 2; }},
      {"rescoring.reverse_weight=0.5 needs a bitransformer",
       [](nlohmann::json& j) { j["rescoring"]["reverse_weight"] = 0.5; }},
      {"rescoring.ctc_weight", [](nlohmann::json& j) { j["rescoring"]["ctc_weight"] = -1; }},
      {"sos=", [](nlohmann::json& j) { j["sos"] = 100000; }},
      {"does not divide", [](nlohmann::json& j) { j["decoder_conf"]["attention_heads"] = 7; }},
      {"r_num_blocks", [](nlohmann::json& j) { j["decoder_conf"]["r_num_blocks"] = 2; }},
      {"missing tensor 'decoder.decoders.3.",
       [](nlohmann::json& j) { j["decoder_conf"]["num_blocks"] = 4; }},
      {"unexpected tensor 'decoder.decoders.2.",
       [](nlohmann::json& j) { j["decoder_conf"]["num_blocks"] = 2; }},
      {"feed_forward.w_1.weight' has shape",
       [](nlohmann::json& j) { j["decoder_conf"]["linear_units"] = 7; }},
  };
  for (const Edit& e : edits) {
    nlohmann::json conf = conf_;
    e.apply(conf);
    absl::Status status = LoadWith(conf);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << e.expect;
    EXPECT_NE(status.message().find(e.expect), std::string::npos)
        << "expected '" << e.expect << "' in: " << status;
  }
  // Decoder tensors without decoder.json.
  std::filesystem::remove(dir_ / "decoder.json");
  absl::Status orphan = ConformerModel::Load(dir_.string()).status();
  EXPECT_EQ(orphan.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(orphan.message().find("decoder.* tensors but no decoder.json"), std::string::npos)
      << orphan;
}

}  // namespace
}  // namespace oasr::encoder
