// The cohort forward (ConformerEncoder::ForwardCohort) over a real
// cache::AttentionCacheManager, BlockPool and SlotStateCache, the engine's
// caches: one stream against the PyTorch reference's log-probs, and cohorts
// of streams at mixed offsets, history lengths and slots (with and without
// eviction) against the dense ForwardChunk run of each stream -- log-probs,
// the retained K/V history and the conv state itself, chunk by chunk.
#include <algorithm>
#include <string>
#include <vector>

#include "cache/attention_cache_manager.h"
#include "cache/block_pool.h"
#include "cache/slot_state_cache.h"
#include "encoder/conformer_encoder.h"
#include "encoder/npy_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cache/dense_kv_oracle.h"
#include "tests/encoder/test_util.h"

namespace oasr::encoder {
namespace {

nlohmann::json SmallLn() {
  const nlohmann::json manifest = testing::LoadManifest();
  for (const auto& c : manifest["cases"]) {
    if (c["name"] == "small_ln") return c;
  }
  ADD_FAILURE() << "no fixture case small_ln";
  return {};
}

Tensor LoadFeats(const nlohmann::json& c, const ConformerModel& model) {
  auto feats = ReadNpyFloat32(c["feats"].get<std::string>());
  EXPECT_TRUE(feats.ok()) << feats.status();
  model.cmvn().Apply(feats->data<float>(), feats->dim(0));
  return std::move(*feats);
}

// A real pool, attention manager and conv-state cache in float32 on the CPU,
// one block per chunk (the engine's geometry).
struct PagedCaches {
  std::unique_ptr<cache::BlockPool> pool;
  std::unique_ptr<cache::AttentionCacheManager> attention;
  std::unique_ptr<cache::SlotStateCache> states;

  PagedCaches(const ConformerEncoder& encoder, int chunk, int left) {
    const ModelConfig& c = encoder.config();
    cache::CacheConfig config;
    config.num_layers = c.num_blocks;
    config.n_kv_head = c.attention_heads;
    config.head_dim = c.head_dim();
    config.hidden_dim = c.output_size;
    config.kernel_size = c.cnn_module_kernel;
    config.chunk_size = chunk;
    config.block_size_frames = chunk;
    config.num_left_chunks = left;
    config.max_num_blocks = 1024;
    config.max_blocks_per_seq = 256;
    config.max_batch_size = 8;
    config.dtype = DType::kFloat32;
    auto p = cache::BlockPool::Create(config);
    EXPECT_TRUE(p.ok()) << p.status();
    pool = std::move(*p);
    auto a = cache::AttentionCacheManager::Create(pool.get());
    EXPECT_TRUE(a.ok()) << a.status();
    attention = std::move(*a);
    cache::StreamStateSpec conv{"cnn", encoder.ConvStateShape(), 1, false, DType::kFloat32};
    auto st = cache::SlotStateCache::Create({conv}, config.max_batch_size, Device::Cpu());
    EXPECT_TRUE(st.ok()) << st.status();
    states = std::move(*st);
  }

