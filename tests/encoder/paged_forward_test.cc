// The paged entry points (ForwardChunkPaged / ForwardChunksPaged) over a real
// cache::AttentionCacheManager and BlockPool: one stream against the PyTorch
// reference's log-probs, and cohorts of streams at mixed offsets, history
// lengths and slots (with and without eviction) against the dense
// ForwardChunk run of each stream -- log-probs and the retained K/V history
// itself, chunk by chunk.
#include <algorithm>
#include <string>
#include <vector>

#include "cache/attention_cache_manager.h"
#include "cache/block_pool.h"
#include "encoder/conformer_encoder.h"
#include "encoder/npy_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

// A real pool and attention manager in float32 on the CPU, one block per chunk
// (the engine's geometry).
struct PagedCaches {
  std::unique_ptr<cache::BlockPool> pool;
  std::unique_ptr<cache::AttentionCacheManager> attention;

  PagedCaches(const ModelConfig& c, int chunk, int left) {
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
  }

  // The encoder's description of the pool for the current cohort.
  std::vector<PagedKvLayer> Layers() const {
    std::vector<PagedKvLayer> layers;
    for (int l = 0; l < attention->config().num_layers; ++l) {
      const cache::PagedKvCacheView v = attention->GetPagedKvCache(l);
      layers.push_back({static_cast<float*>(v.k_cache.data()), static_cast<float*>(v.v_cache.data()),
                        v.k_cache.dim(0), v.block_size});
    }
    return layers;
  }

  PagedKvRow Row(int64_t id) const {
    auto views = attention->GetPagedStateViews(id);
    EXPECT_TRUE(views.ok()) << views.status();
    return {static_cast<const int32_t*>(views->block_table.data()),
            *static_cast<const int32_t*>(views->cache_seqlens.data())};
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
  std::vector<float> cnn;  // Paged side's conv state.
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
  t.cnn.assign(static_cast<size_t>(encoder.ConvStateShape().numel()), 0.0f);
  t.att_cache = *Tensor::Zeros({c.num_blocks, c.attention_heads, 0, 2 * c.head_dim()}, DType::kFloat32);
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
int RunCohorts(const ConformerEncoder& encoder, PagedCaches& caches, std::vector<Twin>& twins,
               int chunk, int left) {
  const ModelConfig& c = encoder.config();
  const int required = left < 0 ? -1 : chunk * left;
  int max_batch = 0;
  for (int64_t step = 0;; ++step) {
    std::vector<Twin*> active;
    std::vector<int64_t> ids;
    for (Twin& t : twins) {
      if (step >= t.start_step && HasChunk(c, t)) {
        active.push_back(&t);
        ids.push_back(t.id);
      }
    }
    if (active.empty()) break;
    max_batch = std::max<int>(max_batch, static_cast<int>(active.size()));
    EXPECT_TRUE(caches.attention->PrepareChunksBatched(ids).ok());
    caches.attention->UpdateDeviceMirror(nullptr);
    const std::vector<PagedKvLayer> layers = caches.Layers();
    std::vector<PagedChunkInput> inputs;
    int64_t m = 0;
    for (Twin* t : active) {
      PagedChunkInput in;
      in.feats = t->feats.data<float>() + t->next_feat * c.input_dim;
      in.feat_frames = WindowEnd(c, *t, chunk) - t->next_feat;
      in.offset = t->offset;
      in.kv = caches.Row(t->id);
      in.cnn_cache = t->cnn.data();
      inputs.push_back(in);
      m += encoder.OutputFrames(in.feat_frames);
    }
    std::vector<float> log_probs(static_cast<size_t>(m * c.output_dim));
    const absl::Status status = encoder.ForwardChunksPaged(layers, inputs, log_probs.data());
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok()) return max_batch;

    int64_t row = 0;
    for (size_t b = 0; b < active.size(); ++b) {
      Twin& t = *active[b];
      const int64_t rows = encoder.OutputFrames(inputs[b].feat_frames);
      t.paged_log_probs.insert(t.paged_log_probs.end(), log_probs.data() + row * c.output_dim,
                               log_probs.data() + (row + rows) * c.output_dim);
      row += rows;
      EXPECT_TRUE(caches.attention->CommitChunkPaged(t.id, rows).ok());

      DenseChunkInput dense;
      dense.feats = t.feats.view().Slice(t.next_feat, inputs[b].feat_frames);
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
      auto stacked = caches.attention->GetStackedCache(t.id, nullptr);
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
          diff = std::max(diff, testing::MaxAbsDiff(
                                    stacked->data<float>() + (lh * have + have - kept) * 2 * c.head_dim(),
                                    t.att_cache.data<float>() + lh * kept * 2 * c.head_dim(),
                                    kept * 2 * c.head_dim()));
        }
      }
      EXPECT_LT(diff, 1e-5f) << "stream " << t.id << " step " << step;
      EXPECT_LT(testing::MaxAbsDiff(t.cnn.data(), t.cnn_cache.data<float>(), t.cnn_cache.numel()),
                1e-5f);
    }
  }
  return max_batch;
}

class PagedForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = SmallLn();
    auto model = ConformerModel::Load(fixture_["model_dir"].get<std::string>());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    auto encoder = ConformerEncoder::Create(model_.get(), EncoderOptions{});
    ASSERT_TRUE(encoder.ok());
    encoder_ = std::move(*encoder);
  }

  nlohmann::json fixture_;
  std::unique_ptr<ConformerModel> model_;
  std::unique_ptr<ConformerEncoder> encoder_;
};

// One stream alone through the pool gives the reference's chunk-masked
// log-probs, for every chunk size and both history settings.
TEST_F(PagedForwardTest, OneStreamMatchesReference) {
  for (const auto& run : fixture_["runs"]) {
    const int chunk = run["chunk_size"], left = run["num_left_chunks"];
    PagedCaches caches(model_->config(), chunk, left);
    ASSERT_TRUE(caches.attention->AllocateStream(7, 3, nullptr).ok());
    std::vector<Twin> twins;
    twins.push_back(MakeTwin(*encoder_, 7, 3, LoadFeats(fixture_, *model_), 0, 0));
    RunCohorts(*encoder_, caches, twins, chunk, left);
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
TEST_F(PagedForwardTest, CohortOfMixedOffsetsMatchesDense) {
  const Tensor all = LoadFeats(fixture_, *model_);
  const int chunk = 4;
  const int slots[] = {5, 0, 3, 1};
  for (int left : {-1, 2}) {
    PagedCaches caches(model_->config(), chunk, left);
    std::vector<Twin> twins;
    for (int k = 0; k < 4; ++k) {
      const int64_t begin = k * 37, end = all.dim(0) - k * 53;
      auto feats = Tensor::Empty({end - begin, 80}, DType::kFloat32);
      ASSERT_TRUE(CopyTensor(feats->view(), all.view().Slice(begin, end - begin)).ok());
      ASSERT_TRUE(caches.attention->AllocateStream(100 + k, slots[k], nullptr).ok());
      twins.push_back(MakeTwin(*encoder_, 100 + k, slots[k], std::move(*feats),
                               /*offset=*/k == 3 ? 500 : 0, /*start_step=*/3 * k));
    }
    EXPECT_EQ(RunCohorts(*encoder_, caches, twins, chunk, left), 4);
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

TEST_F(PagedForwardTest, RejectsBadInputsBeforeWriting) {
  const ModelConfig& c = model_->config();
  PagedCaches caches(c, 4, -1);
  ASSERT_TRUE(caches.attention->AllocateStream(1, 0, nullptr).ok());
  const int64_t one = 1;
  ASSERT_TRUE(caches.attention->PrepareChunksBatched({&one, 1}).ok());
  caches.attention->UpdateDeviceMirror(nullptr);
  std::vector<PagedKvLayer> layers = caches.Layers();
  Tensor feats = LoadFeats(fixture_, *model_);
  std::vector<float> cnn(static_cast<size_t>(encoder_->ConvStateShape().numel()), 0.0f);
  PagedChunkInput in;
  in.feats = feats.data<float>();
  in.feat_frames = c.WindowFrames(4);
  in.kv = caches.Row(1);
  in.cnn_cache = cnn.data();
  std::vector<float> log_probs(4 * c.output_dim);

  auto message = [&](std::span<const PagedKvLayer> pool, const PagedChunkInput& input) {
    const absl::Status s = encoder_->ForwardChunkPaged(pool, input, log_probs.data());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  EXPECT_THAT(message(std::span(layers).first(2), in), ::testing::HasSubstr("2 layers given, the model has 3"));
  PagedChunkInput bad = in;
  bad.feat_frames = c.right_context();
  EXPECT_THAT(message(layers, bad), ::testing::HasSubstr("feature frames"));
  bad = in;
  bad.kv.length = 3;  // Offset 0 is below it.
  EXPECT_THAT(message(layers, bad), ::testing::HasSubstr("offset 0"));
  // A window of two chunks reaches a block that was never reserved.
  const int32_t unreserved[2] = {in.kv.block_row[0], -1};
  bad = in;
  bad.kv.block_row = unreserved;
  bad.feat_frames = c.WindowFrames(8);
  EXPECT_THAT(message(layers, bad), ::testing::HasSubstr("block_row[1] = -1"));
  // Nothing was written: the conv state is still zero.
  auto nonzero = [&] { return std::any_of(cnn.begin(), cnn.end(), [](float x) { return x != 0.0f; }); };
  EXPECT_FALSE(nonzero());
  EXPECT_TRUE(encoder_->ForwardChunkPaged(layers, in, log_probs.data()).ok());
  EXPECT_TRUE(nonzero());
}

}  // namespace
}  // namespace oasr::encoder
