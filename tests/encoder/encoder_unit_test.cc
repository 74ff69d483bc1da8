// Unit tests of the encoder library's parts that need no golden fixture.
#include <atomic>
#include <cmath>
#include <complex>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "encoder/global_cmvn.h"
#include "encoder/model_config.h"
#include "encoder/npy_io.h"
#include "encoder/resampler.h"
#include "encoder/safetensors_reader.h"
#include "encoder/vocabulary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/real_fft.h"
#include "tests/encoder/test_util.h"

namespace oasr::encoder {
namespace {

using testing::FloatTensor;
using ::testing::HasSubstr;
using testing::RawTensor;
using testing::WriteSafetensors;

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("oasr_unit_" + name)).string();
}

TEST(SafetensorsReaderTest, ReadsAllFloatDtypes) {
  const std::string path = TempPath("ok.safetensors");
  RawTensor half{"F16", {3}, std::string("\x00\x3c\x00\xc0\x01\x00", 6)};  // 1, -2, 2^-24
  RawTensor bf16{"BF16", {2}, std::string("\x80\x3f\x40\xc0", 4)};         // 1, -3
  WriteSafetensors(path, {{"a", FloatTensor({2, 2}, {1, 2, 3, 4})}, {"h", half}, {"b", bf16}});
  auto reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->Names(), (std::vector<std::string>{"a", "b", "h"}));
  EXPECT_EQ((*reader)->Find("a")->shape, (Shape{2, 2}));
  auto a = (*reader)->ReadFloat32("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->data<float>()[3], 4.0f);
  auto h = (*reader)->ReadFloat32("h");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->data<float>()[0], 1.0f);
  EXPECT_EQ(h->data<float>()[1], -2.0f);
  EXPECT_EQ(h->data<float>()[2], std::ldexp(1.0f, -24));
  auto b = (*reader)->ReadFloat32("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->data<float>()[1], -3.0f);
  EXPECT_EQ((*reader)->ReadFloat32("zz").status().code(), absl::StatusCode::kNotFound);
}

TEST(SafetensorsReaderTest, RejectsCorruptFiles) {
  const std::string path = TempPath("bad.safetensors");
  testing::WriteFile(path, std::string("\xff\x00\x00\x00\x00\x00\x00\x00{}", 10));
  EXPECT_THAT(std::string(SafetensorsReader::Open(path).status().message()),
              HasSubstr("header length"));
  testing::WriteFile(path, std::string("\x02\x00\x00\x00\x00\x00\x00\x00[]", 10));
  EXPECT_THAT(std::string(SafetensorsReader::Open(path).status().message()),
              HasSubstr("not a JSON object"));
  RawTensor short_data = FloatTensor({3}, {1, 2});
  short_data.shape = {3};
  WriteSafetensors(path, {{"w", short_data}});
  EXPECT_THAT(std::string(SafetensorsReader::Open(path).status().message()),
              HasSubstr("tensor 'w'"));
  WriteSafetensors(path, {{"w", RawTensor{"F64", {1}, std::string(8, '\0')}}});
  EXPECT_THAT(std::string(SafetensorsReader::Open(path).status().message()),
              HasSubstr("unsupported dtype F64"));
  WriteSafetensors(path, {{"i", RawTensor{"I64", {1}, std::string(8, '\0')}}});
  auto reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok());
  EXPECT_THAT(std::string((*reader)->ReadFloat32("i").status().message()), HasSubstr("int64"));
  EXPECT_EQ(SafetensorsReader::Open(TempPath("absent")).status().code(),
            absl::StatusCode::kNotFound);
  // Shapes whose element count overflows int64: 2^64 elements (the product
  // wrapped to 0, so no bytes passed for them) and 2^32 x 2^32. Found by
  // reading the reader and confirmed under tests/fuzz's sanitizers (signed
  // overflow in Shape::numel).
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{int64_t{1} << 62, 4},
                                         {int64_t{1} << 32, int64_t{1} << 32},
                                         {int64_t{1} << 40, int64_t{1} << 40, 0}}) {
    WriteSafetensors(path, {{"w", RawTensor{"F32", shape, ""}}});
    EXPECT_THAT(std::string(SafetensorsReader::Open(path).status().message()),
                HasSubstr("has too many elements"));
  }
  // Found by tests/fuzz (safetensors): an empty tensor in a file without a
  // data section was read with memcpy from a null pointer.
  WriteSafetensors(path, {{"e", RawTensor{"F32", {0, 3}, ""}}});
  auto empty = SafetensorsReader::Open(path);
  ASSERT_TRUE(empty.ok()) << empty.status();
  auto e = (*empty)->ReadFloat32("e");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->numel(), 0);
}

