// Golden parity: the C++ encoder streamed chunk by chunk against the PyTorch
// reference's chunk-masked full-utterance log-probs, for every fixture case
// and run (geometries, both conv norms, 4x/6x/8x subsampling, chunk sizes
// 4/8/16, unlimited and 2 left chunks, fp32/fp16/bf16 weights, a converted
// WeNet checkpoint, a stream starting past 5000 positions); and cohorts of
// streams at mixed offsets against each stream alone.
#include <algorithm>
#include <string>
#include <vector>

#include "encoder/conformer_encoder.h"
#include "encoder/npy_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/encoder/test_util.h"

namespace oasr::encoder {
namespace {

constexpr float kTolerance = 1e-4f;

struct Stream {
  Tensor feats;  // [T, 80], CMVN applied.
  int64_t next_feat = 0;
  int64_t offset = 0;
  Tensor att_cache;
  Tensor cnn_cache;
  std::vector<float> log_probs;
};

Tensor LoadFeats(const std::string& path, const ConformerModel& model) {
  auto feats = ReadNpyFloat32(path);
  EXPECT_TRUE(feats.ok()) << feats.status();
  model.cmvn().Apply(feats->data<float>(), feats->dim(0));
  return std::move(*feats);
}

Stream NewStream(const ConformerModel& model, Tensor feats, int64_t offset) {
  const ModelConfig& c = model.config();
  Stream s;
  s.feats = std::move(feats);
  s.offset = offset;
  s.att_cache =
      *Tensor::Zeros({c.num_blocks, c.attention_heads, 0, 2 * c.head_dim()}, DType::kFloat32);
  s.cnn_cache =
      *Tensor::Zeros({c.num_blocks, c.cnn_module_kernel - 1, c.output_size}, DType::kFloat32);
  return s;
}

bool HasChunk(const ConformerModel& model, const Stream& s) {
  return s.next_feat < s.feats.dim(0) - model.config().right_context();
}

// The next chunk's input: WeNet's windows (stride rate * c, overlap).
DenseChunkInput NextInput(const ConformerModel& model, const Stream& s, int chunk) {
  const ModelConfig& c = model.config();
  const int64_t end = std::min<int64_t>(s.next_feat + c.WindowFrames(chunk), s.feats.dim(0));
  DenseChunkInput in;
  in.feats = s.feats.view().Slice(s.next_feat, end - s.next_feat);
  in.offset = s.offset;
  in.att_cache = s.att_cache.view();
  in.cnn_cache = s.cnn_cache.view();
  return in;
}

void Absorb(const ConformerModel& model, Stream& s, int chunk, DenseChunkOutput out) {
  s.next_feat += static_cast<int64_t>(model.config().subsampling_rate()) * chunk;
  s.offset += out.log_probs.dim(0);
  s.log_probs.insert(s.log_probs.end(), out.log_probs.data<float>(),
                     out.log_probs.data<float>() + out.log_probs.numel());
  s.att_cache = std::move(out.att_cache);
  s.cnn_cache = std::move(out.cnn_cache);
}

std::vector<float> RunAlone(ConformerEncoder& encoder, const ConformerModel& model, Stream s,
                            int chunk, int left) {
  const int required = left < 0 ? -1 : chunk * left;
  while (HasChunk(model, s)) {
    auto out = encoder.ForwardChunk(NextInput(model, s, chunk), required);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) break;
    if (left >= 0) {
      EXPECT_LE(out->att_cache.dim(2), required);
    }
    Absorb(model, s, chunk, std::move(*out));
  }
  return s.log_probs;
}

float CompareToGolden(const std::vector<float>& got, const std::string& golden_path) {
  auto golden = ReadNpyFloat32(golden_path);
  EXPECT_TRUE(golden.ok()) << golden.status();
  EXPECT_EQ(static_cast<int64_t>(got.size()), golden->numel()) << golden_path;
  if (static_cast<int64_t>(got.size()) != golden->numel()) return 1e9f;
  return testing::MaxAbsDiff(got.data(), golden->data<float>(), golden->numel());
}

void CheckCase(const nlohmann::json& c, int threads = 1, int64_t table_positions = 16384,
               DType dtype = DType::kFloat32, float tolerance = kTolerance) {
  auto model = ConformerModel::Load(c["model_dir"].get<std::string>());
  ASSERT_TRUE(model.ok()) << model.status();
  auto encoder = testing::MakeTestEncoder(model->get(), threads, table_positions, dtype);
  ASSERT_TRUE(encoder.ok()) << encoder.status();
  for (const auto& run : c["runs"]) {
    const int chunk = run["chunk_size"], left = run["num_left_chunks"];
    const int64_t offset = run["start_offset"];
    Stream s = NewStream(**model, LoadFeats(c["feats"], **model), offset);
    const float diff =
        CompareToGolden(RunAlone(**encoder, **model, std::move(s), chunk, left), run["log_probs"]);
    EXPECT_LT(diff, tolerance) << c["name"] << " chunk " << chunk << " left " << left;
    std::printf("[ parity ] %-22s %s %-8s chunk %2d left %2d threads %d: max |diff| %.3g\n",
                c["name"].get<std::string>().c_str(), testing::TestDevice().ToString().c_str(),
                DTypeName(dtype), chunk, left, threads, diff);
  }
}

nlohmann::json FindCase(const std::string& name) {
  const nlohmann::json manifest = testing::LoadManifest();
  for (const auto& c : manifest["cases"]) {
    if (c["name"] == name) return c;
  }
  ADD_FAILURE() << "no fixture case " << name;
  return {};
}

class GoldenParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenParityTest, StreamingMatchesReference) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  CheckCase(FindCase(GetParam()));
}

