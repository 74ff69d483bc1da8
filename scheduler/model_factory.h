// The one place a model directory becomes what serves it: the execution
// context on the chosen device, the streaming model, the units, the language
// models and the CTC decoder, with the decoder's frame clock taken from the
// model. oasr-server, oasr-transcribe, the benchmarks and the tests all build
// through here, so no caller knows the encoder's types.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/dtype.h"
#include "decoder/ctc_decoder.h"
#include "decoder/symbol_table.h"
#include "kernels/conv2d.h"
#include "kernels/linear.h"
#include "scheduler/engine.h"
#include "scheduler/engine_config.h"
#include "scheduler/streaming_model.h"

namespace oasr::scheduler {

struct ModelOptions {
  std::string model_dir;  // docs/model-format.md
  Device device = Device::Cpu();
  // Compute dtype; unset: float32 on the CPU, bfloat16 on CUDA.
  std::optional<DType> dtype;
  int cpu_threads = 1;  // The CPU compute pool (and OpenBLAS).
  // linear_pos(pe) rows kept per layer; 0: 16384 on the CPU (filled on
  // demand), 131072 on CUDA (computed at load, about 87 minutes of audio).
  int64_t max_table_positions = 0;
  // CUDA: how the subsampling stem computes its first stage
  // (encoder::EncoderOptions::stem).
  kernels::StemKernel stem = kernels::StemKernel::kImplicitGemm;
  // CUDA: the feed-forward modules as one kernel each
  // (encoder::EncoderOptions::fused_feed_forward).
  bool fused_feed_forward = false;
  // CUDA: which kernel computes the products (encoder::EncoderOptions::gemm).
  kernels::GemmKernel gemm = kernels::GemmKernel::kAuto;
  // The K/V pool in float8 e4m3 (encoder::EncoderOptions::kv_fp8): half its
  // memory a stream.
  bool kv_fp8 = false;

  // Decoding. `decoder.frame_shift_ms` is replaced by the model's clock, and
  // `decoder.min_word_confidence` by min_word_confidence when set, else the
  // model's config.json serving.min_word_confidence (0 when it has none).
  decoder::CtcDecoderConfig decoder;
  std::optional<float> min_word_confidence;
  bool use_lm = true;  // The directory's lm.json, with the beam search.
  std::optional<float> lm_weight, lm_token_bonus;
  std::string word_lm_path;  // Overrides lm.json's word model.
  std::optional<float> word_lm_weight, word_bonus, unknown_word_penalty;
};

// What LoadModel returns; the model and decoder move into an Engine.
struct LoadedModel {
  std::unique_ptr<StreamingModel> model;
  std::unique_ptr<decoder::CtcDecoder> decoder;
  std::shared_ptr<const decoder::SymbolTable> units;
  ModelGeometry geometry;
  // The decoder's configuration as built (language models, frame shift).
  decoder::CtcDecoderConfig decoder_config;
  DType dtype = DType::kFloat32;
};

// Loads `options.model_dir` onto `options.device`. Errors name the file,
// tensor or field (the loaders'), or the option (INVALID_ARGUMENT for a dtype
// the device does not compute in, or a bad decoder option).
absl::StatusOr<LoadedModel> LoadModel(const ModelOptions& options);

// LoadModel, then an Engine over it with `config` (its decoder field is
// ignored: the loaded decoder serves).
// The attention rescorer for `model` under `config`: nullptr when the model
// has no attention decoder, or config turns rescoring off, or the search is
// greedy; each but the first is logged. It computes on the model's context
// (the CPU or CUDA, there with the encoder's dtype).
absl::StatusOr<std::unique_ptr<encoder::AttentionRescorer>> CreateRescorer(
    const StreamingModel& model, const EngineConfig& config);

absl::StatusOr<std::unique_ptr<Engine>> LoadEngine(const ModelOptions& options,
                                                   const EngineConfig& config);

// "float32", "bfloat16" or "float16"; INVALID_ARGUMENT naming the value otherwise.
absl::StatusOr<DType> ParseComputeDType(const std::string& text);

// "recompute", "tensor-cores" or "implicit-gemm" (kernels::StemKernel); INVALID_ARGUMENT
// naming the value otherwise.
absl::StatusOr<kernels::StemKernel> ParseStemKernel(const std::string& text);

// "auto" (the first GPU when one is usable, else the CPU), "cpu", "cuda" or
// "cuda:N"; INVALID_ARGUMENT naming the value otherwise, UNAVAILABLE for a
// CUDA device this build or machine does not have.
absl::StatusOr<Device> ResolveDevice(const std::string& text);

// The tools' --device, --dtype, --stem and --gemm flags into `options`:
// ResolveDevice, ParseComputeDType unless `dtype` is empty (the device's
// default then), ParseStemKernel and kernels::ParseGemmKernel
// (INVALID_ARGUMENT naming a value it does not know).
absl::Status SetComputeFlags(const std::string& device, const std::string& dtype,
                             ModelOptions* options, const std::string& stem = "implicit-gemm",
                             const std::string& gemm = "auto",
                             const std::string& kv_dtype = "auto");
// The --kv-dtype flag: "auto" (the compute dtype) -> false, "float8_e4m3"
// (or "fp8") -> true; INVALID_ARGUMENT for anything else.
absl::StatusOr<bool> ParseKvDType(const std::string& name);
inline constexpr char kKvDTypeFlagHelp[] =
    "The K/V pool's dtype: auto (the compute dtype) or float8_e4m3 (fp8: half the pool's memory "
    "a stream; the CPU, and CUDA in 16 bits)";
// The benchmarks' --wgmma-k256 flag (an A/B switch): "default" leaves the
// library's choice; "stationary" or "tiled" runs the wgmma kernel's
// products with k <= 256 weight-stationary or on its 128 x 256 tiles
// (kernels::SetWgmmaWeightStationary, process-wide; CUDA builds).
// INVALID_ARGUMENT for anything else.
absl::Status SetWgmmaK256Flag(const std::string& name);
inline constexpr char kWgmmaK256FlagHelp[] =
    "CUDA: the wgmma kernel's products with k <= 256 weight-stationary or on its 128 x 256 "
    "tiles (an A/B switch: stationary, tiled, or default)";
// The --gemm flag's help, for the tools that offer it.
inline constexpr char kGemmFlagHelp[] =
    "CUDA, 16-bit: the products on cublas, on the project's wgmma kernel where its epilogue "
    "saves a pass (norms: the residual products' layer norms from a wave of tiles up; fused: "
    "those and swish's; epilogues: fused's from a wave up) or everywhere (wgmma), or auto";

}  // namespace oasr::scheduler