  // The encoder's view of the pool and tables for the current cohort.
  PagedKv Kv() const {
    const cache::BlockTableMirror& m = attention->mirror();
    PagedKv kv;
    kv.k = pool->k_pool().data();
    kv.v = pool->v_pool().data();
    kv.num_blocks = pool->num_physical_blocks();
    kv.block_size = attention->config().block_size_frames;
    kv.block_table = static_cast<const int32_t*>(m.block_table().data());
    kv.cache_lens = static_cast<const int32_t*>(m.cache_seqlens().data());
    kv.host_block_table = kv.block_table;
    kv.host_cache_lens = kv.cache_lens;
    kv.table_stride = m.width();
    return kv;
  }
  ConvStates Conv() const { return ConvStates{states->buffer(0).data(), states->num_slots()}; }
  // Slot `slot`'s conv state as [layers, K - 1, d].
  std::vector<float> State(int slot) const {
    const Shape shape = states->CohortShape(0, 1);
    std::vector<float> out(static_cast<size_t>(shape.numel()));
    const int32_t s = slot;
    EXPECT_TRUE(states
                    ->Gather(0, {&s, 1},
                             TensorView(out.data(), DType::kFloat32, shape, Device::Cpu()), nullptr)
                    .ok());
    return out;
  }
};

// A cohort's inputs, staged like the engine's plan.
struct Staged {
  std::vector<int32_t> slots, frames, offsets;
  std::vector<float> feats;
  CohortInputs Inputs(int chunk) const {
    CohortInputs in;
    in.batch = static_cast<int>(slots.size());
    in.chunk = chunk;
    in.feats = feats.data();
    in.slots = in.host_slots = slots.data();
    in.frames = in.host_frames = frames.data();
    in.offsets = in.host_offsets = offsets.data();
    return in;
  }
};

// One stream run twice: through the paged pool and through dense caches.
struct Twin {
  int64_t id = 0;
  int slot = 0;
  Tensor feats;
  int64_t next_feat = 0;
  int64_t start_step = 0;
  int64_t offset = 0;
  std::vector<float> paged_log_probs;
  // Dense side.
  Tensor att_cache;
  Tensor cnn_cache;
  std::vector<float> dense_log_probs;
};

Twin MakeTwin(const ConformerEncoder& encoder, int64_t id, int slot, Tensor feats, int64_t offset,
              int64_t start_step) {
  const ModelConfig& c = encoder.config();
  Twin t;
  t.id = id;
  t.slot = slot;
  t.feats = std::move(feats);
  t.offset = offset;
  t.start_step = start_step;
  t.att_cache =
      *Tensor::Zeros({c.num_blocks, c.attention_heads, 0, 2 * c.head_dim()}, DType::kFloat32);
  t.cnn_cache = *Tensor::Zeros(encoder.ConvStateShape(), DType::kFloat32);
  return t;
}

bool HasChunk(const ModelConfig& c, const Twin& t) {
  return t.next_feat < t.feats.dim(0) - c.right_context();
}

int64_t WindowEnd(const ModelConfig& c, const Twin& t, int chunk) {
  return std::min<int64_t>(t.next_feat + c.WindowFrames(chunk), t.feats.dim(0));
}

// Steps every started twin with a chunk left, paged side as one cohort, dense
// side one stream at a time; checks that the retained histories agree after
// each step. Returns the largest cohort seen.
int RunCohorts(ConformerEncoder& encoder, PagedCaches& caches, std::vector<Twin>& twins, int chunk,
               int left) {
  const ModelConfig& c = encoder.config();
  const int required = left < 0 ? -1 : chunk * left;
  const int64_t window = c.WindowFrames(chunk);
  int max_batch = 0;
  for (int64_t step = 0;; ++step) {
    std::vector<Twin*> active;
    std::vector<int32_t> slots;
    for (Twin& t : twins) {
      if (step >= t.start_step && HasChunk(c, t)) {
        active.push_back(&t);
        slots.push_back(t.slot);
      }
    }
    if (active.empty()) break;
    max_batch = std::max<int>(max_batch, static_cast<int>(active.size()));
    EXPECT_TRUE(caches.attention->PrepareChunksBatched(slots).ok());
    caches.attention->UpdateDeviceMirror(nullptr);
    Staged staged;
    staged.feats.assign(active.size() * window * c.input_dim, 0.0f);
    std::vector<int64_t> feat_frames;
    for (size_t b = 0; b < active.size(); ++b) {
      Twin* t = active[b];
      feat_frames.push_back(WindowEnd(c, *t, chunk) - t->next_feat);
      std::copy(t->feats.data<float>() + t->next_feat * c.input_dim,
                t->feats.data<float>() + (t->next_feat + feat_frames[b]) * c.input_dim,
                staged.feats.begin() + b * window * c.input_dim);
      staged.slots.push_back(t->slot);
      staged.frames.push_back(static_cast<int32_t>(encoder.OutputFrames(feat_frames[b])));
      staged.offsets.push_back(static_cast<int32_t>(t->offset));
    }
    std::vector<float> log_probs(active.size() * chunk * c.output_dim);
    testing::EnsureWorkspace(encoder, static_cast<int>(active.size()), chunk);
    const absl::Status status =
        encoder.ForwardCohort(staged.Inputs(chunk), caches.Kv(), caches.Conv(), log_probs.data());
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok()) return max_batch;

    for (size_t b = 0; b < active.size(); ++b) {
      Twin& t = *active[b];
      const int64_t rows = staged.frames[b];
      const float* row_lp = log_probs.data() + b * chunk * c.output_dim;
      t.paged_log_probs.insert(t.paged_log_probs.end(), row_lp, row_lp + rows * c.output_dim);
      EXPECT_TRUE(caches.attention->CommitChunkPaged(t.slot, rows).ok());

      DenseChunkInput dense;
      dense.feats = t.feats.view().Slice(t.next_feat, feat_frames[b]);
      dense.offset = t.offset;
      dense.att_cache = t.att_cache.view();
      dense.cnn_cache = t.cnn_cache.view();
      auto out = encoder.ForwardChunk(dense, required);
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) return max_batch;
      t.dense_log_probs.insert(t.dense_log_probs.end(), out->log_probs.data<float>(),
                               out->log_probs.data<float>() + out->log_probs.numel());
      t.att_cache = std::move(out->att_cache);
      t.cnn_cache = std::move(out->cnn_cache);
      t.next_feat += static_cast<int64_t>(c.subsampling_rate()) * chunk;
      t.offset += rows;

      // The pool holds what the dense cache holds (after a final short chunk
      // it may keep up to a block more, never less).
      auto stacked = cache::testing::GatherDenseHistory(*caches.attention, t.slot, nullptr);
      EXPECT_TRUE(stacked.ok()) << stacked.status();
      const int64_t kept = t.att_cache.dim(2), have = stacked->dim(2);
      if (rows == chunk) {
        EXPECT_EQ(have, kept) << "stream " << t.id << " step " << step;
      }
      EXPECT_GE(have, kept);
      if (have < kept) return max_batch;
      float diff = 0.0f;
      for (int64_t l = 0; l < c.num_blocks; ++l) {
        for (int64_t h = 0; h < c.attention_heads; ++h) {
          const int64_t lh = l * c.attention_heads + h;
          diff = std::max(diff,
                          testing::MaxAbsDiff(
                              stacked->data<float>() + (lh * have + have - kept) * 2 * c.head_dim(),
                              t.att_cache.data<float>() + lh * kept * 2 * c.head_dim(),
                              kept * 2 * c.head_dim()));
        }
      }
      EXPECT_LT(diff, 1e-5f) << "stream " << t.id << " step " << step;
      const std::vector<float> state = caches.State(t.slot);
      EXPECT_LT(testing::MaxAbsDiff(state.data(), t.cnn_cache.data<float>(), t.cnn_cache.numel()),
                1e-5f);
    }
  }
  return max_batch;
}

class CohortForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = SmallLn();
    auto model = ConformerModel::Load(fixture_["model_dir"].get<std::string>());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    auto encoder = testing::MakeCpuEncoder(model_.get());
    ASSERT_TRUE(encoder.ok()) << encoder.status();
    encoder_ = std::move(*encoder);
  }

  nlohmann::json fixture_;
  std::unique_ptr<ConformerModel> model_;
  testing::CpuEncoder encoder_;
};

// One stream alone through the pool gives the reference's chunk-masked
// log-probs, for every chunk size and both history settings.
TEST_F(CohortForwardTest, OneStreamMatchesReference) {
  for (const auto& run : fixture_["runs"]) {
    const int chunk = run["chunk_size"], left = run["num_left_chunks"];
    PagedCaches caches(*encoder_, chunk, left);
    ASSERT_TRUE(caches.attention->AllocateSlot(3, nullptr).ok());
    std::vector<Twin> twins;
    twins.push_back(MakeTwin(*encoder_.encoder, 7, 3, LoadFeats(fixture_, *model_), 0, 0));
    RunCohorts(*encoder_.encoder, caches, twins, chunk, left);
    auto golden = ReadNpyFloat32(run["log_probs"].get<std::string>());
    ASSERT_TRUE(golden.ok());
    ASSERT_EQ(static_cast<int64_t>(twins[0].paged_log_probs.size()), golden->numel());
    EXPECT_LT(testing::MaxAbsDiff(twins[0].paged_log_probs.data(), golden->data<float>(),
                                  golden->numel()),
              1e-4f)
        << "chunk " << chunk << " left " << left;
  }
}