#if OASR_TEST_CUDA
// bfloat16 and float16 storage with float32 accumulation: a coarse bound
// here; the rule (at most twice PyTorch's own bfloat16 error, both
// against float64) is checked on the GPU by tools/gpu/parity.py.
TEST_P(GoldenParityTest, HalfPrecisionStaysClose) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  CheckCase(FindCase(GetParam()), 1, 16384, DType::kBFloat16, 0.5f);
  CheckCase(FindCase(GetParam()), 1, 16384, DType::kFloat16, 0.5f);
}

// Two 16-bit encoders of case `c` that compute the same maths by different
// kernels (`make(dtype, variant)` for variant 0 and 1) on the same streams:
// each run's log-probs within `bound` of each other.
template <typename Make>
void ExpectVariantsAgree(const nlohmann::json& c, const char* what, float bound, Make make) {
  auto model = ConformerModel::Load(c["model_dir"].get<std::string>());
  ASSERT_TRUE(model.ok()) << model.status();
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    auto base = make(model->get(), dtype, 0);
    auto other = make(model->get(), dtype, 1);
    ASSERT_TRUE(base.ok()) << base.status();
    ASSERT_TRUE(other.ok()) << other.status();
    for (const auto& run : c["runs"]) {
      const int chunk = run["chunk_size"], left = run["num_left_chunks"];
      const int64_t offset = run["start_offset"];
      const std::vector<float> want = RunAlone(
          **base, **model, NewStream(**model, LoadFeats(c["feats"], **model), offset), chunk, left);
      const std::vector<float> got =
          RunAlone(**other, **model, NewStream(**model, LoadFeats(c["feats"], **model), offset),
                   chunk, left);
      ASSERT_EQ(got.size(), want.size());
      const float diff = testing::MaxAbsDiff(got.data(), want.data(), got.size());
      EXPECT_LT(diff, bound) << c["name"] << " " << what << " " << DTypeName(dtype) << " chunk "
                             << chunk;
      std::printf("[ parity ] %-22s %s %-8s chunk %2d left %2d: max |diff| %.3g\n",
                  c["name"].get<std::string>().c_str(), what, DTypeName(dtype), chunk, left, diff);
    }
  }
}

// The subsampling stem with its first stage on the tensor cores
// (kernels::StemKernel::kTensorCores) against the recompute: stage 1 is
// float32-accurate either way, so the log-probs differ only where a stage-1
// value rounds the other way. (Models whose stem the tensor cores do not
// take compare the recompute with itself.) A wrong patch layout moves
// log-probs by whole units; a stage-1 value rounding the other way moves
// them by thousandths, which 16-bit storage downstream may grow somewhat.
TEST_P(GoldenParityTest, TensorCoreStemMatchesTheRecompute) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  ExpectVariantsAgree(FindCase(GetParam()), "tensor-core stem vs recompute", 0.1f,
                      [](const ConformerModel* model, DType dtype, int variant) {
                        return testing::MakeTestEncoder(model, 1, 16384, dtype,
                                                        variant == 0
                                                            ? kernels::StemKernel::kRecompute
                                                            : kernels::StemKernel::kTensorCores);
                      });
}

