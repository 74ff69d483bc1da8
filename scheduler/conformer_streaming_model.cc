#include "scheduler/conformer_streaming_model.h"

#include "absl/strings/str_cat.h"
#include "cache/cnn_cache_manager.h"
#include "common/status.h"
#include "encoder/fbank.h"
#include "encoder/feature_pipeline.h"
#include "encoder/pcm_source.h"
#include "kernels/log_mel.h"

namespace oasr::scheduler {

absl::StatusOr<std::unique_ptr<ConformerStreamingModel>> ConformerStreamingModel::Load(
    const std::string& dir, const ConformerModelOptions& options) {
  ExecutionContextOptions ctx_options;
  ctx_options.device = options.device;
  ctx_options.cpu_threads = options.cpu_threads;
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<ExecutionContext> ctx,
                        ExecutionContext::Create(ctx_options));
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<encoder::ConformerModel> model,
                        encoder::ConformerModel::Load(dir));
  std::unique_ptr<ConformerStreamingModel> m(
      new ConformerStreamingModel(std::move(ctx), std::move(model)));
  OASR_ASSIGN_OR_RETURN(m->encoder_, encoder::ConformerEncoder::Create(
                                         m->model_.get(), m->ctx_.get(), options.encoder));
  OASR_RETURN_IF_ERROR(m->UploadFrontEndTables());
  return m;
}

ConformerStreamingModel::ConformerStreamingModel(std::unique_ptr<ExecutionContext> ctx,
                                                 std::unique_ptr<encoder::ConformerModel> model)
    : ctx_(std::move(ctx)), model_(std::move(model)) {
  const encoder::ModelConfig& c = model_->config();
  geometry_.feature_dim = c.input_dim;
  geometry_.subsampling = c.subsampling_rate();
  geometry_.right_context = c.right_context();
  geometry_.chunk_size = c.chunk_size;
  geometry_.num_left_chunks = c.num_left_chunks;
  geometry_.vocab_size = c.output_dim;
  geometry_.encoder_dim = c.output_size;
  geometry_.feature_shift_ms = 10.0;  // The front end's Kaldi fbank: 25 ms windows every 10 ms.
}

cache::CacheConfig ConformerStreamingModel::BaseCacheConfig() const {
  const encoder::ModelConfig& c = model_->config();
  cache::CacheConfig config;
  config.num_layers = c.num_blocks;
  config.n_kv_head = c.attention_heads;
  config.head_dim = c.head_dim();
  config.kernel_size = c.cnn_module_kernel;
  config.hidden_dim = c.output_size;
  config.dtype = encoder_->kv_dtype();
  config.device = ctx_->device();
  config.encoder_frame_ms = static_cast<int>(geometry_.FrameShiftMs());
  return config;
}

std::vector<cache::StreamStateSpec> ConformerStreamingModel::StreamStates() const {
  cache::StreamStateSpec conv;
  conv.name = cache::CnnCacheManager::kStateName;
  conv.per_slot_shape = encoder_->ConvStateShape();
  conv.slot_axis = 1;
  conv.dtype = encoder_->dtype();
  return {conv};
}

size_t ConformerStreamingModel::WorkspaceBytes(int max_batch) const {
  return encoder_->WorkspaceBytes(max_batch, geometry_.chunk_size);
}

// Enough zeros after the last sample that it lies in a whole fbank window
// followed by the subsampling's right context: the final chunk then covers
// all the audio (audio_processed reaches the audio sent, within a frame)
// instead of dropping its last 45-85 ms.
int ConformerStreamingModel::TailPaddingSamples() const {
  return encoder::Fbank::kFrameLength +
         model_->config().right_context() * encoder::Fbank::kFrameShift;
}

absl::StatusOr<std::unique_ptr<encoder::FeatureSource>> ConformerStreamingModel::CreateFrontEnd(
    int sample_rate) const {
  encoder::FeaturePipelineOptions options;
  options.sample_rate = sample_rate;
  options.tail_padding_samples = TailPaddingSamples();
  return encoder::FeaturePipeline::Create(options, &model_->cmvn());
}

absl::StatusOr<std::unique_ptr<encoder::FeatureSource>>
ConformerStreamingModel::CreateDeviceFrontEnd(int sample_rate) const {
  encoder::FeaturePipelineOptions options;
  options.sample_rate = sample_rate;
  options.tail_padding_samples = TailPaddingSamples();
  return encoder::PcmSource::Create(options);
}

