// The engine's batched decode over a cohort's [rows, chunk, V] log-probs: the
// same results as decoding each stream alone, and a stream whose decode fails
// fails alone.
#include "scheduler/cohort_decode.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tests/decoder/test_util.h"

namespace oasr::scheduler {
namespace {

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

}  // namespace
}  // namespace oasr::scheduler
