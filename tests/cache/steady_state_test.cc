// The engine's per-step hot path through the cache layer allocates nothing on
// the heap in the steady state, and on CUDA refreshes the device tables with
// exactly one copy per step and never waits for the GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cache/cnn_cache_manager.h"
#include "cache/stream_context.h"
#include "tests/cache/alloc_counter.h"
#include "tests/cache/cache_test_util.h"

#if OASR_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace oasr::cache {
namespace {

class SteadyStateTest : public testing::CacheDeviceTest {
 protected:
  void SetUp() override {
    testing::CacheDeviceTest::SetUp();
    if (IsSkipped()) return;
    config_ = SmallConfig();
    config_.max_batch_size = 64;
    config_.num_left_chunks = 2;
    config_.max_num_blocks = config_.min_pool_blocks();
    pool_ = *BlockPool::Create(config_, 1);
    att_ = *AttentionCacheManager::Create(pool_.get(), 1);
    cnn_ = *CnnCacheManager::Create(config_, 1);
    states_ = *SlotStateCache::Create({{"tail", Shape{3, 2}, 0, false, DType::kFloat32}},
                                      config_.max_batch_size + 1, device());
    slots_ = std::make_unique<StreamSlotPool>(config_.max_batch_size, 1);
  }

  CacheConfig config_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<AttentionCacheManager> att_;
  std::unique_ptr<CnnCacheManager> cnn_;
  std::unique_ptr<SlotStateCache> states_;
  std::unique_ptr<StreamSlotPool> slots_;
};

TEST_P(SteadyStateTest, TheChunkLoopPerformsNoHeapAllocation) {
  const CacheManagers managers{slots_.get(), att_.get(), states_.get()};
  // One stream through the StreamContext facade, 63 as a cohort addressed by
  // slot, as the engine does.
  StreamContext ctx = *StreamContext::Allocate(0, managers, stream());
  std::vector<int32_t> cohort_slots;
  for (int i = 0; i < 63; ++i) {
    const int slot = *slots_->Acquire();
    ASSERT_TRUE(att_->AllocateSlot(slot, stream()).ok());
    ASSERT_TRUE(cnn_->states().ZeroSlot(slot, stream()).ok());
    cohort_slots.push_back(slot);
  }
  const int B = static_cast<int>(cohort_slots.size());
  const std::vector<int32_t> one_slot = {ctx.slot()};
  Tensor cnn_batch = *Tensor::Zeros(cnn_->CohortShape(B), config_.dtype, device());
  Tensor cnn_one = *Tensor::Zeros(cnn_->CohortShape(1), config_.dtype, device());
  Tensor tails = *Tensor::Zeros(states_->CohortShape(0, B), DType::kFloat32, device());

  bool ok = true;
  auto step = [&] {
    // The cohort step: reserve, mirror, views, forward (elsewhere), commit.
    ok &= att_->PrepareChunksBatched(cohort_slots).ok();
    ok &= att_->PadCohort(64).ok();
    att_->UpdateDeviceMirror(stream());
    for (int l = 0; l < config_.num_layers; ++l) ok &= !att_->GetPagedKvCache(l).k_cache.empty();
    ok &= att_->CachedFrames(cohort_slots).ok();
    const SlotStateView cnn_view = cnn_->states().View(0, cohort_slots);
    ok &= cnn_view.Gather(cnn_batch.view(), stream()).ok();
    const SlotStateView tail_view = states_->View(0, cohort_slots);
    ok &= tail_view.Gather(tails.view(), stream()).ok();
    for (const int32_t slot : cohort_slots) {
      ok &= att_->GetPagedStateViews(slot).ok();
      ok &= !*att_->AtCapacity(slot);
      ok &= att_->CommitChunkPaged(slot, config_.chunk_size).ok();
    }
    ok &= cnn_view.Scatter(cnn_batch.view(), stream()).ok();
    ok &= tail_view.Scatter(tails.view(), stream()).ok();
    // The single stream, through its context.
    ok &= ctx.PrepareChunk().ok();
    ctx.UpdateDeviceMirror();
    ok &= ctx.GetPagedStateViews().ok();
    ok &= cnn_->states().Gather(0, one_slot, cnn_one.view(), stream()).ok();
    ok &= ctx.CommitChunkPaged(config_.chunk_size).ok();
    ok &= cnn_->states().Scatter(0, one_slot, cnn_one.view(), stream()).ok();
    ok &= ctx.CachedFrames().ok();
  };
  for (int i = 0; i < 8; ++i) step();  // Warm-up: eviction reaches its steady state.
  ASSERT_TRUE(ok);
  const int64_t copies_before = att_->mirror().num_copies();
  const int64_t allocations_before = testing::HeapAllocations();
  constexpr int kSteps = 200;
  for (int i = 0; i < kSteps; ++i) step();
  const int64_t allocations = testing::HeapAllocations() - allocations_before;
  ASSERT_TRUE(ok);
  EXPECT_EQ(allocations, 0) << "heap allocations in " << kSteps << " steady-state steps";
  // Two steps per iteration (the cohort's and the context's): one copy each on CUDA.
  EXPECT_EQ(att_->mirror().num_copies() - copies_before, on_cuda() ? 2 * kSteps : 0);
  EXPECT_EQ(*att_->CachedFrames(cohort_slots), config_.retained_frames());
  // The counter itself works.
  const int64_t before = testing::HeapAllocations();
  std::vector<int>* probe = new std::vector<int>(3);
  delete probe;
  EXPECT_GE(testing::HeapAllocations() - before, 2);
}

#if OASR_WITH_CUDA
// A stream gate: the host function blocks the GPU stream until released (or
// 30 s pass, which then fails the test).
struct Gate {
  std::atomic<bool> open{false};
  std::atomic<bool> timed_out{false};
  static void Wait(void* arg) {
    auto* gate = static_cast<Gate*>(arg);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!gate->open.load()) {
      if (std::chrono::steady_clock::now() > deadline) {
        gate->timed_out = true;
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
};
#endif

TEST_P(SteadyStateTest, StepsNeverWaitForTheGpu) {
  if (!on_cuda()) GTEST_SKIP() << "the CPU mirror involves no device";
#if OASR_WITH_CUDA
  std::vector<int32_t> slots(32);
  for (int32_t& slot : slots) {
    slot = *slots_->Acquire();
    ASSERT_TRUE(att_->AllocateSlot(slot, stream()).ok());
  }
  att_->UpdateDeviceMirror(stream());
  Sync();
  // Block the stream, then run as many steps as there are staging buffers:
  // if any step synchronised with the stream it would wait for the gate,
  // which opens only after the steps return.
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(stream(), &Gate::Wait, &gate), cudaSuccess);
  for (int s = 0; s < BlockTableMirror::kStagingDepth; ++s) {
    ASSERT_TRUE(att_->PrepareChunksBatched(slots).ok());
    att_->UpdateDeviceMirror(stream());
    for (int32_t slot : slots) ASSERT_TRUE(att_->CommitChunkPaged(slot, 4).ok());
  }
  gate.open = true;
  Sync();
  EXPECT_FALSE(gate.timed_out) << "a step waited for the GPU stream";
  // And what the GPU finally read is the last step's tables.
  att_->UpdateDeviceMirror(stream());
  EXPECT_EQ(Read<int32_t>(att_->mirror().block_table()),
            Read<int32_t>(att_->mirror().host_block_table()));
#endif
}

OASR_INSTANTIATE_CACHE_DEVICE_TEST(SteadyStateTest);

}  // namespace
}  // namespace oasr::cache
