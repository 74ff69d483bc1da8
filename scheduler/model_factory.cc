#include "scheduler/model_factory.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "decoder/word_lm.h"
#include "scheduler/conformer_streaming_model.h"
#include "spdlog/spdlog.h"

#if OASR_WITH_CUDA
#include "kernels/wgmma_gemm.h"
#endif

namespace oasr::scheduler {
namespace {

// The directory's language models, then the caller's overrides.
absl::Status ApplyLanguageModels(const ModelOptions& options, const decoder::SymbolTable& units,
                                 decoder::PrefixBeamSearchOptions* search) {
  if (!options.use_lm || options.decoder.method != decoder::SearchMethod::kPrefixBeam) {
    search->lm = nullptr;
    search->word_lm = nullptr;
    return absl::OkStatus();
  }
  OASR_RETURN_IF_ERROR(decoder::UseModelLanguageModel(options.model_dir, units, search).status());
  if (!options.word_lm_path.empty()) {
    OASR_ASSIGN_OR_RETURN(search->word_lm, decoder::WordLm::Load(options.word_lm_path, units));
  }
  if (search->lm != nullptr) {
    if (options.lm_weight.has_value() && *options.lm_weight >= 0.0f)
      search->lm_weight = *options.lm_weight;
    if (options.lm_token_bonus.has_value()) search->lm_token_bonus = *options.lm_token_bonus;
    spdlog::info("language model: order {}, {} n-grams, {:.1f} MiB, weight {}, token bonus {}",
                 search->lm->order(), search->lm->num_ngrams_total(),
                 search->lm->memory_bytes() / 1048576.0, search->lm_weight, search->lm_token_bonus);
  }
  if (search->word_lm != nullptr) {
    if (options.word_lm_weight.has_value()) search->word_lm_weight = *options.word_lm_weight;
    if (options.word_bonus.has_value()) search->word_bonus = *options.word_bonus;
    if (options.unknown_word_penalty.has_value()) {
      search->unknown_word_penalty = *options.unknown_word_penalty;
    }
    const decoder::NgramLm& words = search->word_lm->ngram();
    spdlog::info(
        "word language model: order {}, {} words, {} n-grams, {:.1f} MiB, weight {}, word bonus "
        "{}, unknown word penalty {}",
        words.order(), search->word_lm->num_words(), words.num_ngrams_total(),
        search->word_lm->memory_bytes() / 1048576.0, search->word_lm_weight, search->word_bonus,
        search->unknown_word_penalty);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DType> ParseComputeDType(const std::string& text) {
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    if (text == DTypeName(t)) return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("dtype: '", text, "' is not one of float32, bfloat16, float16"));
}

absl::StatusOr<kernels::StemKernel> ParseStemKernel(const std::string& text) {
  if (text == "recompute") return kernels::StemKernel::kRecompute;
  if (text == "tensor-cores") return kernels::StemKernel::kTensorCores;
  if (text == "implicit-gemm") return kernels::StemKernel::kImplicitGemm;
  return absl::InvalidArgumentError(
      absl::StrCat("stem: '", text, "' is not one of recompute, tensor-cores, implicit-gemm"));
}

absl::StatusOr<Device> ResolveDevice(const std::string& text) {
  if (text == "auto") return DefaultDevice();
  OASR_ASSIGN_OR_RETURN(Device device, ParseDevice(text));
  if (device.is_cuda() && device.index >= CudaDeviceCount()) {
    return absl::UnavailableError(absl::StrCat("device: ", text, " is not usable (",
                                               BuiltWithCuda() ? "" : "built without CUDA; ",
                                               CudaDeviceCount(), " CUDA devices)"));
  }
  return device;
}

absl::Status SetWgmmaK256Flag(const std::string& name) {
  if (name != "default" && name != "stationary" && name != "tiled") {
    return absl::InvalidArgumentError(
        absl::StrCat("--wgmma-k256 '", name, "': expected default, stationary or tiled"));
  }
#if OASR_WITH_CUDA
  if (name != "default") kernels::SetWgmmaWeightStationary(name == "stationary");
#endif
  return absl::OkStatus();
}

absl::StatusOr<bool> ParseKvDType(const std::string& name) {
  if (name == "auto") return false;
  if (name == "float8_e4m3" || name == "fp8") return true;
  return absl::InvalidArgumentError(
      absl::StrCat("--kv-dtype '", name, "': expected auto or float8_e4m3 (fp8)"));
}

absl::Status SetComputeFlags(const std::string& device, const std::string& dtype,
                             ModelOptions* options, const std::string& stem,
                             const std::string& gemm, const std::string& kv_dtype) {
  OASR_ASSIGN_OR_RETURN(options->device, ResolveDevice(device));
  if (!dtype.empty()) {
    OASR_ASSIGN_OR_RETURN(options->dtype, ParseComputeDType(dtype));
  }
  OASR_ASSIGN_OR_RETURN(options->stem, ParseStemKernel(stem));
  if (!kernels::ParseGemmKernel(gemm, &options->gemm)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gemm '", gemm, "': expected auto, cublas, norms, fused or wgmma"));
  }
  OASR_ASSIGN_OR_RETURN(options->kv_fp8, ParseKvDType(kv_dtype));
  return absl::OkStatus();
}

absl::StatusOr<LoadedModel> LoadModel(const ModelOptions& options) {
  ConformerModelOptions m;
  m.device = options.device;
  m.cpu_threads = options.cpu_threads;
  m.encoder.dtype =
      options.dtype.value_or(options.device.is_cuda() ? DType::kBFloat16 : DType::kFloat32);
  m.encoder.stem = options.stem;
  m.encoder.fused_feed_forward = options.fused_feed_forward;
  m.encoder.gemm = options.gemm;
  m.encoder.kv_fp8 = options.kv_fp8;
  m.encoder.max_table_positions = options.max_table_positions > 0
                                      ? options.max_table_positions
                                      : (options.device.is_cuda() ? int64_t{1} << 17 : 16384);
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<ConformerStreamingModel> model,
                        ConformerStreamingModel::Load(options.model_dir, m));
  OASR_ASSIGN_OR_RETURN(decoder::SymbolTable units,
                        decoder::SymbolTable::Load(options.model_dir + "/units.txt"));
  LoadedModel loaded;
  loaded.geometry = model->geometry();
  loaded.dtype = m.encoder.dtype;
  loaded.decoder_config = options.decoder;
  loaded.decoder_config.frame_shift_ms = static_cast<float>(loaded.geometry.FrameShiftMs());
  loaded.decoder_config.min_word_confidence = options.min_word_confidence.value_or(
      static_cast<float>(model->model().config().min_word_confidence));
  OASR_RETURN_IF_ERROR(ApplyLanguageModels(options, units, &loaded.decoder_config.search));
  loaded.units = std::make_shared<const decoder::SymbolTable>(std::move(units));
  OASR_ASSIGN_OR_RETURN(loaded.decoder,
                        decoder::CtcDecoder::Create(loaded.decoder_config, loaded.units));
  spdlog::info("model {}: {} on {}", options.model_dir, DTypeName(loaded.dtype),
               model->context().Describe());
  loaded.model = std::move(model);
  return loaded;
}

absl::StatusOr<std::unique_ptr<encoder::AttentionRescorer>> CreateRescorer(
    const StreamingModel& model, const EngineConfig& config) {
  const auto* conformer = dynamic_cast<const ConformerStreamingModel*>(&model);
  if (conformer == nullptr || conformer->model().attention_decoder() == nullptr) return nullptr;
  if (!config.attention_rescoring) {
    spdlog::info("attention rescoring: off (the model has an attention decoder)");
    return nullptr;
  }
  if (config.decoder.method != decoder::SearchMethod::kPrefixBeam) {
    spdlog::info("attention rescoring: off (the greedy search has no n-best to rescore)");
    return nullptr;
  }
  encoder::RescorerOptions options;
  options.max_frames = static_cast<int64_t>(
      std::ceil(config.rescoring_max_segment_s * 1000.0 / model.geometry().FrameShiftMs()));
  if (model.context().is_cuda()) {
    // Finals of a cohort are rescored together: room for many segments and
    // their hypotheses in one pass (about 0.3 GB of buffers at d = 256,
    // V = 5000).
    options.max_rows = std::max<int64_t>(8192, options.max_frames + 1);
    options.max_batch_frames = 4 * options.max_frames;
    // The decoder's linears in the encoder's dtype (bfloat16 by default on
    // CUDA: the tensor cores).
    options.dtype = conformer->encoder().dtype();
  }
  return encoder::AttentionRescorer::Create(&conformer->model(), &model.context(), options);
}

absl::StatusOr<std::unique_ptr<Engine>> LoadEngine(const ModelOptions& options,
                                                   const EngineConfig& config) {
  OASR_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(options));
  EngineConfig engine_config = config;
  engine_config.decoder = loaded.decoder_config;
  OASR_ASSIGN_OR_RETURN(std::unique_ptr<encoder::AttentionRescorer> rescorer,
                        CreateRescorer(*loaded.model, engine_config));
  return Engine::Create(engine_config, std::move(loaded.model), std::move(loaded.decoder),
                        std::move(rescorer));
}

}  // namespace oasr::scheduler
