// Proves that decoding reuses memory: once a state has decoded an utterance,
// decoding an utterance like it again after ResetState performs no heap
// allocation at all, chunk after chunk -- and so does a state recycled
// through the engine's DecoderStatePool, taking and giving back included.
// Counts every operator new of the process (hence its own test binary).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "decoder/ctc_decoder.h"
#include "decoder/decoder_state_pool.h"
#include "decoder/synthetic_log_probs.h"

// GCC's -Wmismatched-new-delete cannot see that operator new below is
// malloc-backed, so it flags the matching free().
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace oasr::decoder {
namespace {

constexpr int kV = 500;
constexpr int kChunk = 16;

std::shared_ptr<const SymbolTable> Units() {
  std::vector<std::string> units = {"<blank>"};
  for (int i = 1; i < kV; ++i) units.push_back("\xe2\x96\x81u" + std::to_string(i));
  return std::make_shared<const SymbolTable>(*SymbolTable::FromUnits(units));
}

// Allocations made while decoding `lp` chunk by chunk.
long AllocationsWhileDecoding(CtcDecoder& decoder, DecoderState& state, std::vector<float>& lp) {
  const int frames = static_cast<int>(lp.size() / kV);
  long total = 0;
  for (int t = 0; t < frames; t += kChunk) {
    const int n = std::min(kChunk, frames - t);
    TensorView view(lp.data() + t * kV, DType::kFloat32, Shape{n, kV}, Device::Cpu());
    const long before = g_allocations.load();
    const absl::Status status = decoder.DecodeChunk(state, view);
    total += g_allocations.load() - before;
    EXPECT_TRUE(status.ok());
  }
  return total;
}

TEST(DecoderAllocationTest, SteadyStateDecodingDoesNotAllocate) {
  for (const SearchMethod method : {SearchMethod::kPrefixBeam, SearchMethod::kGreedy}) {
    CtcDecoderConfig config;
    config.method = method;
    config.stream.endpoint.enabled = false;
    auto decoder = *CtcDecoder::Create(config, Units());
    auto state = decoder->CreateState();
    SyntheticLogProbsOptions gen;
    gen.num_frames = 1500;  // 60 s: long enough for the arenas to compact
    gen.vocab_size = kV;
    gen.peak = 4.0f;
    std::vector<float> lp = SyntheticLogProbs(gen);
    // Warm-up: the first utterance sizes every buffer.
    EXPECT_GT(AllocationsWhileDecoding(*decoder, *state, lp), 0);
    decoder->ResetState(*state);
    EXPECT_EQ(AllocationsWhileDecoding(*decoder, *state, lp), 0);
    // A different utterance of the same kind fits the same buffers too.
    gen.seed = 2;
    gen.num_frames = 1000;
    std::vector<float> other = SyntheticLogProbs(gen);
    decoder->ResetState(*state);
    EXPECT_EQ(AllocationsWhileDecoding(*decoder, *state, other), 0);
  }
}

// Streams as the engine runs them: a state taken from the pool at admission,
// decoded chunk by chunk, given back at the end. Once the pool's states have
// each decoded one utterance, none of it allocates.
TEST(DecoderAllocationTest, PooledStatesAreTakenDecodedAndGivenBackWithoutAllocating) {
  CtcDecoderConfig config;
  config.stream.endpoint.enabled = false;
  auto decoder = *CtcDecoder::Create(config, Units());
  DecoderStatePool pool(decoder.get(), 2);
  SyntheticLogProbsOptions gen;
  gen.num_frames = 1500;
  gen.vocab_size = kV;
  gen.peak = 4.0f;
  std::vector<float> lp = SyntheticLogProbs(gen);
  {
    // Warm-up: both pooled states size their buffers once.
    std::unique_ptr<DecoderState> a = pool.Acquire(), b = pool.Acquire();
    AllocationsWhileDecoding(*decoder, *a, lp);
    AllocationsWhileDecoding(*decoder, *b, lp);
    pool.Release(std::move(a));
    pool.Release(std::move(b));
  }
  for (int stream = 0; stream < 6; ++stream) {
    long before = g_allocations.load();
    std::unique_ptr<DecoderState> state = pool.Acquire();
    EXPECT_EQ(g_allocations.load() - before, 0) << "Acquire, stream " << stream;
    EXPECT_EQ(AllocationsWhileDecoding(*decoder, *state, lp), 0) << "stream " << stream;
    before = g_allocations.load();
    pool.Release(std::move(state));
    EXPECT_EQ(g_allocations.load() - before, 0) << "Release, stream " << stream;
  }
  EXPECT_EQ(pool.num_created(), 2);
}

TEST(DecoderAllocationTest, AllocationCounterWorks) {
  const long before = g_allocations.load();
  auto* p = new std::vector<int>(100);
  delete p;
  EXPECT_GE(g_allocations.load() - before, 2);
}

}  // namespace
}  // namespace oasr::decoder
