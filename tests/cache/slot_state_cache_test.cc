#include "cache/slot_state_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "cache/cnn_cache_manager.h"
#include "tests/cache/cache_test_util.h"

namespace oasr::cache {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class SlotStateCacheTest : public testing::CacheDeviceTest {
 protected:
  std::vector<StreamStateSpec> Specs() const {
    return {
        {"tail", Shape{3, 2}, 0, false, DType::kFloat32},     // (slots, 3, 2)
        {"conv", Shape{2, 3, 2}, 1, false, DType::kFloat32},  // (2, slots, 3, 2)
        {"prompt", Shape{1}, 1, true, DType::kInt32},         // (1, slots)
    };
  }
  // A dense cohort tensor of `shape` with distinct values starting at `base`.
  template <typename T>
  std::vector<T> Iota(const Shape& shape, T base) const {
    std::vector<T> v(shape.numel());
    std::iota(v.begin(), v.end(), base);
    return v;
  }
};

TEST_P(SlotStateCacheTest, StoresOneZeroedTensorPerSpecWithTheSlotAxisWhereDeclared) {
  auto cache = *SlotStateCache::Create(Specs(), 5, device());
  EXPECT_EQ(cache->buffer(0).shape(), (Shape{5, 3, 2}));
  EXPECT_EQ(cache->buffer(1).shape(), (Shape{2, 5, 3, 2}));
  EXPECT_EQ(cache->buffer(2).shape(), (Shape{1, 5}));
  EXPECT_EQ(cache->buffer(2).dtype(), DType::kInt32);
  EXPECT_EQ(cache->buffer(1).device(), device());
  EXPECT_EQ(*cache->SpecIndex("conv"), 1);
  EXPECT_EQ(cache->SpecIndex("nope").status().code(), absl::StatusCode::kNotFound);
  for (int i = 0; i < 2; ++i)
    for (float x : Read<float>(cache->buffer(i))) ASSERT_EQ(x, 0.0f);
  EXPECT_EQ(cache->CohortShape(1, 3), (Shape{2, 3, 3, 2}));
}

TEST_P(SlotStateCacheTest, GatherAndScatterMoveACohortInPlace) {
  auto cache = *SlotStateCache::Create(Specs(), 6, device());
  for (const std::vector<int32_t>& slots :
       {std::vector<int32_t>{4, 1, 2}, std::vector<int32_t>{0, 1, 2, 3}, std::vector<int32_t>{5}}) {
    const int64_t n = static_cast<int64_t>(slots.size());
    const Shape shape = cache->CohortShape(1, n);
    Tensor in = *Tensor::Empty(shape, DType::kFloat32, device());
    const std::vector<float> values = Iota<float>(shape, 100.0f * slots[0]);
    Write<float>(in.view(), values);
    ASSERT_TRUE(cache->Scatter(1, slots, in.view(), stream()).ok());
    // The stored tensor holds each row at its slot...
    const std::vector<float> stored = Read<float>(cache->buffer(1));
    for (int64_t o = 0; o < 2; ++o)
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < 6; ++i)
          ASSERT_EQ(stored[(o * 6 + slots[b]) * 6 + i], values[(o * n + b) * 6 + i]);
    // ...and gathering the same cohort returns exactly what was scattered.
    Tensor out = *Tensor::Zeros(shape, DType::kFloat32, device());
    ASSERT_TRUE(cache->Gather(1, slots, out.view(), stream()).ok());
    EXPECT_EQ(Read<float>(out.view()), values);
  }
}