// The stem as an implicit GEMM (kernels::StemKernel::kImplicitGemm: stage 1
// written once, stage 2's patches gathered from it on the wgmma kernel)
// against the tensor cores' patches and cuBLASLt: the same stage-1 values,
// stage 2's sums in another order. (Elsewhere than Hopper, and for models
// whose stem it does not take, both variants are the tensor cores' path.)
// A patch gathered from the wrong pixel or tap moves log-probs by whole
// units.
TEST_P(GoldenParityTest, ImplicitGemmStemMatchesTheTensorCores) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  ExpectVariantsAgree(FindCase(GetParam()), "implicit-gemm stem vs tensor cores", 0.1f,
                      [](const ConformerModel* model, DType dtype, int variant) {
                        return testing::MakeTestEncoder(model, 1, 16384, dtype,
                                                        variant == 0
                                                            ? kernels::StemKernel::kTensorCores
                                                            : kernels::StemKernel::kImplicitGemm);
                      });
}

// The feed-forward modules as one kernel each (kernels::FeedForwardOp)
// against the separate ops: the same roundings, sums in another order.
// (Models the fused kernel does not take, d_model other than 256, compare
// the separate ops with themselves.) A lost hidden slice or a wrong row
// moves log-probs by whole units.
TEST_P(GoldenParityTest, FusedFeedForwardMatchesTheSeparateOps) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  ExpectVariantsAgree(FindCase(GetParam()), "fused vs separate feed-forward", 0.1f,
                      [](const ConformerModel* model, DType dtype, int variant) {
                        return testing::MakeTestEncoder(model, 1, 16384, dtype,
                                                        EncoderOptions{}.stem, variant == 1);
                      });
}

// The products on the project's wgmma kernel (kernels/wgmma_gemm.h; on
// Hopper, elsewhere cuBLASLt both times) against cuBLASLt's with the
// separate swish and norm passes: sums in another order, swish and the
// norms on float32 sums instead of rounded products. kFused: the swish and
// residual products (their epilogues take the norms); kWgmma: every one.
void ExpectGemmMatchesCublas(const std::string& name, kernels::GemmKernel gemm) {
  ExpectVariantsAgree(FindCase(name), kernels::GemmKernelName(gemm), 0.1f,
                      [gemm](const ConformerModel* model, DType dtype, int variant) {
                        return testing::MakeTestEncoder(
                            model, 1, 16384, dtype, EncoderOptions{}.stem, false,
                            variant == 0 ? kernels::GemmKernel::kCublas : gemm);
                      });
}
TEST_P(GoldenParityTest, FusedEpiloguesMatchCublas) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  ExpectGemmMatchesCublas(GetParam(), kernels::GemmKernel::kFused);
}
// kNorms: these small cohorts are below a wave of the kernel's tiles, so
// the norm op runs after cuBLASLt's product inside LinearOp.
TEST_P(GoldenParityTest, NormsPolicyMatchesCublas) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  ExpectGemmMatchesCublas(GetParam(), kernels::GemmKernel::kNorms);
}
TEST_P(GoldenParityTest, WgmmaProductsMatchCublas) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  ExpectGemmMatchesCublas(GetParam(), kernels::GemmKernel::kWgmma);
}
#endif

INSTANTIATE_TEST_SUITE_P(Cases, GoldenParityTest,
                         ::testing::Values("small_ln", "small_bn", "conformer_12x256",
                                           "conformer_12x256_bn", "sub6", "sub8", "late_offset",
                                           "wenet_converted"));

TEST(EncoderTest, PositionsBeyondTheTableAreProjected) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  const nlohmann::json c = FindCase("late_offset");
  // Everything beyond the table, then a table boundary inside the stream.
  CheckCase(c, 1, 256);
  CheckCase(c, 1, 5120);
}

TEST(EncoderTest, TwoThreadsMatch) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  CheckCase(FindCase("small_ln"), 2);
}

