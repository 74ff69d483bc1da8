// The engine's batched decode over a cohort's [rows, chunk, V] log-probs: the
// same results as decoding each stream alone, and a stream whose decode fails
// fails alone. The pruned decode (candidates selected on the test device:
// the CPU, or CUDA in the _gpu_ build) gives exactly the full rows' results.
#include "scheduler/cohort_decode.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tests/decoder/test_util.h"

#ifndef OASR_TEST_CUDA
#define OASR_TEST_CUDA 0
#endif

namespace oasr::scheduler {
namespace {

Device TestDevice() { return OASR_TEST_CUDA ? Device::Cuda(0) : Device::Cpu(); }

constexpr int kV = 8;
constexpr int64_t kT = 4;  // Frames in a full chunk.

std::unique_ptr<decoder::CtcDecoder> MakeDecoder() {
  decoder::CtcDecoderConfig config;
  config.stream.endpoint.enabled = false;
  auto dec = decoder::CtcDecoder::Create(config, decoder::testing::NumberedUnits(kV));
  EXPECT_TRUE(dec.ok()) << dec.status();
  return std::move(*dec);
}

// `frames` rows of random log-probabilities.
std::vector<float> RandomRows(std::mt19937& rng, int64_t frames) {
  std::uniform_real_distribution<float> p(0.01f, 1.0f);
  std::vector<std::vector<float>> rows(frames, std::vector<float>(kV));
  for (auto& row : rows) {
    for (float& x : row) x = p(rng);
  }
  return decoder::testing::LogRows(rows);
}

struct Cohort {
  std::vector<int32_t> frames;              // Per row.
  std::vector<std::vector<float>> per_row;  // Each row's [frames, V].
  std::vector<float> padded;                // [rows, kT, V]: row i at i * kT * V.
  TensorView View() {
    return TensorView(padded.data(), DType::kFloat32, {static_cast<int64_t>(frames.size()), kT, kV},
                      Device::Cpu());
  }
};

Cohort MakeCohort(std::mt19937& rng, std::vector<int32_t> frames) {
  Cohort c;
  c.frames = std::move(frames);
  // Padding frames are garbage the decoder must not read.
  c.padded.assign(c.frames.size() * kT * kV, std::nanf(""));
  for (size_t i = 0; i < c.frames.size(); ++i) {
    c.per_row.push_back(RandomRows(rng, c.frames[i]));
    std::copy(c.per_row.back().begin(), c.per_row.back().end(), c.padded.begin() + i * kT * kV);
  }
  return c;
}

void ExpectSameTranscript(const decoder::CtcDecoder& dec, const decoder::DecoderState& got,
                          const decoder::DecoderState& want, size_t row) {
  const decoder::DecodeResult a = dec.PartialResult(got), b = dec.PartialResult(want);
  ASSERT_EQ(a.nbest.size(), b.nbest.size()) << "row " << row;
  for (size_t n = 0; n < a.nbest.size(); ++n) {
    EXPECT_EQ(a.nbest[n].tokens, b.nbest[n].tokens) << "row " << row << " hyp " << n;
    EXPECT_FLOAT_EQ(a.nbest[n].score, b.nbest[n].score) << "row " << row << " hyp " << n;
  }
  EXPECT_EQ(dec.GetStatus(got).frames_decoded, dec.GetStatus(want).frames_decoded) << "row " << row;
}

TEST(CohortDecodeTest, FullAndShortChunksMatchDecodingAlone) {
  if (OASR_TEST_CUDA) GTEST_SKIP() << "host decoding; the CPU build runs it";
  auto dec = MakeDecoder();
  std::mt19937 rng(3);
  // Short chunks (a stream's last) anywhere.
  const std::vector<int32_t> frames = {4, 4, 2, 4, 1, 3, 4, 4};
  std::vector<std::unique_ptr<decoder::DecoderState>> batched, alone;
  std::vector<decoder::DecoderState*> states;
  for (size_t i = 0; i < frames.size(); ++i) {
    batched.push_back(dec->CreateState());
    alone.push_back(dec->CreateState());
    states.push_back(batched.back().get());
  }
  for (int chunk = 0; chunk < 3; ++chunk) {
    Cohort c = MakeCohort(rng, frames);
    std::vector<absl::Status> status(frames.size());
    ASSERT_TRUE(DecodeCohort(*dec, states, c.frames, c.View(), nullptr, status).ok());
    for (size_t i = 0; i < frames.size(); ++i) {
      EXPECT_TRUE(status[i].ok()) << "row " << i << ": " << status[i];
      ASSERT_TRUE(dec->DecodeChunk(*alone[i], decoder::testing::View(c.per_row[i], kV)).ok());
    }
  }
  for (size_t i = 0; i < frames.size(); ++i) ExpectSameTranscript(*dec, *batched[i], *alone[i], i);
}

TEST(CohortDecodeTest, AFailingStreamFailsAloneAndSkippedRowsAreUntouched) {
  if (OASR_TEST_CUDA) GTEST_SKIP() << "host decoding; the CPU build runs it";
  auto dec = MakeDecoder();
  std::mt19937 rng(5);
  const std::vector<int32_t> frames = {4, 4, 4, 2, 4};
  std::vector<std::unique_ptr<decoder::DecoderState>> batched, alone;
  for (size_t i = 0; i < frames.size(); ++i) {
    batched.push_back(dec->CreateState());
    alone.push_back(dec->CreateState());
  }
  // Row 1 has finished (DecodeChunks refuses the whole run for it); row 3 is
  // skipped (its commit failed in the engine), though its frames are there.
  ASSERT_TRUE(dec->FinalizeStream(*batched[1]).ok());
  std::vector<decoder::DecoderState*> states = {batched[0].get(), batched[1].get(),
                                                batched[2].get(), nullptr, batched[4].get()};
  Cohort c = MakeCohort(rng, frames);
  std::vector<absl::Status> status(frames.size(), absl::InternalError("unset"));
  ASSERT_TRUE(DecodeCohort(*dec, states, c.frames, c.View(), nullptr, status).ok());
  EXPECT_EQ(status[1].code(), absl::StatusCode::kFailedPrecondition) << status[1];
  EXPECT_TRUE(status[3].ok()) << status[3];
  EXPECT_EQ(dec->GetStatus(*batched[3]).frames_decoded, 0);
  for (size_t i : {0, 2, 4}) {
    EXPECT_TRUE(status[i].ok()) << "row " << i << ": " << status[i];
    ASSERT_TRUE(dec->DecodeChunk(*alone[i], decoder::testing::View(c.per_row[i], kV)).ok());
    ExpectSameTranscript(*dec, *batched[i], *alone[i], i);
  }
}

TEST(CohortDecodeTest, DeviceLogProbsNeedAContext) {
  if (OASR_TEST_CUDA) GTEST_SKIP() << "host decoding; the CPU build runs it";
  auto dec = MakeDecoder();
  std::mt19937 rng(7);
  Cohort c = MakeCohort(rng, {4});
  auto state = dec->CreateState();
  std::vector<decoder::DecoderState*> states = {state.get()};
  std::vector<absl::Status> status(1);
  const TensorView on_gpu(c.padded.data(), DType::kFloat32, {1, kT, kV}, Device::Cuda(0));
  EXPECT_EQ(DecodeCohort(*dec, states, c.frames, on_gpu, nullptr, status).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dec->GetStatus(*state).frames_decoded, 0);
  const TensorView wrong_vocab(c.padded.data(), DType::kFloat32, {1, kT, kV - 1}, Device::Cpu());
  EXPECT_EQ(DecodeCohort(*dec, states, c.frames, wrong_vocab, nullptr, status).code(),
            absl::StatusCode::kInvalidArgument);
}

// Every result field two states' decodes can differ in, compared exactly.
void ExpectIdentical(const decoder::DecodeResult& a, const decoder::DecodeResult& b,
                     const std::string& what) {
  EXPECT_EQ(a.is_final, b.is_final) << what;
  EXPECT_EQ(a.start_frame, b.start_frame) << what;
  EXPECT_EQ(a.end_frame, b.end_frame) << what;
  EXPECT_EQ(a.endpoint_rule, b.endpoint_rule) << what;
  ASSERT_EQ(a.nbest.size(), b.nbest.size()) << what;
  for (size_t n = 0; n < a.nbest.size(); ++n) {
    const decoder::Hypothesis &x = a.nbest[n], &y = b.nbest[n];
    EXPECT_EQ(x.tokens, y.tokens) << what << " hyp " << n;
    EXPECT_EQ(x.token_frames, y.token_frames) << what << " hyp " << n;
    EXPECT_EQ(x.token_confidences, y.token_confidences) << what << " hyp " << n;
    EXPECT_EQ(x.score, y.score) << what << " hyp " << n;
    EXPECT_EQ(x.viterbi_score, y.viterbi_score) << what << " hyp " << n;
  }
}

struct PrunedCase {
  const char* name;
  decoder::SearchMethod method;
  int first_beam = 10;      // Units expanded per frame (beam search).
  float blank_skip = 0.0f;  // Blank skipping threshold (0: off).
  bool endpoint = false;
};

class PrunedDecodeTest : public ::testing::TestWithParam<PrunedCase> {};

INSTANTIATE_TEST_SUITE_P(
    Searches, PrunedDecodeTest,
    ::testing::Values(PrunedCase{"greedy", decoder::SearchMethod::kGreedy},
                      PrunedCase{"beam_first3", decoder::SearchMethod::kPrefixBeam, 3},
                      PrunedCase{"beam_all_units", decoder::SearchMethod::kPrefixBeam, 64},
                      PrunedCase{"beam_blank_skip_endpoints", decoder::SearchMethod::kPrefixBeam,
                                 4, 0.6f, true},
                      PrunedCase{"greedy_endpoints", decoder::SearchMethod::kGreedy, 10, 0.0f,
                                 true}),
    [](const ::testing::TestParamInfo<PrunedCase>& info) { return info.param.name; });

TEST_P(PrunedDecodeTest, CandidatesDecodeExactlyAsTheFullRows) {
  const Device device = TestDevice();
  if (device.is_cuda() && CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const PrunedCase& pc = GetParam();
  decoder::CtcDecoderConfig config;
  config.method = pc.method;
  config.search.beam_size = 4;
  config.search.first_beam_size = pc.first_beam;
  config.search.blank_skip_threshold = pc.blank_skip;
  config.stream.endpoint.enabled = pc.endpoint;
  // Short rules, so that segments end inside the test's few chunks.
  config.stream.endpoint.blank_threshold = 0.5f;
  for (decoder::EndpointRule& rule : config.stream.endpoint.rules) {
    rule.min_trailing_silence_ms = 80;
    rule.min_utterance_length_ms = 0;
  }
  auto created = decoder::CtcDecoder::Create(config, decoder::testing::NumberedUnits(kV));
  ASSERT_TRUE(created.ok()) << created.status();
  decoder::CtcDecoder& dec = **created;
  ExecutionContextOptions o;
  o.device = device;
  o.cpu_threads = 3;  // 70 rows decode in parts on the host threads.
  auto ctx = ExecutionContext::Create(o);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  std::vector<int32_t> frames;
  for (int i = 0; i < 70; ++i) frames.push_back(std::vector<int32_t>{4, 4, 2, 4, 1, 3}[i % 6]);
  const int rows = static_cast<int>(frames.size());
  auto candidates = CohortCandidates::Create(rows, kT, dec.candidates_per_frame(), 0, device);
  ASSERT_TRUE(candidates.ok()) << candidates.status();
  std::vector<std::unique_ptr<decoder::DecoderState>> full, pruned;
  std::vector<decoder::DecoderState*> full_states, pruned_states;
  for (int i = 0; i < rows; ++i) {
    full.push_back(dec.CreateState());
    pruned.push_back(dec.CreateState());
    full_states.push_back(full.back().get());
    pruned_states.push_back(pruned.back().get());
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> level(1, 6);
  for (int chunk = 0; chunk < 12; ++chunk) {
    Cohort c = MakeCohort(rng, frames);
    // Quantised probabilities make exact ties, which both ways must break
    // towards the lower unit; blank-heavy chunks make endpoints; one frame
    // of NaN carries no evidence.
    for (int i = 0; i < rows; ++i) {
      for (int32_t t = 0; t < frames[i]; ++t) {
        std::vector<std::vector<float>> row(1, std::vector<float>(kV));
        for (float& x : row[0]) x = static_cast<float>(level(rng));
        if (chunk % 3 == 2) row[0][0] = 60.0f;
        const std::vector<float> lp = decoder::testing::LogRows(row);
        std::copy(lp.begin(), lp.end(), c.padded.begin() + (i * kT + t) * kV);
      }
    }
    if (chunk == 5) std::fill_n(c.padded.begin() + (2 * kT + 1) * kV, kV, std::nanf(""));
    std::vector<absl::Status> status(rows), pruned_status(rows);
    ASSERT_TRUE(DecodeCohort(dec, full_states, c.frames, c.View(), nullptr, status).ok());
    auto on_device = Tensor::Empty({rows, kT, kV}, DType::kFloat32, device);
    ASSERT_TRUE(on_device.ok()) << on_device.status();
    ASSERT_TRUE(CopyTensor(on_device->view(), c.View()).ok());
    ASSERT_TRUE(candidates->Select(**ctx, on_device->view(), rows).ok());
    ASSERT_TRUE(
        DecodeCohortPruned(dec, pruned_states, c.frames, *candidates, ctx->get(), pruned_status)
            .ok());
    for (int i = 0; i < rows; ++i) {
      ASSERT_TRUE(status[i].ok()) << status[i];
      ASSERT_TRUE(pruned_status[i].ok()) << pruned_status[i];
      const std::string what = "chunk " + std::to_string(chunk) + " row " + std::to_string(i);
      ExpectIdentical(dec.PartialResult(*pruned[i]), dec.PartialResult(*full[i]), what);
      const auto a = dec.TakeFinalResults(*pruned[i]), b = dec.TakeFinalResults(*full[i]);
      ASSERT_EQ(a.size(), b.size()) << what;
      for (size_t f = 0; f < a.size(); ++f) ExpectIdentical(a[f], b[f], what + " final");
    }
  }
  if (pc.endpoint) {
    // The endpoint rules fired (so UpdateBlank was compared, not idle).
    EXPECT_GT(dec.GetStatus(*full[0]).segment, 0);
  }
}

TEST(CohortCandidatesTest, RefusesWhatTopKCannotSelect) {
  EXPECT_EQ(CohortCandidates::Create(4, 4, 65, 0, Device::Cpu()).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto c = CohortCandidates::Create(2, kT, 3, 0, Device::Cpu());
  ASSERT_TRUE(c.ok());
  ExecutionContextOptions o;
  auto ctx = ExecutionContext::Create(o);
  ASSERT_TRUE(ctx.ok());
  std::vector<float> lp(3 * kT * kV, 0.0f);
  const TensorView three(lp.data(), DType::kFloat32, {3, kT, kV}, Device::Cpu());
  EXPECT_TRUE(c->Select(**ctx, three, 2).ok());
  EXPECT_EQ(c->Select(**ctx, three, 3).code(), absl::StatusCode::kInvalidArgument);
  const TensorView wrong_frames(lp.data(), DType::kFloat32, {2, kT + 1, kV}, Device::Cpu());
  EXPECT_EQ(c->Select(**ctx, wrong_frames, 2).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CohortCandidatesTest, HostCopiesOnTheCpuKeepEachTicksCandidates) {
  // An engine overlapping ticks on the CPU decodes one cohort from its host
  // copy while the next cohort's candidates are selected: the copies must
  // be the CPU's own, not views of the selection.
  auto c = CohortCandidates::Create(2, kT, 1, 0, Device::Cpu(), /*host_copies=*/true);
  ASSERT_TRUE(c.ok()) << c.status();
  ExecutionContextOptions o;
  auto ctx = ExecutionContext::Create(o);
  ASSERT_TRUE(ctx.ok());
  auto select = [&](int unit, int buffer) {
    std::vector<float> lp(2 * kT * kV, -5.0f);
    for (int f = 0; f < 2 * kT; ++f) lp[f * kV + unit] = -0.1f;
    const TensorView view(lp.data(), DType::kFloat32, {2, kT, kV}, Device::Cpu());
    ASSERT_TRUE(c->Select(**ctx, view, 2).ok());
    ASSERT_TRUE(c->EnqueueDownload(**ctx, 2, buffer).ok());
  };
  select(3, 0);
  select(5, 1);
  select(7, 0);  // Buffer 1 still holds the second selection.
  for (int buffer : {0, 1}) {
    const decoder::PrunedChunks h = c->host(2, buffer);
    for (int f = 0; f < 2 * kT; ++f) {
      EXPECT_EQ(h.ids[f], buffer == 0 ? 7 : 5) << "copy " << buffer << " frame " << f;
      EXPECT_FLOAT_EQ(h.log_probs[f], -0.1f);
      EXPECT_FLOAT_EQ(h.blank[f], -5.0f);
    }
  }
  // Without host copies the CPU's candidates are read where selected.
  auto shared = CohortCandidates::Create(2, kT, 1, 0, Device::Cpu());
  ASSERT_TRUE(shared.ok());
  EXPECT_TRUE(shared->EnqueueDownload(**ctx, 2, 1).ok());
  EXPECT_EQ(shared->host(2, 0).ids, shared->host(2, 1).ids);
}

}  // namespace
}  // namespace oasr::scheduler
