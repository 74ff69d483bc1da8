#include "cache/block_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "tests/cache/cache_test_util.h"

namespace oasr::cache {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class BlockPoolTest : public testing::CacheDeviceTest {
 protected:
  std::unique_ptr<BlockPool> MakePool(int scratch = 0) {
    absl::StatusOr<std::unique_ptr<BlockPool>> pool = BlockPool::Create(SmallConfig(), scratch);
    EXPECT_TRUE(pool.ok()) << pool.status();
    return pool.ok() ? std::move(*pool) : nullptr;
  }
};

TEST_P(BlockPoolTest, StorageIsTwoZeroedTensorsOfThePoolShape) {
  auto pool = MakePool(1);
  ASSERT_NE(pool, nullptr);
  const Shape shape{2, 65, 4, 2, 3};
  EXPECT_EQ(pool->k_pool().shape(), shape);
  EXPECT_EQ(pool->v_pool().shape(), shape);
  EXPECT_EQ(pool->k_pool().device(), device());
  EXPECT_EQ(pool->k_pool().dtype(), DType::kFloat32);
  for (float x : Read<float>(pool->k_pool())) ASSERT_EQ(x, 0.0f);
  for (float x : Read<float>(pool->v_pool())) ASSERT_EQ(x, 0.0f);
}

TEST_P(BlockPoolTest, BytesPerKvBlockMatchesTheRealAllocation) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    CacheConfig c = SmallConfig();
    c.dtype = dtype;
    auto pool = *BlockPool::Create(c, 1);
    const size_t allocated = pool->k_pool().nbytes() + pool->v_pool().nbytes();
    EXPECT_EQ(allocated, pool->bytes_per_kv_block() * pool->num_physical_blocks());
    EXPECT_EQ(pool->bytes_per_kv_block(), 2u * 2 * 4 * 2 * 3 * DTypeSize(dtype));
    EXPECT_EQ(c.pool_bytes(), pool->bytes_per_kv_block() * pool->num_blocks());
  }
}

TEST_P(BlockPoolTest, AllocatesFifoAndFreesBack) {
  auto pool = MakePool();
  std::vector<int32_t> a(3), b(2);
  ASSERT_TRUE(pool->Allocate(a).ok());
  ASSERT_TRUE(pool->Allocate(b).ok());
  EXPECT_EQ(a, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(b, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(pool->num_free_blocks(), 59);
  EXPECT_TRUE(pool->IsAllocated(1));
  ASSERT_TRUE(pool->Free(a).ok());
  EXPECT_FALSE(pool->IsAllocated(1));
  EXPECT_EQ(pool->num_free_blocks(), 62);
  // Freed ids go to the back of the queue.
  std::vector<int32_t> rest(59);
  ASSERT_TRUE(pool->Allocate(rest).ok());
  EXPECT_EQ(rest.front(), 5);
  EXPECT_EQ(rest.back(), 63);
  std::vector<int32_t> again(3);
  ASSERT_TRUE(pool->Allocate(again).ok());
  EXPECT_EQ(again, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_TRUE(pool->Allocate(std::span<int32_t>()).ok());
}

TEST_P(BlockPoolTest, ExhaustionNamesRequestedAndFreeAndChangesNothing) {
  auto pool = MakePool();
  std::vector<int32_t> most(60);
  ASSERT_TRUE(pool->Allocate(most).ok());
  std::vector<int32_t> five(5, -1);
  const absl::Status s = pool->Allocate(five);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("requested 5"), HasSubstr("4 free")));
  EXPECT_EQ(five, std::vector<int32_t>(5, -1));
  EXPECT_EQ(pool->num_free_blocks(), 4);
  std::vector<int32_t> four(4);
  ASSERT_TRUE(pool->Allocate(four).ok());
  EXPECT_EQ(four, (std::vector<int32_t>{60, 61, 62, 63}));
}

TEST_P(BlockPoolTest, FreeRejectsDoubleFreeScratchAndOutOfRangeAtomically) {
  auto pool = MakePool(1);
  EXPECT_EQ(pool->scratch_block(), 64);
  EXPECT_TRUE(pool->IsScratchBlock(64));
  std::vector<int32_t> ids(4);
  ASSERT_TRUE(pool->Allocate(ids).ok());
  const std::vector<std::vector<int32_t>> bad = {{0, 1, 64}, {0, 70}, {0, -1}, {2, 2}, {3, 9}};
  const absl::StatusCode codes[] = {
      absl::StatusCode::kInvalidArgument, absl::StatusCode::kInvalidArgument,
      absl::StatusCode::kInvalidArgument, absl::StatusCode::kFailedPrecondition,
      absl::StatusCode::kFailedPrecondition};
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(pool->Free(bad[i]).code(), codes[i]) << i;
    // Nothing was freed, not even the valid ids before the bad one.
    EXPECT_EQ(pool->num_free_blocks(), 60) << i;
    for (int32_t id : ids) EXPECT_TRUE(pool->IsAllocated(id)) << i;
  }
  EXPECT_THAT(std::string(pool->Free(std::vector<int32_t>{64}).message()), HasSubstr("scratch"));
  ASSERT_TRUE(pool->Free(ids).ok());
  EXPECT_THAT(std::string(pool->Free(std::vector<int32_t>{1}).message()), HasSubstr("double free"));
  // The scratch block is never handed out.
  std::vector<int32_t> all(64);
  ASSERT_TRUE(pool->Allocate(all).ok());
  EXPECT_EQ(std::count(all.begin(), all.end(), 64), 0);
}

