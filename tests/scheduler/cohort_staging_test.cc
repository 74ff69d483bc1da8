// The cohort staging on the CPU: its row arrays and windows (features, or
// PCM for a device front end, whose features go to a buffer of their own),
// the plan it makes, the ladder of graph widths and the widths cohorts fill.
#include "scheduler/cohort_staging.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "cache/pool_sizing.h"
#include "encoder/pcm_source.h"

namespace oasr::scheduler {
namespace {

TEST(GraphLadderTest, AscendsFromOneToTheCapacityWithBoundedPadding) {
  for (int capacity : {1, 2, 3, 64, 65, 100, 1000, 16384, 20000}) {
    const std::vector<int> w = GraphLadder(capacity);
    ASSERT_FALSE(w.empty());
    EXPECT_EQ(w.front(), 1) << capacity;
    EXPECT_EQ(w.back(), capacity);
    for (size_t i = 1; i < w.size(); ++i) {
      ASSERT_LT(w[i - 1], w[i]) << capacity;
      // Doubling while narrow, then at most 1.4x (1.25x and a multiple of 16).
      if (w[i - 1] >= 64 && w[i] != capacity) {
        EXPECT_LE(w[i], w[i - 1] * 1.4) << capacity << ": " << w[i - 1] << " -> " << w[i];
        EXPECT_EQ(w[i] % 16, 0);
      } else {
        EXPECT_LE(w[i], 2 * w[i - 1]);
      }
    }
  }
  EXPECT_EQ(GraphLadder(16384).size(), 31u);
}

TEST(GraphLadderTest, LoadedCohortsFillACapturedWidth) {
  const std::vector<int> w = GraphLadder(16384);
  // Below the threshold, without one, or without widths: every row runs.
  EXPECT_EQ(FilledRows(w, 200, 256), 200u);
  EXPECT_EQ(FilledRows(w, 1000, 0), 1000u);
  EXPECT_EQ(FilledRows({}, 1000, 256), 1000u);
  for (size_t rows : {size_t{256}, size_t{300}, size_t{1000}, size_t{5000}, size_t{16384}}) {
    const size_t run = FilledRows(w, rows, 256);
    // A captured width, the widest one the rows fill, leaving under a fifth.
    EXPECT_TRUE(std::find(w.begin(), w.end(), static_cast<int>(run)) != w.end()) << rows;
    EXPECT_LE(run, rows);
    const auto next = std::upper_bound(w.begin(), w.end(), static_cast<int>(run));
    if (next != w.end()) {
      EXPECT_GT(static_cast<size_t>(*next), rows) << rows;
    }
    EXPECT_LT(rows - run, rows / 5 + 1) << rows;
  }
  EXPECT_EQ(FilledRows(w, 16384, 256), 16384u);
}

TEST(CohortStagingTest, FeatureWindowsAreTheDeviceViewsOnTheCpu) {
  auto staging = CohortStaging::Create(8, 67, 80, Device::Cpu());
  ASSERT_TRUE(staging.ok()) << staging.status();
  CohortStaging& s = **staging;
  EXPECT_FALSE(s.has_pcm());
  s.slots()[2] = 5;
  s.feat_frames()[2] = 40;
  s.feats(2)[7] = 1.5f;
  ASSERT_TRUE(s.Upload(3, nullptr).ok());
  EXPECT_EQ(static_cast<const int32_t*>(s.device_slots(3).data())[2], 5);
  EXPECT_EQ(static_cast<const int32_t*>(s.device_feat_frames(3).data())[2], 40);
  const TensorView feats = s.device_feats(3);
  EXPECT_EQ(feats.shape(), (Shape{3, 67, 80}));
  EXPECT_EQ(static_cast<const float*>(feats.data())[2 * 67 * 80 + 7], 1.5f);
  EXPECT_TRUE(s.device_pcm(3).empty());
}

TEST(CohortStagingTest, PcmWindowsAndTheirFeatureBufferReachThePlan) {
  const int64_t stride = encoder::PcmSource::WindowSamples(67);
  auto staging = CohortStaging::Create(8, 67, 80, Device::Cpu(), stride);
  ASSERT_TRUE(staging.ok()) << staging.status();
  CohortStaging& s = **staging;
  ASSERT_TRUE(s.has_pcm());
  for (int b = 0; b < 8; ++b) s.pcm(b)[stride - 1] = static_cast<float>(b);
  s.feat_frames()[1] = 67;
  const TensorView pcm = s.device_pcm(4);
  EXPECT_EQ(pcm.shape(), (Shape{4, stride}));
  for (int b = 0; b < 4; ++b) {
    EXPECT_EQ(static_cast<const float*>(pcm.data())[b * stride + stride - 1], b);
  }
  // The features the device front end writes are a buffer of their own.
  const TensorView feats = s.device_feats(4);
  EXPECT_EQ(feats.shape(), (Shape{4, 67, 80}));
  const float* f = static_cast<const float*>(feats.data());
  EXPECT_TRUE(f + 4 * 67 * 80 <= s.pcm(0) || f >= s.pcm(7) + stride);

  cache::CacheConfig c;
  c.num_layers = 1;
  c.n_kv_head = 1;
  c.head_dim = 4;
  c.hidden_dim = 4;
  c.kernel_size = 2;
  c.chunk_size = 16;
  c.block_size_frames = 16;
  c.max_batch_size = 8;
  c.max_blocks_per_seq = 2;
  c.max_num_blocks = 16;
  c.dtype = DType::kFloat32;
  auto resolved = cache::ResolveCacheConfig(c);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  auto pool = cache::BlockPool::Create(*resolved);
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto tables = cache::BlockTableMirror::Create(8, 2, 8, Device::Cpu());
  ASSERT_TRUE(tables.ok()) << tables.status();
  const CohortPlan plan = MakeCohortPlan(s, 4, 16, **pool, **tables, {});
  EXPECT_EQ(plan.pcm.data(), pcm.data());
  EXPECT_EQ(plan.feats.data(), feats.data());
  EXPECT_EQ(plan.feat_frames.numel(), 4);
  EXPECT_EQ(static_cast<const int32_t*>(plan.feat_frames.data())[1], 67);
}

}  // namespace
}  // namespace oasr::scheduler
