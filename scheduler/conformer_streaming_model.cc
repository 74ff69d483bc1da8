#include "scheduler/conformer_streaming_model.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "cache/attention_cache_manager.h"
#include "cache/block_pool.h"

namespace oasr::scheduler {
namespace {

// One stream's retained history in the paged pool: position p of the stream
// lives in block block_row[p / block_size] at row p % block_size.
class PagedHistory final : public encoder::AttentionHistory {
 public:
  PagedHistory(const cache::PagedKvCacheView* layers, const int32_t* block_row, int64_t length,
               int heads, int64_t d_k)
      : layers_(layers), block_row_(block_row), length_(length), heads_(heads), d_k_(d_k) {}

  int64_t length() const override { return length_; }

  void AppendSegments(int layer, int head, std::vector<encoder::KvSegment>* out) const override {
    const cache::PagedKvCacheView& view = layers_[layer];
    const int64_t block_size = view.block_size;
    const int64_t row_floats = heads_ * d_k_;
    const float* k = static_cast<const float*>(view.k_cache.data());
    const float* v = static_cast<const float*>(view.v_cache.data());
    for (int64_t start = 0; start < length_; start += block_size) {
      const int64_t block = block_row_[start / block_size];
      const int64_t base = block * block_size * row_floats + head * d_k_;
      out->push_back({k + base, v + base, std::min(block_size, length_ - start), row_floats});
    }
  }

 private:
  const cache::PagedKvCacheView* layers_;
  const int32_t* block_row_;
  int64_t length_;
  int heads_;
  int64_t d_k_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ConformerStreamingModel>> ConformerStreamingModel::Load(
    const std::string& dir, const encoder::EncoderOptions& options) {
  absl::StatusOr<std::unique_ptr<encoder::ConformerModel>> model =
      encoder::ConformerModel::Load(dir);
  if (!model.ok()) return model.status();
  absl::StatusOr<std::unique_ptr<encoder::ConformerEncoder>> enc =
      encoder::ConformerEncoder::Create(model->get(), options);
  if (!enc.ok()) return enc.status();
  return std::unique_ptr<ConformerStreamingModel>(
      new ConformerStreamingModel(std::move(*model), std::move(*enc)));
}

ConformerStreamingModel::ConformerStreamingModel(std::unique_ptr<encoder::ConformerModel> model,
                                                 std::unique_ptr<encoder::ConformerEncoder> encoder)
    : model_(std::move(model)), encoder_(std::move(encoder)) {
  const encoder::ModelConfig& c = model_->config();
  geometry_.feature_dim = c.input_dim;
  geometry_.subsampling = c.subsampling_rate();
  geometry_.right_context = c.right_context();
  geometry_.chunk_size = c.chunk_size;
  geometry_.num_left_chunks = c.num_left_chunks;
  geometry_.vocab_size = c.output_dim;
}

cache::CacheConfig ConformerStreamingModel::BaseCacheConfig() const {
  const encoder::ModelConfig& c = model_->config();
  cache::CacheConfig config;
  config.num_layers = c.num_blocks;
  config.n_kv_head = c.attention_heads;
  config.head_dim = c.head_dim();
  config.hidden_dim = c.output_size;
  config.kernel_size = c.cnn_module_kernel;
  config.dtype = DType::kFloat32;  // The CPU encoder computes in float32.
  config.device = Device::Cpu();
  config.encoder_frame_ms = 10 * c.subsampling_rate();
  return config;
}

absl::StatusOr<std::unique_ptr<encoder::FeaturePipeline>> ConformerStreamingModel::CreateFrontEnd(
    int sample_rate) const {
  encoder::FeaturePipelineOptions options;
  options.sample_rate = sample_rate;
  return encoder::FeaturePipeline::Create(options, &model_->cmvn());
}

absl::Status ConformerStreamingModel::ForwardCohort(std::span<const CohortRow> rows,
                                                    float* log_probs) {
  if (rows.empty()) return absl::OkStatus();
  const encoder::ModelConfig& c = model_->config();
  const int layers = c.num_blocks;
  const int64_t d = c.output_size;
  const int64_t conv_frames = c.cnn_module_kernel - 1;
  const int64_t conv_floats = conv_frames * d;
  const int heads = c.attention_heads;
  const int64_t d_k = c.head_dim();

  // Every row's context shares the managers; the first one's views serve all.
  cache::StreamContext& first = *rows[0].context;
  std::vector<cache::PagedKvCacheView> views(layers);
  for (int l = 0; l < layers; ++l) views[l] = first.GetAttCaches(l);
  const cache::PagedKvCacheView& v0 = views[0];
  const int32_t* table = static_cast<const int32_t*>(v0.block_table.data());
  const int32_t* seqlens = static_cast<const int32_t*>(v0.cache_seqlens.data());

  int64_t total_frames = 0;
  for (const CohortRow& row : rows) total_frames += row.out_frames;
  new_kv_.resize(static_cast<size_t>(layers) * total_frames * 2 * d);
  std::vector<PagedHistory> histories;
  histories.reserve(rows.size());
  std::vector<encoder::ConformerEncoder::CohortStream> streams(rows.size());
  for (size_t b = 0; b < rows.size(); ++b) {
    const CohortRow& row = rows[b];
    const int slot = row.context->slot();
    const int32_t* block_row = table + slot * v0.block_table_stride;
    histories.emplace_back(views.data(), block_row, seqlens[slot], heads, d_k);
    if (row.conv_state.numel() != layers * conv_floats) {
      return absl::InvalidArgumentError(absl::StrCat(
          "conv_state: ", row.conv_state.shape().ToString(), " holds ", row.conv_state.numel(),
          " floats, the model needs ", layers * conv_floats));
    }
    float* conv = static_cast<float*>(row.conv_state.data());
    encoder::ConformerEncoder::CohortStream& s = streams[b];
    s.feats = row.feats;
    s.feat_frames = row.feat_frames;
    s.offset = row.offset;
    s.history = &histories[b];
    s.cnn_cache = conv;
    s.cnn_cache_out = conv;
  }

  if (absl::Status status = encoder_->ForwardCohort(streams, log_probs, new_kv_.data());
      !status.ok()) {
    return status;
  }

  // New K/V rows go to positions [len, len + out) of each stream's blocks,
  // which PrepareChunk reserved.
  int64_t m = 0;
  for (size_t b = 0; b < rows.size(); ++b) {
    const CohortRow& row = rows[b];
    const int slot = row.context->slot();
    const int32_t* block_row = table + slot * v0.block_table_stride;
    const int64_t len = seqlens[slot];
    for (int l = 0; l < layers; ++l) {
      const cache::PagedKvCacheView& view = views[l];
      float* k = static_cast<float*>(view.k_cache.data());
      float* v = static_cast<float*>(view.v_cache.data());
      for (int64_t i = 0; i < row.out_frames; ++i) {
        const int64_t pos = len + i;
        const int64_t dst =
            (static_cast<int64_t>(block_row[pos / view.block_size]) * view.block_size +
             pos % view.block_size) * d;
        const float* src = new_kv_.data() + (static_cast<int64_t>(l) * total_frames + m + i) * 2 * d;
        std::memcpy(k + dst, src, d * sizeof(float));
        std::memcpy(v + dst, src + d, d * sizeof(float));
      }
    }
    m += row.out_frames;
  }
  return absl::OkStatus();
}

}  // namespace oasr::scheduler