// A file split at arbitrary byte boundaries (inside the header length, the
// header and a tensor) reads as the whole file when the whole one is absent.
TEST(SafetensorsReaderTest, ReadsSplitParts) {
  const std::string whole = TempPath("split_whole.safetensors");
  WriteSafetensors(whole, {{"a", FloatTensor({2, 3}, {1, 2, 3, 4, 5, 6})},
                           {"b", FloatTensor({4}, {-1, -2, -3, -4})}});
  std::ifstream in(whole, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = TempPath("split.safetensors");
  std::filesystem::remove(path);
  const size_t cuts[] = {0, 5, 30, bytes.size() - 10, bytes.size()};
  for (int i = 0; i < 4; ++i) {
    testing::WriteFile(path + ".part0" + std::to_string(i),
                       bytes.substr(cuts[i], cuts[i + 1] - cuts[i]));
  }
  auto reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto b = (*reader)->ReadFloat32("b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->data<float>()[3], -4.0f);
  EXPECT_EQ((*reader)->ReadFloat32("a")->data<float>()[5], 6.0f);
  // A missing part shortens the data: an error naming a tensor, not garbage.
  std::filesystem::remove(path + ".part03");
  EXPECT_THAT(std::string(SafetensorsReader::Open(path).status().message()), HasSubstr("tensor '"));
  std::filesystem::remove(path + ".part00");
  EXPECT_EQ(SafetensorsReader::Open(path).status().code(), absl::StatusCode::kNotFound);
}

TEST(NpyTest, RoundTrip) {
  auto t = Tensor::Empty({3, 5}, DType::kFloat32);
  ASSERT_TRUE(t.ok());
  for (int i = 0; i < 15; ++i) t->data<float>()[i] = i * 0.5f - 2;
  const std::string path = TempPath("x.npy");
  ASSERT_TRUE(WriteNpyFloat32(path, t->view()).ok());
  auto back = ReadNpyFloat32(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape(), (Shape{3, 5}));
  EXPECT_EQ(back->data<float>()[14], 5.0f);
  testing::WriteFile(path, "not numpy");
  EXPECT_FALSE(ReadNpyFloat32(path).ok());
}

std::string ValidConfigJson() {
  return R"({"format": "oasr-conformer-ctc", "format_version": 1, "input_dim": 80,
    "output_dim": 10, "encoder": "conformer",
    "encoder_conf": {"output_size": 32, "attention_heads": 4, "linear_units": 64,
      "num_blocks": 2, "input_layer": "conv2d", "pos_enc_layer_type": "rel_pos",
      "selfattention_layer_type": "rel_selfattn", "normalize_before": true,
      "macaron_style": true, "activation_type": "swish", "use_cnn_module": true,
      "cnn_module_kernel": 15, "causal": true, "cnn_module_norm": "layer_norm",
      "static_chunk_size": 0, "use_dynamic_chunk": true, "dropout_rate": 0.1},
    "serving": {"chunk_size": 16, "num_left_chunks": -1}})";
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(ModelConfigTest, ParsesValidConfig) {
  auto c = ModelConfig::FromJson(ValidConfigJson());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim(), 8);
  EXPECT_EQ(c->WindowFrames(16), 67);
  EXPECT_EQ(c->RequiredCacheSize(), -1);
  auto c6 = ModelConfig::FromJson(Replace(ValidConfigJson(), "\"conv2d\"", "\"conv2d6\""));
  ASSERT_TRUE(c6.ok());
  EXPECT_EQ(c6->WindowFrames(1), 11);
  EXPECT_EQ(c->min_word_confidence, 0.0);  // Optional: every word kept.
  auto floor =
      ModelConfig::FromJson(Replace(ValidConfigJson(), "\"num_left_chunks\": -1",
                                    "\"num_left_chunks\": -1, \"min_word_confidence\": 0.35"));
  ASSERT_TRUE(floor.ok()) << floor.status();
  EXPECT_DOUBLE_EQ(floor->min_word_confidence, 0.35);
}