TEST_P(SlotStateCacheTest, ResetKeepsPersistentStatesAndZeroSlotClearsAll) {
  auto cache = *SlotStateCache::Create(Specs(), 4, device());
  const std::vector<int32_t> slots = {0, 1, 2, 3};
  Tensor tail = *Tensor::Empty(cache->CohortShape(0, 4), DType::kFloat32, device());
  Write<float>(tail.view(), std::vector<float>(24, 1.5f));
  Tensor prompt = *Tensor::Empty(cache->CohortShape(2, 4), DType::kInt32, device());
  Write<int32_t>(prompt.view(), {7, 8, 9, 10});
  ASSERT_TRUE(cache->Scatter(0, slots, tail.view(), stream()).ok());
  ASSERT_TRUE(cache->View(2, slots).Scatter(prompt.view(), stream()).ok());

  ASSERT_TRUE(cache->ResetSlot(2, stream()).ok());
  std::vector<float> t = Read<float>(cache->buffer(0));
  for (int i = 0; i < 24; ++i) EXPECT_EQ(t[i], i / 6 == 2 ? 0.0f : 1.5f) << i;
  EXPECT_EQ(Read<int32_t>(cache->buffer(2)), (std::vector<int32_t>{7, 8, 9, 10}));

  ASSERT_TRUE(cache->ZeroSlot(1, stream()).ok());
  EXPECT_EQ(Read<int32_t>(cache->buffer(2)), (std::vector<int32_t>{7, 0, 9, 10}));
  t = Read<float>(cache->buffer(0));
  for (int i = 6; i < 12; ++i) EXPECT_EQ(t[i], 0.0f);
  EXPECT_EQ(cache->ZeroSlot(4, stream()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache->ResetSlot(-1, stream()).code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(SlotStateCacheTest, ViewReportsItsShapeAndRoundTrips) {
  auto cache = *SlotStateCache::Create(Specs(), 4, device());
  const std::vector<int32_t> slots = {3, 0};
  SlotStateView view = cache->View(0, slots);
  EXPECT_EQ(view.shape(), (Shape{2, 3, 2}));
  Tensor in = *Tensor::Empty(view.shape(), DType::kFloat32, device());
  Write<float>(in.view(), Iota<float>(view.shape(), 1.0f));
  ASSERT_TRUE(view.Scatter(in.view(), stream()).ok());
  Tensor out = *Tensor::Zeros(view.shape(), DType::kFloat32, device());
  ASSERT_TRUE(view.Gather(out.view(), stream()).ok());
  EXPECT_EQ(Read<float>(out.view()), Iota<float>(view.shape(), 1.0f));
}

TEST_P(SlotStateCacheTest, MismatchesAndBadSpecsAreInvalidArguments) {
  auto cache = *SlotStateCache::Create(Specs(), 4, device());
  const std::vector<int32_t> slots = {0, 1};
  Tensor wrong = *Tensor::Zeros({2, 3, 3}, DType::kFloat32, device());
  const absl::Status s = cache->Gather(0, slots, wrong.view(), stream());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("[2, 3, 3]"), HasSubstr("[2, 3, 2]")));
  Tensor ints = *Tensor::Zeros({2, 3, 2}, DType::kInt32, device());
  EXPECT_EQ(cache->Scatter(0, slots, ints.view(), stream()).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor ok = *Tensor::Zeros({2, 3, 2}, DType::kFloat32, device());
  const std::vector<int32_t> out_of_range = {0, 4};
  EXPECT_EQ(cache->Gather(0, out_of_range, ok.view(), stream()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache->Gather(7, slots, ok.view(), stream()).code(),
            absl::StatusCode::kInvalidArgument);

  std::vector<StreamStateSpec> repeated = Specs();
  repeated[1].name = "tail";
  EXPECT_THAT(std::string(SlotStateCache::Create(repeated, 4, device()).status().message()),
              HasSubstr("repeated"));
  std::vector<StreamStateSpec> bad_axis = Specs();
  bad_axis[0].slot_axis = 3;
  EXPECT_EQ(SlotStateCache::Create(bad_axis, 4, device()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SlotStateCache::Create(Specs(), 0, device()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

class CnnCacheTest : public testing::CacheDeviceTest {};

TEST_P(CnnCacheTest, KeepsTheLayersSlotsFramesHiddenLayoutAndZeroesOnAllocation) {
  const CacheConfig c = SmallConfig();
  auto cnn = *CnnCacheManager::Create(c, 1);
  EXPECT_EQ(cnn->buffer().shape(), (Shape{2, 9, 3, 5}));
  EXPECT_EQ(cnn->CohortShape(1), (Shape{2, 1, 3, 5}));
  Write<float>(cnn->buffer(), std::vector<float>(2 * 9 * 15, 4.0f));
  ASSERT_TRUE(cnn->AllocateStream(11, 3, stream()).ok());
  const std::vector<float> stored = Read<float>(cnn->buffer());
  for (int l = 0; l < 2; ++l)
    for (int s = 0; s < 9; ++s)
      for (int i = 0; i < 15; ++i) ASSERT_EQ(stored[(l * 9 + s) * 15 + i], s == 3 ? 0.0f : 4.0f);
}

TEST_P(CnnCacheTest, UpdateOverwritesInPlaceAndGetCacheReadsBack) {
  auto cnn = *CnnCacheManager::Create(SmallConfig());
  ASSERT_TRUE(cnn->AllocateStream(1, 0, stream()).ok());
  ASSERT_TRUE(cnn->AllocateStream(2, 5, stream()).ok());
  const void* address = cnn->buffer().data();
  std::vector<float> v(30);
  std::iota(v.begin(), v.end(), 0.0f);
  Tensor update = *Tensor::Empty(cnn->CohortShape(1), DType::kFloat32, device());
  Write<float>(update.view(), v);
  ASSERT_TRUE(cnn->Update(2, update.view(), stream()).ok());
  Tensor out = *Tensor::Zeros(cnn->CohortShape(1), DType::kFloat32, device());
  ASSERT_TRUE(cnn->GetCache(2, out.view(), stream()).ok());
  EXPECT_EQ(Read<float>(out.view()), v);
  ASSERT_TRUE(cnn->GetCache(1, out.view(), stream()).ok());
  EXPECT_EQ(Read<float>(out.view()), std::vector<float>(30, 0.0f));
  EXPECT_EQ(cnn->buffer().data(), address);
  // A cohort gather puts stream 2 first.
  Tensor both = *Tensor::Zeros(cnn->CohortShape(2), DType::kFloat32, device());
  const std::vector<int64_t> ids = {2, 1};
  ASSERT_TRUE(cnn->Gather(ids, both.view(), stream()).ok());
  const std::vector<float> got = Read<float>(both.view());
  for (int l = 0; l < 2; ++l)
    for (int i = 0; i < 15; ++i) {
      EXPECT_EQ(got[(l * 2 + 0) * 15 + i], v[l * 15 + i]);
      EXPECT_EQ(got[(l * 2 + 1) * 15 + i], 0.0f);
    }
}

TEST_P(CnnCacheTest, ShapeMismatchNamesBothShapesAndStreamsAreChecked) {
  auto cnn = *CnnCacheManager::Create(SmallConfig());
  ASSERT_TRUE(cnn->AllocateStream(1, 0, stream()).ok());
  Tensor wrong = *Tensor::Zeros({2, 1, 4, 5}, DType::kFloat32, device());
  const absl::Status s = cnn->Update(1, wrong.view(), stream());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("[2, 1, 4, 5]"), HasSubstr("[2, 1, 3, 5]")));
  EXPECT_EQ(cnn->AllocateStream(1, 1, stream()).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(cnn->AllocateStream(2, 0, stream()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cnn->AllocateStream(2, 8, stream()).code(), absl::StatusCode::kInvalidArgument);
  Tensor ok = *Tensor::Zeros({2, 1, 3, 5}, DType::kFloat32, device());
  EXPECT_EQ(cnn->Update(9, ok.view(), stream()).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(cnn->FreeStream(1).ok());
  EXPECT_EQ(cnn->FreeStream(1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cnn->GetCache(1, ok.view(), stream()).code(), absl::StatusCode::kNotFound);
}

OASR_INSTANTIATE_CACHE_DEVICE_TEST(SlotStateCacheTest);
OASR_INSTANTIATE_CACHE_DEVICE_TEST(CnnCacheTest);

}  // namespace
}  // namespace oasr::cache
