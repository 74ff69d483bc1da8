#include "scheduler/conformer_streaming_model.h"

#include "absl/strings/str_cat.h"
#include "cache/attention_cache_manager.h"
#include "cache/cnn_cache_manager.h"
#include "encoder/feature_pipeline.h"

namespace oasr::scheduler {

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
  // The conv cache's extent is the encoder's declared state (layers, K - 1, d).
  const Shape conv = StreamStates()[0].per_slot_shape;
  config.kernel_size = static_cast<int>(conv[1]) + 1;
  config.hidden_dim = static_cast<int>(conv[2]);
  config.dtype = DType::kFloat32;  // The CPU encoder computes in float32.
  config.device = Device::Cpu();
  config.encoder_frame_ms = 10 * c.subsampling_rate();
  return config;
}

std::vector<cache::StreamStateSpec> ConformerStreamingModel::StreamStates() const {
  cache::StreamStateSpec conv;
  conv.name = cache::CnnCacheManager::kStateName;
  conv.per_slot_shape = encoder_->ConvStateShape();
  conv.slot_axis = 1;
  conv.dtype = DType::kFloat32;
  return {conv};
}

absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> ConformerStreamingModel::CreateFrontEnd(
    int sample_rate) const {
  encoder::FeaturePipelineOptions options;
  options.sample_rate = sample_rate;
  return encoder::FeaturePipeline::Create(options, &model_->cmvn());
}

absl::Status ConformerStreamingModel::ForwardCohort(std::span<const CohortRow> rows,
                                                    float* log_probs) {
  if (rows.empty()) return absl::OkStatus();
  const int layers = model_->config().num_blocks;
  const int64_t conv_floats = encoder_->ConvStateShape().numel();

  // Every row's context shares the managers; the first one's views serve all.
  // Translate them into the encoder's plain pool description.
  cache::StreamContext& first = *rows[0].context;
  pool_.resize(layers);
  for (int l = 0; l < layers; ++l) {
    const cache::PagedKvCacheView view = first.GetAttCaches(l);
    if (view.k_cache.dtype() != DType::kFloat32 || !view.k_cache.device().is_cpu()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "paged K/V pool: ", DTypeName(view.k_cache.dtype()), " on ",
          view.k_cache.device().ToString(), "; the CPU encoder needs float32 on the CPU"));
    }
    pool_[l] = encoder::PagedKvLayer{static_cast<float*>(view.k_cache.data()),
                                     static_cast<float*>(view.v_cache.data()),
                                     view.k_cache.dim(0), view.block_size};
  }
  const cache::PagedKvCacheView v0 = first.GetAttCaches(0);
  const int32_t* table = static_cast<const int32_t*>(v0.block_table.data());
  const int32_t* seqlens = static_cast<const int32_t*>(v0.cache_seqlens.data());

  inputs_.resize(rows.size());
  for (size_t b = 0; b < rows.size(); ++b) {
    const CohortRow& row = rows[b];
    if (row.conv_state.numel() != conv_floats) {
      return absl::InvalidArgumentError(absl::StrCat(
          "conv_state: ", row.conv_state.shape().ToString(), " holds ", row.conv_state.numel(),
          " floats, the model needs ", conv_floats));
    }
    const int slot = row.context->slot();
    encoder::PagedChunkInput& in = inputs_[b];
    in.feats = row.feats;
    in.feat_frames = row.feat_frames;
    in.offset = row.offset;
    in.kv = encoder::PagedKvRow{table + slot * v0.block_table_stride, seqlens[slot]};
    in.cnn_cache = static_cast<float*>(row.conv_state.data());
  }
  return encoder_->ForwardChunksPaged(pool_, inputs_, log_probs);
}

}  // namespace oasr::scheduler