TEST_P(BlockPoolTest, ViewsAddressLayerAndBlock) {
  auto pool = MakePool(1);
  const KvView layer = pool->GetKvView(1);
  EXPECT_EQ(layer.k.shape(), (Shape{65, 4, 2, 3}));
  const KvView block = pool->GetKvBlockView(1, 7);
  EXPECT_EQ(block.v.shape(), (Shape{4, 2, 3}));
  const size_t per_block = 4 * 2 * 3 * sizeof(float);
  EXPECT_EQ(static_cast<char*>(block.k.data()),
            static_cast<char*>(pool->k_pool().data()) + (65 + 7) * per_block);
  EXPECT_EQ(static_cast<char*>(block.v.data()),
            static_cast<char*>(pool->v_pool().data()) + (65 + 7) * per_block);
  // A write through a block view lands there and nowhere else.
  Write<float>(block.k, std::vector<float>(24, 2.5f));
  const std::vector<float> all = Read<float>(pool->k_pool());
  for (size_t i = 0; i < all.size(); ++i) {
    const bool inside = i >= (65 + 7) * 24 && i < (65 + 8) * 24;
    ASSERT_EQ(all[i], inside ? 2.5f : 0.0f) << i;
  }
}

TEST_P(BlockPoolTest, ConcurrentAllocateAndFreeKeepTheFreeListExact) {
  auto pool = MakePool();
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, &failed, t] {
      std::vector<int32_t> ids(3 + t);
      for (int i = 0; i < 2000; ++i) {
        if (!pool->Allocate(ids).ok()) continue;  // Others may hold the rest.
        if (!pool->Free(ids).ok()) failed = true;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(failed);
  EXPECT_EQ(pool->num_free_blocks(), 64);
  std::vector<int32_t> all(64);
  ASSERT_TRUE(pool->Allocate(all).ok());
  EXPECT_EQ(std::set<int32_t>(all.begin(), all.end()).size(), 64u);
}

TEST_P(BlockPoolTest, CreateNeedsAResolvedValidConfig) {
  CacheConfig c = SmallConfig();
  c.max_num_blocks = 0;
  EXPECT_THAT(std::string(BlockPool::Create(c).status().message()),
              HasSubstr("ResolveCacheConfig"));
  c = SmallConfig();
  c.chunk_size = 5;
  EXPECT_EQ(BlockPool::Create(c).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockPool::Create(SmallConfig(), -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

OASR_INSTANTIATE_CACHE_DEVICE_TEST(BlockPoolTest);

}  // namespace
}  // namespace oasr::cache
