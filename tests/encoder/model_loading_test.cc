// Loading model directories written by the reference and by
// tools/convert_wenet.py, and the error for each kind of broken directory.
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "encoder/conformer_model.h"
#include "encoder/safetensors_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/encoder/test_util.h"

namespace oasr::encoder {
namespace {

using ::testing::HasSubstr;

std::string CaseModelDir(const std::string& name) {
  const nlohmann::json manifest = testing::LoadManifest();
  for (const auto& c : manifest["cases"]) {
    if (c["name"] == name) return c["model_dir"].get<std::string>();
  }
  ADD_FAILURE() << "no fixture case " << name;
  return "";
}

TEST(ModelLoadingTest, LoadsEveryFixtureModel) {
  const nlohmann::json manifest = testing::LoadManifest();
  for (const auto& c : manifest["cases"]) {
    auto model = ConformerModel::Load(c["model_dir"].get<std::string>());
    ASSERT_TRUE(model.ok()) << c["name"] << ": " << model.status();
    EXPECT_EQ((*model)->vocabulary().size(), (*model)->config().output_dim);
    EXPECT_EQ((*model)->vocabulary().Token(0), "<blank>");
    EXPECT_EQ((*model)->cmvn().dim(), 80);
    EXPECT_EQ(static_cast<int>((*model)->weights().layers.size()), (*model)->config().num_blocks);
  }
}

TEST(ModelLoadingTest, ReadsWenetConvertedModel) {
  auto model = ConformerModel::Load(CaseModelDir("wenet_converted"));
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->config().cnn_module_norm, ConvNorm::kBatchNorm);
  EXPECT_EQ((*model)->config().chunk_size, 8);
  EXPECT_EQ((*model)->vocabulary().Token(40), "<sos/eos>");
}

// Rewrites model.safetensors of `dir` through `edit` (all tensors as F32).
void EditWeights(const std::string& dir, const std::function<void(std::map<std::string, testing::RawTensor>&)>& edit) {
  const std::string path = dir + "/model.safetensors";
  auto reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok());
  std::map<std::string, testing::RawTensor> tensors;
  for (const std::string& name : (*reader)->Names()) {
    auto t = (*reader)->ReadFloat32(name);
    ASSERT_TRUE(t.ok());
    testing::RawTensor raw;
    for (int i = 0; i < t->shape().rank(); ++i) raw.shape.push_back(t->dim(i));
    raw.bytes.assign(static_cast<const char*>(t->data()), t->nbytes());
    tensors[name] = raw;
  }
  edit(tensors);
  testing::WriteSafetensors(path, tensors);
}

class BrokenModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::CopyModelDir(CaseModelDir("small_ln"), ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void ExpectError(const std::string& needle) {
    auto model = ConformerModel::Load(dir_);
    ASSERT_FALSE(model.ok()) << "expected an error naming " << needle;
    EXPECT_THAT(std::string(model.status().message()), HasSubstr(needle));
  }
  void EditConfig(const std::string& from, const std::string& to) {
    std::string text = testing::ReadFile(dir_ + "/config.json");
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    testing::WriteFile(dir_ + "/config.json", text.replace(at, from.size(), to));
  }

  std::string dir_;
};

TEST_F(BrokenModelTest, MissingTensor) {
  EditWeights(dir_, [](auto& t) { t.erase("encoder.encoders.2.self_attn.pos_bias_v"); });
  ExpectError("missing tensor 'encoder.encoders.2.self_attn.pos_bias_v'");
}

TEST_F(BrokenModelTest, MisshapenTensor) {
  EditWeights(dir_, [](auto& t) {
    auto& w = t["encoder.encoders.1.conv_module.depthwise_conv.weight"];
    w.shape = {96, 1, 5};
    w.bytes.resize(96 * 5 * 4);
  });
  ExpectError("tensor 'encoder.encoders.1.conv_module.depthwise_conv.weight' has shape [96, 1, 5], expected [96, 1, 15]");
}

TEST_F(BrokenModelTest, UnexpectedTensor) {
  EditWeights(dir_, [](auto& t) { t["encoder.encoders.0.extra.weight"] = testing::FloatTensor({1}, {0}); });
  ExpectError("unexpected tensor 'encoder.encoders.0.extra.weight'");
}

TEST_F(BrokenModelTest, IgnoresWenetLeftovers) {
  EditWeights(dir_, [](auto& t) {
    t["encoder.embed.pos_enc.pe"] = testing::FloatTensor({1}, {0});
    t["encoder.encoders.0.conv_module.norm.num_batches_tracked"] = testing::FloatTensor({1}, {0});
  });
  EXPECT_TRUE(ConformerModel::Load(dir_).ok());
}

// An attention decoder is read (decoder.json with its tensors), never
// silently dropped: tensors without decoder.json are refused.
TEST_F(BrokenModelTest, DecoderTensorsNeedDecoderJson) {
  EditWeights(dir_, [](auto& t) { t["decoder.embed.0.weight"] = testing::FloatTensor({1}, {0}); });
  ExpectError("decoder.* tensors but no decoder.json");
}

TEST_F(BrokenModelTest, UnsupportedOption) {
  EditConfig("\"causal\": true", "\"causal\": false");
  ExpectError("unsupported option encoder_conf.causal=false");
}

TEST_F(BrokenModelTest, WrongVocabularySize) {
  std::string units = testing::ReadFile(dir_ + "/units.txt");
  units.erase(units.rfind('\n', units.size() - 2) + 1);
  testing::WriteFile(dir_ + "/units.txt", units);
  ExpectError("52 units but output_dim is 53");
}

TEST_F(BrokenModelTest, OutputDimDisagreesWithCtcWeights) {
  EditConfig("\"output_dim\": 53", "\"output_dim\": 54");
  ExpectError("tensor 'ctc.ctc_lo.weight' has shape [53, 96], expected [54, 96]");
}

TEST_F(BrokenModelTest, GeometryDisagreesWithWeights) {
  EditConfig("\"linear_units\": 192", "\"linear_units\": 256");
  ExpectError("feed_forward_macaron.w_1.weight' has shape [192, 96], expected [256, 96]");
}

TEST_F(BrokenModelTest, CmvnMissingOrTwice) {
  testing::WriteFile(dir_ + "/global_cmvn", R"({"mean_stat": [0], "var_stat": [1], "frame_num": 1})");
  ExpectError("both encoder.global_cmvn tensors and a global_cmvn file");
  std::filesystem::remove(dir_ + "/global_cmvn");
  EditWeights(dir_, [](auto& t) {
    t.erase("encoder.global_cmvn.mean");
    t.erase("encoder.global_cmvn.istd");
  });
  ExpectError("no global CMVN");
}

TEST_F(BrokenModelTest, MissingFiles) {
  std::filesystem::remove(dir_ + "/units.txt");
  ExpectError("units.txt");
  std::filesystem::remove(dir_ + "/model.safetensors");
  ExpectError("model.safetensors");
}

}  // namespace
}  // namespace oasr::encoder
