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

TEST_P(CnnCacheTest, KeepsTheLayersSlotsFramesHiddenLayoutAndZeroesANewStreamsSlot) {
  const CacheConfig c = SmallConfig();
  auto cnn = *CnnCacheManager::Create(c, 1);
  const StreamStateSpec spec = CnnCacheManager::Spec(c);
  EXPECT_EQ(spec.name, CnnCacheManager::kStateName);
  EXPECT_EQ(spec.per_slot_shape, (Shape{2, 3, 5}));
  EXPECT_EQ(spec.slot_axis, 1);
  EXPECT_EQ(cnn->states().spec(0).per_slot_shape, spec.per_slot_shape);
  EXPECT_EQ(cnn->buffer().shape(), (Shape{2, 9, 3, 5}));
  EXPECT_EQ(cnn->CohortShape(1), (Shape{2, 1, 3, 5}));
  Write<float>(cnn->buffer(), std::vector<float>(2 * 9 * 15, 4.0f));
  ASSERT_TRUE(cnn->states().ZeroSlot(3, stream()).ok());
  const std::vector<float> stored = Read<float>(cnn->buffer());
  for (int l = 0; l < 2; ++l)
    for (int s = 0; s < 9; ++s)
      for (int i = 0; i < 15; ++i) ASSERT_EQ(stored[(l * 9 + s) * 15 + i], s == 3 ? 0.0f : 4.0f);
}

TEST_P(CnnCacheTest, ScatterOverwritesASlotInPlaceAndGatherReadsItBack) {
  auto cnn = *CnnCacheManager::Create(SmallConfig());
  SlotStateCache& states = cnn->states();
  const void* address = cnn->buffer().data();
  std::vector<float> v(30);
  std::iota(v.begin(), v.end(), 0.0f);
  Tensor update = *Tensor::Empty(cnn->CohortShape(1), DType::kFloat32, device());
  Write<float>(update.view(), v);
  const std::vector<int32_t> five = {5}, zero = {0};
  ASSERT_TRUE(states.Scatter(0, five, update.view(), stream()).ok());
  Tensor out = *Tensor::Zeros(cnn->CohortShape(1), DType::kFloat32, device());
  ASSERT_TRUE(states.Gather(0, five, out.view(), stream()).ok());
  EXPECT_EQ(Read<float>(out.view()), v);
  ASSERT_TRUE(states.Gather(0, zero, out.view(), stream()).ok());
  EXPECT_EQ(Read<float>(out.view()), std::vector<float>(30, 0.0f));
  EXPECT_EQ(cnn->buffer().data(), address);
  // A cohort gather puts slot 5 first.
  Tensor both = *Tensor::Zeros(cnn->CohortShape(2), DType::kFloat32, device());
  const std::vector<int32_t> cohort = {5, 0};
  ASSERT_TRUE(states.View(0, cohort).Gather(both.view(), stream()).ok());
  const std::vector<float> got = Read<float>(both.view());
  for (int l = 0; l < 2; ++l)
    for (int i = 0; i < 15; ++i) {
      EXPECT_EQ(got[(l * 2 + 0) * 15 + i], v[l * 15 + i]);
      EXPECT_EQ(got[(l * 2 + 1) * 15 + i], 0.0f);
    }
}

TEST_P(CnnCacheTest, ShapeMismatchNamesBothShapesAndSlotsAreChecked) {
  auto cnn = *CnnCacheManager::Create(SmallConfig());
  Tensor wrong = *Tensor::Zeros({2, 1, 4, 5}, DType::kFloat32, device());
  const std::vector<int32_t> zero = {0}, past = {8};
  const absl::Status s = cnn->states().Scatter(0, zero, wrong.view(), stream());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("[2, 1, 4, 5]"), HasSubstr("[2, 1, 3, 5]")));
  Tensor ok = *Tensor::Zeros({2, 1, 3, 5}, DType::kFloat32, device());
  EXPECT_EQ(cnn->states().Scatter(0, past, ok.view(), stream()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cnn->states().ZeroSlot(8, stream()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CnnCacheManager::Create(SmallConfig(), -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

OASR_INSTANTIATE_CACHE_DEVICE_TEST(SlotStateCacheTest);
OASR_INSTANTIATE_CACHE_DEVICE_TEST(CnnCacheTest);

}  // namespace
}  // namespace oasr::cache