absl::Status ConformerStreamingModel::UploadFrontEndTables() {
  const encoder::GlobalCmvn& cmvn = model_->cmvn();
  constexpr int kBins = encoder::Fbank::kNumBins;
  if (geometry_.feature_dim != kBins || cmvn.dim() != kBins) {
    return absl::InvalidArgumentError(absl::StrCat("model features: ", geometry_.feature_dim,
                                                   " bins and CMVN of ", cmvn.dim(),
                                                   ", the front end computes ", kBins));
  }
  std::vector<float> window, mel;
  encoder::Fbank::DenseTables(&window, &mel);
  std::vector<float> tables = window;
  tables.insert(tables.end(), mel.begin(), mel.end());
  tables.insert(tables.end(), cmvn.mean().begin(), cmvn.mean().end());
  tables.insert(tables.end(), cmvn.istd().begin(), cmvn.istd().end());
  const int64_t n = static_cast<int64_t>(tables.size());
  OASR_ASSIGN_OR_RETURN(front_end_tables_, Tensor::Empty({n}, DType::kFloat32, ctx_->device()));
  OASR_RETURN_IF_ERROR(CopyTensor(front_end_tables_.view(),
                                  TensorView(tables.data(), DType::kFloat32, {n}, Device::Cpu())));
  // The mel rows' nonzero spans, so that the filterbank's blocks need not
  // find them in the dense table.
  std::vector<int32_t> spans = kernels::MelSpans(mel.data(), kBins);
  const int64_t s = static_cast<int64_t>(spans.size());
  OASR_ASSIGN_OR_RETURN(front_end_spans_, Tensor::Empty({s}, DType::kInt32, ctx_->device()));
  return CopyTensor(front_end_spans_.view(),
                    TensorView(spans.data(), DType::kInt32, {s}, Device::Cpu()));
}

absl::Status ConformerStreamingModel::ComputeFeatures(const CohortPlan& plan) {
  const Device device = ctx_->device();
  const int64_t window = geometry_.WindowFrames(plan.chunk);
  const int64_t stride = encoder::PcmSource::WindowSamples(window);
  if (plan.pcm.dtype() != DType::kFloat32 || !(plan.pcm.device() == device) ||
      plan.pcm.rank() != 2 || plan.pcm.dim(0) < plan.batch || plan.pcm.dim(1) < stride ||
      plan.feat_frames.dtype() != DType::kInt32 || !(plan.feat_frames.device() == device) ||
      plan.feat_frames.numel() < plan.batch || plan.feats.dtype() != DType::kFloat32 ||
      plan.feats.numel() < plan.batch * window * geometry_.feature_dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("cohort plan: pcm ", plan.pcm.shape().ToString(), " and feat_frames ",
                     plan.feat_frames.shape().ToString(), " on ", plan.pcm.device().ToString(),
                     "; the device front end needs float32 [", plan.batch, ", >= ", stride,
                     "] and int32 [", plan.batch, "] on ", device.ToString()));
  }
  if (!plan.pcm_ring.empty()) {
    const int64_t width = encoder::PcmSource::kLayout.width;
    const int64_t window_rows = encoder::PcmSource::kLayout.WindowRows(window);
    if (plan.pcm_ring.dtype() != DType::kInt16 || plan.pcm_ring.rank() != 3 ||
        plan.pcm_ring.dim(1) < window_rows || plan.pcm_ring.dim(2) != width ||
        plan.pcm_ring_starts.dtype() != DType::kInt32 ||
        plan.pcm_ring_starts.numel() < plan.batch) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cohort plan: pcm ring ", plan.pcm_ring.shape().ToString(), " and starts ",
          plan.pcm_ring_starts.shape().ToString(), "; the gather needs int16 [lanes, rows, ", width,
          "], rows >= ", window_rows, ", and int32 [", plan.batch, "]"));
    }
    kernels::GatherPcmParams g;
    g.ring = static_cast<const int16_t*>(plan.pcm_ring.data());
    g.ring_rows = plan.pcm_ring.dim(1);
    g.width = static_cast<int>(width);
    g.slots = static_cast<const int32_t*>(plan.slots.data());
    g.starts = static_cast<const int32_t*>(plan.pcm_ring_starts.data());
    g.feat_frames = static_cast<const int32_t*>(plan.feat_frames.data());
    g.rows = plan.batch;
    g.window_rows = static_cast<int>(window_rows);
    g.out = static_cast<float*>(plan.pcm.data());
    g.out_stride = plan.pcm.dim(1);
    OASR_RETURN_IF_ERROR(kernels::GatherPcm(*ctx_, g));
  }
  const float* tables = front_end_tables_.data<float>();
  kernels::LogMelParams p;
  p.pcm = static_cast<const float*>(plan.pcm.data());
  p.pcm_stride = plan.pcm.dim(1);
  p.frames = static_cast<const int32_t*>(plan.feat_frames.data());
  p.rows = plan.batch;
  p.max_frames = static_cast<int>(window);
  p.bins = geometry_.feature_dim;
  p.window = tables;
  p.mel = p.window + kernels::kLogMelWindowFloats;
  p.mel_spans = front_end_spans_.data<int32_t>();
  p.mean = p.mel + int64_t{p.bins} * kernels::kLogMelFftBins;
  p.istd = p.mean + p.bins;
  p.out = static_cast<float*>(plan.feats.data());
  return kernels::LogMel(*ctx_, p);
}