// Streams of different lengths joining at different steps, in scattered
// slots, one starting at a late offset: every cohort mixes offsets, history
// lengths and (at the end) chunk lengths; each stream gets exactly its dense
// run, with eviction (2 left chunks) and without.
TEST_F(CohortForwardTest, CohortOfMixedOffsetsMatchesDense) {
  const Tensor all = LoadFeats(fixture_, *model_);
  const int chunk = 4;
  const int slots[] = {5, 0, 3, 1};
  for (int left : {-1, 2}) {
    PagedCaches caches(*encoder_, chunk, left);
    std::vector<Twin> twins;
    for (int k = 0; k < 4; ++k) {
      const int64_t begin = k * 37, end = all.dim(0) - k * 53;
      auto feats = Tensor::Empty({end - begin, 80}, DType::kFloat32);
      ASSERT_TRUE(CopyTensor(feats->view(), all.view().Slice(begin, end - begin)).ok());
      ASSERT_TRUE(caches.attention->AllocateSlot(slots[k], nullptr).ok());
      twins.push_back(MakeTwin(*encoder_.encoder, 100 + k, slots[k], std::move(*feats),
                               /*offset=*/k == 3 ? 500 : 0, /*start_step=*/3 * k));
    }
    EXPECT_EQ(RunCohorts(*encoder_.encoder, caches, twins, chunk, left), 4);
    for (const Twin& t : twins) {
      ASSERT_EQ(t.paged_log_probs.size(), t.dense_log_probs.size());
      ASSERT_FALSE(t.dense_log_probs.empty());
      EXPECT_LT(testing::MaxAbsDiff(t.paged_log_probs.data(), t.dense_log_probs.data(),
                                    static_cast<int64_t>(t.dense_log_probs.size())),
                1e-5f)
          << "stream " << t.id << " left " << left;
    }
  }
}

TEST_F(CohortForwardTest, RejectsBadInputsBeforeWriting) {
  const ModelConfig& c = model_->config();
  const int chunk = 4;
  PagedCaches caches(*encoder_, chunk, -1);
  ASSERT_TRUE(caches.attention->AllocateSlot(0, nullptr).ok());
  const int32_t slot = 0;
  ASSERT_TRUE(caches.attention->PrepareChunksBatched({&slot, 1}).ok());
  caches.attention->UpdateDeviceMirror(nullptr);
  Tensor feats = LoadFeats(fixture_, *model_);
  Staged staged;
  staged.slots = {0};
  staged.frames = {chunk};
  staged.offsets = {0};
  staged.feats.assign(feats.data<float>(),
                      feats.data<float>() + c.WindowFrames(chunk) * c.input_dim);
  std::vector<float> log_probs(chunk * c.output_dim);
  const PagedKv kv = caches.Kv();
  testing::EnsureWorkspace(*encoder_.encoder, 1, chunk);

  auto message = [&](const Staged& in, const PagedKv& pool) {
    const absl::Status s =
        encoder_->ForwardCohort(in.Inputs(chunk), pool, caches.Conv(), log_probs.data());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  Staged bad = staged;
  bad.frames = {0};
  EXPECT_THAT(message(bad, kv), ::testing::HasSubstr("frames 0 is outside [1, 4]"));
  bad = staged;
  bad.slots = {9};
  EXPECT_THAT(message(bad, kv), ::testing::HasSubstr("slot 9"));
  // A cache length above the offset.
  std::vector<int32_t> lens = {3};
  PagedKv bad_kv = kv;
  bad_kv.host_cache_lens = bad_kv.cache_lens = lens.data();
  EXPECT_THAT(message(staged, bad_kv),
              ::testing::HasSubstr("offset 0 is below the cache length 3"));
  // A table entry that names no block of the pool.
  std::vector<int32_t> table = {-1};
  bad_kv = kv;
  bad_kv.host_block_table = bad_kv.block_table = table.data();
  bad_kv.table_stride = 1;
  EXPECT_THAT(message(staged, bad_kv), ::testing::HasSubstr("block_table[0] = -1"));
  // Nothing was written: the conv state is still zero.
  auto nonzero = [&] {
    const std::vector<float> state = caches.State(0);
    return std::any_of(state.begin(), state.end(), [](float x) { return x != 0.0f; });
  };
  EXPECT_FALSE(nonzero());
  EXPECT_TRUE(
      encoder_->ForwardCohort(staged.Inputs(chunk), kv, caches.Conv(), log_probs.data()).ok());
  EXPECT_TRUE(nonzero());
}

}  // namespace
}  // namespace oasr::encoder