TEST(ModelConfigTest, NamesEveryBadField) {
  const std::string base = ValidConfigJson();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Replace(base, "\"causal\": true", "\"causal\": false"), "encoder_conf.causal=false"},
      {Replace(base, "\"rel_pos\"", "\"abs_pos\""), "encoder_conf.pos_enc_layer_type=abs_pos"},
      {Replace(base, "\"layer_norm\"", "\"group_norm\""),
       "encoder_conf.cnn_module_norm=group_norm"},
      {Replace(base, "\"conv2d\"", "\"linear\""), "encoder_conf.input_layer=linear"},
      {Replace(base, "\"swish\"", "\"relu\""), "encoder_conf.activation_type=relu"},
      {Replace(base, "\"dropout_rate\": 0.1", "\"mystery\": 1"), "encoder_conf.mystery"},
      {Replace(base, "\"cnn_module_kernel\": 15,", ""), "encoder_conf.cnn_module_kernel"},
      {Replace(base, "\"attention_heads\": 4", "\"attention_heads\": 5"), "attention_heads=5"},
      {Replace(base, "\"input_dim\": 80", "\"input_dim\": 40"), "input_dim=40"},
      {Replace(base, "\"chunk_size\": 16", "\"chunk_size\": 0"), "serving.chunk_size=0"},
      {Replace(base, "\"num_left_chunks\": -1", "\"num_left_chunks\": -2"), "num_left_chunks"},
      {Replace(base, "\"output_size\": 32", "\"output_size\": \"32\""), "encoder_conf.output_size"},
      {Replace(base, "\"use_dynamic_chunk\": true", "\"use_dynamic_chunk\": false"),
       "full-context"},
      {Replace(base, "\"format_version\": 1", "\"format_version\": 2"), "format_version=2"},
      {Replace(base, "\"num_left_chunks\": -1",
               "\"num_left_chunks\": -1, \"min_word_confidence\": 1.5"),
       "serving.min_word_confidence=1.5 is outside [0, 1]"},
      {Replace(base, "\"num_left_chunks\": -1",
               "\"num_left_chunks\": -1, \"min_word_confidence\": \"low\""),
       "serving.min_word_confidence' must be a number"},
      {"[1, 2]", "not a JSON object"},
  };
  for (const auto& [text, needle] : cases) {
    auto c = ModelConfig::FromJson(text);
    ASSERT_FALSE(c.ok()) << needle;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(needle));
  }
}

TEST(VocabularyTest, ParsesAndChecksSize) {
  auto v = Vocabulary::Parse("<blank> 0\n<unk> 1\n\xe2\x96\x81the 2\n<sos/eos> 3\n", 4);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->Token(2), "\xe2\x96\x81the");
  EXPECT_THAT(std::string(Vocabulary::Parse("<blank> 0\na 1\n", 3).status().message()),
              HasSubstr("2 units but output_dim is 3"));
  EXPECT_THAT(std::string(Vocabulary::Parse("<blank> 0\na 2\n", 3).status().message()),
              HasSubstr("id 1 is missing"));
  EXPECT_THAT(std::string(Vocabulary::Parse("a 0\n<blank> 1\n", 2).status().message()),
              HasSubstr("<blank>"));
  EXPECT_THAT(std::string(Vocabulary::Parse("<blank> 0\na b\n", 2).status().message()),
              HasSubstr("units.txt:2"));
  // Found by tests/fuzz (units): no units against a size of 0 read tokens[0].
  EXPECT_THAT(std::string(Vocabulary::Parse("\n", 0).status().message()), HasSubstr("no units"));
  // Found by tests/fuzz (units, a slow input): an id past output_dim is
  // refused before anything is sized by it.
  EXPECT_THAT(std::string(Vocabulary::Parse("o 11111111\n", 4).status().message()),
              HasSubstr("units.txt:1: id 11111111 but output_dim is 4"));
}