absl::Status ConformerStreamingModel::ForwardCohort(const CohortPlan& plan,
                                                    const TensorView& log_probs) {
  if (plan.batch == 0) return absl::OkStatus();
  const encoder::ModelConfig& c = model_->config();
  const Device device = ctx_->device();
  const TensorView* fields[] = {&plan.slots,       &plan.frames,     &plan.offsets,
                                &plan.feats,       &plan.k_pool,     &plan.v_pool,
                                &plan.block_table, &plan.cache_lens, &log_probs};
  for (const TensorView* v : fields) {
    if (v->empty() || !(v->device() == device)) {
      return absl::InvalidArgumentError(absl::StrCat("cohort plan: a tensor is missing or not on ",
                                                     device.ToString(), " (got ",
                                                     v->device().ToString(), ")"));
    }
  }
  if (plan.k_pool.dtype() != encoder_->kv_dtype() || plan.k_pool.rank() != 5 ||
      plan.k_pool.dim(0) != c.num_blocks || plan.k_pool.dim(3) != c.attention_heads ||
      plan.k_pool.dim(4) != c.head_dim() || !(plan.v_pool.shape() == plan.k_pool.shape())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cohort plan: K/V pool ", DTypeName(plan.k_pool.dtype()), plan.k_pool.shape().ToString(),
        ", the model needs ", DTypeName(encoder_->dtype()), " [", c.num_blocks, ", blocks, block, ",
        c.attention_heads, ", ", c.head_dim(), "]"));
  }
  if (plan.states.size() != 1 || plan.states[0].dtype() != encoder_->dtype() ||
      plan.states[0].rank() != 4 || plan.states[0].dim(0) != c.num_blocks ||
      plan.states[0].dim(2) != c.cnn_module_kernel - 1 || plan.states[0].dim(3) != c.output_size) {
    return absl::InvalidArgumentError(
        "cohort plan: the conv state must be StreamStates()'s one tensor (layers, slots, K - 1, "
        "d)");
  }
  if (log_probs.dtype() != DType::kFloat32 ||
      log_probs.numel() < int64_t{plan.batch} * plan.chunk * c.output_dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("cohort plan: log_probs ", log_probs.shape().ToString(), " holds fewer than [",
                     plan.batch, ", ", plan.chunk, ", ", c.output_dim, "] float32"));
  }
  if (plan.host_slots.size() < static_cast<size_t>(plan.batch) ||
      plan.host_frames.size() < static_cast<size_t>(plan.batch) ||
      plan.host_offsets.size() < static_cast<size_t>(plan.batch)) {
    return absl::InvalidArgumentError(
        "cohort plan: the host row arrays are shorter than the batch");
  }
  float* encoder_out = nullptr;
  if (!plan.encoder_out.empty()) {
    if (plan.encoder_out.dtype() != DType::kFloat32 || !(plan.encoder_out.device() == device) ||
        plan.encoder_out.numel() < int64_t{plan.batch} * plan.chunk * c.output_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cohort plan: encoder_out ", plan.encoder_out.shape().ToString(), " holds fewer than [",
          plan.batch, ", ", plan.chunk, ", ", c.output_size, "] float32 on ", device.ToString()));
    }
    encoder_out = static_cast<float*>(plan.encoder_out.data());
  }
  if (!plan.pcm.empty()) OASR_RETURN_IF_ERROR(ComputeFeatures(plan));
  encoder::CohortInputs in;
  in.batch = plan.batch;
  in.chunk = plan.chunk;
  in.feats = static_cast<const float*>(plan.feats.data());
  in.slots = static_cast<const int32_t*>(plan.slots.data());
  in.frames = static_cast<const int32_t*>(plan.frames.data());
  in.offsets = static_cast<const int32_t*>(plan.offsets.data());
  in.host_slots = plan.host_slots.data();
  in.host_frames = plan.host_frames.data();
  in.host_offsets = plan.host_offsets.data();
  encoder::PagedKv kv;
  kv.k = plan.k_pool.data();
  kv.v = plan.v_pool.data();
  kv.num_blocks = plan.k_pool.dim(1);
  kv.block_size = static_cast<int>(plan.k_pool.dim(2));
  kv.block_table = static_cast<const int32_t*>(plan.block_table.data());
  kv.cache_lens = static_cast<const int32_t*>(plan.cache_lens.data());
  kv.host_block_table = static_cast<const int32_t*>(plan.host_block_table.data());
  kv.host_cache_lens = static_cast<const int32_t*>(plan.host_cache_lens.data());
  kv.table_stride = plan.block_table.dim(1);
  encoder::ConvStates conv{plan.states[0].data(), plan.states[0].dim(1)};
  return encoder_->ForwardCohort(in, kv, conv, static_cast<float*>(log_probs.data()), encoder_out);
}

}  // namespace oasr::scheduler
