// The cohort forward replayed as a CUDA graph against the same forward
// launched op by op: from the same caches and inputs, a replay must write
// bit for bit what the eager launch sequence writes -- every stream row's
// log-probs, the K/V pool outside the scratch block and the conv state of
// every stream slot -- tick after tick with new inputs at the captured
// addresses, with padding rows (the padding lane) in the cohort. CUDA only
// (skipped without a GPU).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cache/attention_cache_manager.h"
#include "cache/block_pool.h"
#include "cache/slot_state_cache.h"
#include "common/cuda_graph.h"
#include "common/status.h"
#include "scheduler/cohort_staging.h"
#include "scheduler/model_factory.h"
#include "tests/encoder/test_util.h"

namespace oasr::scheduler {
namespace {

const std::string kModelDir = std::string(OASR_ENCODER_FIXTURES) + "/small_ln/model";

// The engine's caches for `streams` stream slots plus one padding lane.
struct Serving {
  LoadedModel loaded;
  std::unique_ptr<cache::BlockPool> pool;
  std::unique_ptr<cache::AttentionCacheManager> attention;
  std::unique_ptr<cache::SlotStateCache> states;
  std::vector<TensorView> state_views;
  std::unique_ptr<CohortStaging> staging;
  Tensor log_probs;
  int pad_slot = -1;
};

absl::StatusOr<Serving> MakeServing(const std::string& dir, DType dtype, int streams, int left) {
  Serving s;
  ModelOptions options;
  options.model_dir = dir;
  options.device = encoder::testing::TestDevice();
  options.dtype = dtype;
  OASR_ASSIGN_OR_RETURN(s.loaded, LoadModel(options));
  StreamingModel& model = *s.loaded.model;
  const ModelGeometry& g = model.geometry();
  cache::CacheConfig c = model.BaseCacheConfig();
  c.chunk_size = c.block_size_frames = g.chunk_size;
  c.num_left_chunks = left;
  c.max_batch_size = streams;
  c.max_blocks_per_seq = 16;
  c.max_num_blocks = int64_t{streams} * 16;
  OASR_ASSIGN_OR_RETURN(s.pool, cache::BlockPool::Create(c, /*scratch_blocks=*/1));
  OASR_ASSIGN_OR_RETURN(s.attention, cache::AttentionCacheManager::Create(s.pool.get(), 1));
  s.pad_slot = s.attention->pad_lane_slot(0);
  OASR_ASSIGN_OR_RETURN(s.states, cache::SlotStateCache::Create(model.StreamStates(), streams + 1,
                                                                model.context().device()));
  for (int i = 0; i < s.states->num_specs(); ++i) s.state_views.push_back(s.states->buffer(i));
  OASR_ASSIGN_OR_RETURN(s.staging, CohortStaging::Create(streams, g.WindowFrames(g.chunk_size),
                                                         g.feature_dim, model.context().device()));
  OASR_ASSIGN_OR_RETURN(s.log_probs, Tensor::Empty({streams, g.chunk_size, g.vocab_size},
                                                   DType::kFloat32, model.context().device()));
  ExecutionContext& ctx = model.context();
  OASR_RETURN_IF_ERROR(ctx.ReserveWorkspace(model.WorkspaceBytes(streams), 0));
  return s;
}

// Host copies of everything a forward writes.
struct Written {
  std::vector<char> log_probs, k, v, state;
};

// Copies on the model's stream, in order with its work (the context's stream
// does not synchronise with the legacy default stream).
std::vector<char> Download(const TensorView& t, ExecutionContext& ctx) {
  std::vector<char> host(t.nbytes());
  TensorView dst(host.data(), t.dtype(), t.shape(), Device::Cpu());
  EXPECT_TRUE(CopyTensorAsync(dst, t, ctx.stream()).ok());
  EXPECT_TRUE(ctx.Synchronize().ok());
  return host;
}

void Upload(const std::vector<char>& host, const TensorView& t, ExecutionContext& ctx) {
  TensorView src(const_cast<char*>(host.data()), t.dtype(), t.shape(), Device::Cpu());
  EXPECT_TRUE(CopyTensorAsync(t, src, ctx.stream()).ok());
  EXPECT_TRUE(ctx.Synchronize().ok());
}

Written Read(const Serving& s) {
  ExecutionContext& ctx = s.loaded.model->context();
  return {Download(s.log_probs.view(), ctx), Download(s.pool->k_pool(), ctx),
          Download(s.pool->v_pool(), ctx), Download(s.state_views[0], ctx)};
}

void Restore(const Serving& s, const Written& w) {
  ExecutionContext& ctx = s.loaded.model->context();
  Upload(w.log_probs, s.log_probs.view(), ctx);
  Upload(w.k, s.pool->k_pool(), ctx);
  Upload(w.v, s.pool->v_pool(), ctx);
  Upload(w.state, s.state_views[0], ctx);
}

// Whether `got` equals `want` bit for bit over every stream's rows: the
// first `rows` log-prob rows, the pool's blocks except the scratch block,
// the conv state of slots [0, streams).
void ExpectSameWrites(const Serving& s, const Written& got, const Written& want, int rows,
                      int streams, const std::string& what) {
  const ModelGeometry& g = s.loaded.model->geometry();
  const size_t row_bytes = size_t{static_cast<size_t>(g.chunk_size)} * g.vocab_size * 4;
  EXPECT_EQ(std::memcmp(got.log_probs.data(), want.log_probs.data(), rows * row_bytes), 0)
      << what << ": log-probs";
  // Pool: (layers, physical blocks, block, heads, d_k); the scratch block is the last.
  const TensorView k = s.pool->k_pool();
  const size_t block_bytes = k.nbytes() / (k.dim(0) * k.dim(1));
  const int scratch = s.pool->scratch_block(0);
  for (int64_t l = 0; l < k.dim(0); ++l) {
    for (int64_t b = 0; b < k.dim(1); ++b) {
      if (b == scratch) continue;
      const size_t at = (l * k.dim(1) + b) * block_bytes;
      ASSERT_EQ(std::memcmp(got.k.data() + at, want.k.data() + at, block_bytes), 0)
          << what << ": K of layer " << l << " block " << b;
      ASSERT_EQ(std::memcmp(got.v.data() + at, want.v.data() + at, block_bytes), 0)
          << what << ": V of layer " << l << " block " << b;
    }
  }
  // State: (layers, slots, K - 1, d).
  const TensorView st = s.state_views[0];
  const size_t slot_bytes = st.nbytes() / (st.dim(0) * st.dim(1));
  for (int64_t l = 0; l < st.dim(0); ++l) {
    for (int slot = 0; slot < streams; ++slot) {
      const size_t at = (l * st.dim(1) + slot) * slot_bytes;
      ASSERT_EQ(std::memcmp(got.state.data() + at, want.state.data() + at, slot_bytes), 0)
          << what << ": conv state of layer " << l << " slot " << slot;
    }
  }
}

struct Case {
  DType dtype;
  int left;  // Left chunks (-1: all history).
};

class CohortGraphTest : public ::testing::TestWithParam<Case> {};

INSTANTIATE_TEST_SUITE_P(Dtypes, CohortGraphTest,
                         ::testing::Values(Case{DType::kFloat32, 2}, Case{DType::kFloat32, -1},
                                           Case{DType::kBFloat16, 2}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(DTypeName(info.param.dtype)) +
                                  (info.param.left < 0 ? "_all_history" : "_left2");
                         });

TEST_P(CohortGraphTest, ReplayWritesWhatTheEagerForwardWrites) {
  OASR_SKIP_WITHOUT_TEST_DEVICE();
  constexpr int kStreams = 8, kWidth = 8, kLive = 5;  // 3 padding rows.
  absl::StatusOr<Serving> made = MakeServing(kModelDir, GetParam().dtype, kStreams, GetParam().left);
  ASSERT_TRUE(made.ok()) << made.status();
  Serving& s = *made;
  StreamingModel& model = *s.loaded.model;
  ExecutionContext& ctx = model.context();
  const ModelGeometry& g = model.geometry();
  std::mt19937 rng(7);
  std::normal_distribution<float> feat;

  // Five streams in slots 6, 1, 3, 0, 4 (not the row order); streams join at
  // different ticks, so the cohort mixes history lengths and offsets.
  const std::vector<int32_t> slots = {6, 1, 3, 0, 4};
  const std::vector<int> joins = {0, 0, 1, 2, 2};
  std::vector<int32_t> offsets(kLive, 0);
  const int ticks = 6;

  const CohortPlan plan = MakeCohortPlan(*s.staging, kWidth, g.chunk_size, *s.pool,
                                         s.attention->mirror(), s.state_views);
  CudaGraph graph;
  for (int t = 0; t < ticks; ++t) {
    std::vector<int32_t> cohort;
    std::vector<int> rows;
    for (int i = 0; i < kLive; ++i) {
      if (joins[i] == t) ASSERT_TRUE(s.attention->AllocateSlot(slots[i], ctx.stream()).ok());
      if (joins[i] <= t) {
        cohort.push_back(slots[i]);
        rows.push_back(i);
      }
    }
    ASSERT_TRUE(s.attention->PrepareChunksBatched(cohort).ok());
    ASSERT_TRUE(s.attention->PadCohort(kWidth).ok());
    const int32_t pad_len = s.attention->mirror().Seqlen(s.pad_slot);
    std::vector<int32_t> frames(kWidth, g.chunk_size);
    for (int b = 0; b < kWidth; ++b) {
      const bool live = b < static_cast<int>(cohort.size());
      // The last tick's first row is a short last chunk.
      if (live && t == ticks - 1 && b == 0) frames[b] = 3;
      s.staging->slots()[b] = live ? cohort[b] : s.pad_slot;
      s.staging->frames()[b] = frames[b];
      s.staging->offsets()[b] = live ? offsets[rows[b]] : pad_len;
      float* f = s.staging->feats(b);
      for (int64_t i = 0; i < g.WindowFrames(g.chunk_size) * g.feature_dim; ++i) f[i] = feat(rng);
    }
    s.attention->UpdateDeviceMirror(ctx.stream());
    ASSERT_TRUE(s.staging->Upload(kWidth, ctx.stream()).ok());
    const Written before = Read(s);

    ASSERT_TRUE(model.ForwardCohort(plan, s.log_probs.view()).ok());
    const Written eager = Read(s);
    Restore(s, before);
    if (graph.empty()) {
      // Captured once, at the first tick: later ticks replay it with new
      // inputs at the same addresses.
      absl::StatusOr<CudaGraph> captured = CudaGraph::Capture(
          ctx.stream(), [&] { return model.ForwardCohort(plan, s.log_probs.view()); });
      ASSERT_TRUE(captured.ok()) << captured.status();
      EXPECT_GT(captured->num_nodes(), 0);
      graph = std::move(*captured);
      // Capturing ran nothing.
      ExpectSameWrites(s, Read(s), before, kWidth, kStreams, "after capture");
    }
    ASSERT_TRUE(graph.Launch(ctx.stream()).ok());
    ExpectSameWrites(s, Read(s), eager, static_cast<int>(cohort.size()), kStreams,
                     "tick " + std::to_string(t));
    for (size_t b = 0; b < cohort.size(); ++b) {
      ASSERT_TRUE(s.attention->CommitChunkPaged(cohort[b], frames[b]).ok());
      offsets[rows[b]] += frames[b];
    }
  }
}

}  // namespace
}  // namespace oasr::scheduler