// Streams that start at different times (so they differ in offset and, with
// eviction, in history length) and end with short chunks, run as one
// cohort per step, each get what they get alone.
TEST(EncoderTest, CohortOfMixedOffsetsMatchesEachStreamAlone) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  const nlohmann::json c = FindCase("small_ln");
  auto model = ConformerModel::Load(c["model_dir"].get<std::string>());
  ASSERT_TRUE(model.ok());
  auto encoder = testing::MakeTestEncoder(model->get());
  ASSERT_TRUE(encoder.ok()) << encoder.status();
  Tensor all = LoadFeats(c["feats"], **model);
  for (int left : {-1, 2}) {
    const int chunk = 4, required = left < 0 ? -1 : chunk * left;
    // Stream k uses frames [k * 37, T - k * 53) and joins at step 3 * k.
    std::vector<Stream> streams;
    std::vector<std::vector<float>> alone;
    for (int k = 0; k < 4; ++k) {
      const int64_t begin = k * 37, end = all.dim(0) - k * 53;
      auto feats = Tensor::Empty({end - begin, 80}, DType::kFloat32);
      ASSERT_TRUE(CopyTensor(feats->view(), all.view().Slice(begin, end - begin)).ok());
      auto copy = Tensor::Empty({end - begin, 80}, DType::kFloat32);
      ASSERT_TRUE(CopyTensor(copy->view(), feats->view()).ok());
      alone.push_back(RunAlone(*encoder->encoder, **model, NewStream(**model, std::move(*copy), 0),
                               chunk, left));
      streams.push_back(NewStream(**model, std::move(*feats), 0));
    }
    int max_batch = 0;
    for (int step = 0;; ++step) {
      std::vector<int> active;
      std::vector<DenseChunkInput> inputs;
      for (int k = 0; k < 4; ++k) {
        if (step >= 3 * k && HasChunk(**model, streams[k])) {
          active.push_back(k);
          inputs.push_back(NextInput(**model, streams[k], chunk));
        }
      }
      if (active.empty()) break;
      max_batch = std::max<int>(max_batch, static_cast<int>(active.size()));
      auto outs = (*encoder)->ForwardChunks(inputs, required);
      ASSERT_TRUE(outs.ok()) << outs.status();
      for (size_t i = 0; i < active.size(); ++i)
        Absorb(**model, streams[active[i]], chunk, std::move((*outs)[i]));
    }
    EXPECT_EQ(max_batch, 4);
    for (int k = 0; k < 4; ++k) {
      ASSERT_EQ(streams[k].log_probs.size(), alone[k].size());
      EXPECT_LT(testing::MaxAbsDiff(streams[k].log_probs.data(), alone[k].data(),
                                    static_cast<int64_t>(alone[k].size())),
                1e-5f)
          << "stream " << k << " left " << left;
    }
  }
}

TEST(EncoderTest, RejectsBadInputs) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  auto model = ConformerModel::Load(FindCase("small_ln")["model_dir"].get<std::string>());
  ASSERT_TRUE(model.ok());
  auto encoder = testing::MakeTestEncoder(model->get());
  ASSERT_TRUE(encoder.ok()) << encoder.status();
  Stream s = NewStream(**model, *Tensor::Zeros({67, 80}, DType::kFloat32), 0);
  DenseChunkInput in = NextInput(**model, s, 16);
  auto short_feats = Tensor::Zeros({6, 80}, DType::kFloat32);
  DenseChunkInput bad = in;
  bad.feats = short_feats->view();
  EXPECT_EQ((*encoder)->ForwardChunk(bad, -1).status().code(), absl::StatusCode::kInvalidArgument);
  auto wrong_cache = Tensor::Zeros({3, 4, 2, 10}, DType::kFloat32);
  bad = in;
  bad.att_cache = wrong_cache->view();
  EXPECT_THAT(std::string((*encoder)->ForwardChunk(bad, -1).status().message()),
              ::testing::HasSubstr("att_cache"));
  auto cache = Tensor::Zeros({3, 4, 5, 48}, DType::kFloat32);
  bad = in;
  bad.att_cache = cache->view();
  bad.offset = 2;
  EXPECT_THAT(std::string((*encoder)->ForwardChunk(bad, -1).status().message()),
              ::testing::HasSubstr("offset 2"));
  EXPECT_FALSE((*encoder)->ForwardChunk(in, -5).ok());
  EncoderOptions no_table;
  no_table.max_table_positions = 0;
  EXPECT_FALSE(ConformerEncoder::Create(model->get(), encoder->ctx.get(), no_table).ok());
  EncoderOptions half;
  half.dtype = DType::kBFloat16;  // The CPU computes in float32 only.
  EXPECT_EQ(ConformerEncoder::Create(model->get(), encoder->ctx.get(), half).ok(),
            testing::TestDevice().is_cuda());
  EXPECT_TRUE((*encoder)->ForwardChunk(in, -1).ok());
}

}  // namespace
}  // namespace oasr::encoder
