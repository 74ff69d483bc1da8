// A steady-state engine tick allocates nothing on the heap: streams that are
// admitted, decoding chunk after chunk through the real model on its real
// caches (the cohort plan, the paged K/V pool and its tables, the declared
// conv state, the pooled decoder states), cost the scheduler thread no
// operator new between two chunks. Allocation is admission's, the front
// end's first pass over pushed audio, and the events' -- not the tick's.
// Counts every operator new of the process (tests/cache/alloc_counter.cc),
// hence its own binary.
//
// The encoder's per-forward buffers live in a fixed array and the model's
// arena, so the default prefix beam search tick allocates nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "scheduler/engine.h"
#include "scheduler/model_factory.h"
#include "tests/cache/alloc_counter.h"

namespace oasr::scheduler {
namespace {

using cache::testing::HeapAllocations;

const std::string kModelDir = std::string(OASR_ENCODER_FIXTURES) + "/small_ln/model";

std::vector<int16_t> Tones(double seconds, int rate) {
  std::vector<int16_t> out(static_cast<size_t>(seconds * rate));
  for (size_t i = 0; i < out.size(); ++i) {
    const double t = static_cast<double>(i) / rate;
    const double env = 0.5 + 0.5 * std::sin(2 * M_PI * 1.1 * t);
    out[i] = static_cast<int16_t>(
        6000 * env * (std::sin(2 * M_PI * 440 * t) + 0.5 * std::sin(2 * M_PI * 1250 * t)));
  }
  return out;
}

// Polls (without allocating) until the engine has decoded `n` chunks.
bool WaitChunks(const Engine& engine, int64_t n) {
  for (int i = 0; i < 60000; ++i) {
    if (engine.stats().chunks_processed.load() >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// `streams` streams of `audio`, all of it pushed at once; returns the heap
// allocations made between chunk `from` and chunk `to` of the whole engine
// (every stream still mid-audio then), and ends the streams.
int64_t AllocationsBetween(Engine& engine, const std::vector<int16_t>& audio, int streams,
                           int64_t from, int64_t to) {
  StreamRequest request;
  request.interim_results = false;          // No event per chunk: events allocate.
  request.decode.endpoint.enabled = false;  // One segment: no final result mid-stream.
  std::vector<std::unique_ptr<EngineStream>> handles;
  for (int i = 0; i < streams; ++i) {
    handles.push_back(std::move(*engine.OpenStream(request)));
    EXPECT_TRUE(handles.back()->PushAudio(audio).ok());
  }
  const int64_t base = engine.stats().chunks_processed.load();
  EXPECT_TRUE(WaitChunks(engine, base + from));
  const int64_t before = HeapAllocations();
  EXPECT_TRUE(WaitChunks(engine, base + to));
  const int64_t allocations = HeapAllocations() - before;
  for (auto& h : handles) EXPECT_TRUE(h->EndAudio().ok());
  for (auto& h : handles) {
    // finished() turns true when the last event is pushed, possibly before
    // it is popped: drain until the event that carries the finish.
    StreamEvent event;
    bool popped = true;
    for (int i = 0; i < 10000 && popped && !event.finish; ++i) {
      popped = h->outbox().WaitPop(&event, 60);
    }
    EXPECT_TRUE(popped) << "no final event within 60 s";
    EXPECT_EQ(event.finish, FinishReason::kStop);
  }
  return allocations;
}

TEST(EngineSteadyStateTest, ATickAllocatesNothingOnTheHeap) {
  ModelOptions options;
  options.model_dir = kModelDir;
  EngineConfig config;
  config.max_batch_size = 4;
  config.num_left_chunks = 2;  // Eviction every chunk, as in serving.
  auto engine = LoadEngine(options, config);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const double chunk_s =
      (*engine)->geometry().chunk_size * (*engine)->geometry().FrameShiftMs() / 1000.0;
  const std::vector<int16_t> audio = Tones(100 * chunk_s, 16000);  // About 100 chunks.
  constexpr int kStreams = 4;
  // The first pass sizes every decoder state's buffers for this audio; the
  // second gets those states back from the pool and must allocate nothing
  // from its 10th chunk per stream to its 90th.
  AllocationsBetween(**engine, audio, kStreams, 10 * kStreams, 90 * kStreams);
  const int64_t allocations =
      AllocationsBetween(**engine, audio, kStreams, 10 * kStreams, 90 * kStreams);
  EXPECT_EQ(allocations, 0) << "heap allocations in 80 steady-state chunks of " << kStreams
                            << " streams";
  // The counter itself works.
  const int64_t before = HeapAllocations();
  auto* probe = new std::vector<int>(3);
  delete probe;
  EXPECT_GE(HeapAllocations() - before, 2);
}

}  // namespace
}  // namespace oasr::scheduler