TEST(GlobalCmvnTest, FromWenetStats) {
  auto c = GlobalCmvn::FromWenetJson(
      R"({"mean_stat": [10.0, 4.0], "var_stat": [60.0, 8.0], "frame_num": 2})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FLOAT_EQ(c->mean()[0], 5.0f);
  EXPECT_FLOAT_EQ(c->istd()[0], 1.0f / std::sqrt(5.0f));
  // var = 4 - 4 = 0 is floored at 1e-20.
  EXPECT_FLOAT_EQ(c->istd()[1], 1e10f);
  float row[2] = {7.0f, 2.0f};
  c->Apply(row, 1);
  EXPECT_FLOAT_EQ(row[0], 2.0f / std::sqrt(5.0f));
  EXPECT_THAT(std::string(GlobalCmvn::FromWenetJson(R"({"mean_stat": [1]})").status().message()),
              HasSubstr("var_stat"));
}

TEST(RealFftTest, MatchesNaiveDft) {
  std::mt19937 rng(1);
  std::normal_distribution<double> dist;
  std::vector<double> scratch;
  for (int n : {2, 4, 8, 64, 512}) {
    std::vector<double> x(n), power(n / 2 + 1);
    for (double& v : x) v = dist(rng);
    kernels::RealFft(n).PowerSpectrum(x.data(), power.data(), &scratch);
    for (int k = 0; k <= n / 2; ++k) {
      std::complex<double> sum = 0;
      for (int t = 0; t < n; ++t) sum += x[t] * std::polar(1.0, -2 * std::numbers::pi * k * t / n);
      EXPECT_NEAR(power[k], std::norm(sum), 1e-9 * (1 + std::norm(sum))) << "n " << n << " k " << k;
    }
  }
}

TEST(ResamplerTest, RejectsRatesOutsideRange) {
  EXPECT_THAT(std::string(Resampler::Create(4000, 16000).status().message()),
              HasSubstr("in_rate=4000"));
  EXPECT_THAT(std::string(Resampler::Create(16000, 96000).status().message()),
              HasSubstr("out_rate=96000"));
}

// 16 kHz -> rate -> 16 kHz returns the signal (band-limited well inside
// both Nyquist limits), whatever the chunking.
TEST(ResamplerTest, RoundTrip) {
  for (int rate : {8000, 22050, 44100, 48000}) {
    const int n = 16000;
    std::vector<float> x(n);
    for (int i = 0; i < n; ++i) {
      const double t = i / 16000.0;
      x[i] = static_cast<float>(0.3 * std::sin(2 * std::numbers::pi * 440 * t) +
                                0.2 * std::sin(2 * std::numbers::pi * 1700 * t + 1) +
                                0.1 * std::sin(2 * std::numbers::pi * 3100 * t + 2));
    }
    auto up = Resampler::Create(16000, rate);
    auto down = Resampler::Create(rate, 16000);
    ASSERT_TRUE(up.ok() && down.ok());
    std::vector<float> mid, back;
    std::mt19937 rng(rate);
    for (int i = 0; i < n;) {
      const int len = std::min<int>(n - i, 1 + rng() % 700);
      ASSERT_TRUE((*up)->Process(x.data() + i, len, &mid).ok());
      i += len;
    }
    ASSERT_TRUE((*up)->Flush(&mid).ok());
    EXPECT_NEAR(static_cast<double>(mid.size()), n * static_cast<double>(rate) / 16000, 2);
    ASSERT_TRUE((*down)->Process(mid.data(), static_cast<int64_t>(mid.size()), &back).ok());
    ASSERT_TRUE((*down)->Flush(&back).ok());
    ASSERT_NEAR(static_cast<double>(back.size()), n, 2) << rate;
    float worst = 0;
    for (int i = 800; i < n - 800; ++i) worst = std::max(worst, std::abs(back[i] - x[i]));
    EXPECT_LT(worst, 2e-3) << rate;
    EXPECT_FALSE((*up)->Process(x.data(), 1, &mid).ok());
  }
}

}  // namespace
}  // namespace oasr::encoder
