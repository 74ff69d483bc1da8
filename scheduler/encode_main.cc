// oasr-encode: raw fbank features (.npy, float32 [T, feature_dim]) through the
// model's streaming encoder chunk by chunk, as the engine runs it (the
// model's chunk, the engine's history), on any device and dtype; writes the
// CTC log-probs (.npy, float32 [frames, vocab]). For parity checks against
// other implementations (tools/gpu/parity.py) and for looking at what the
// encoder computes without a front end or decoder in the way.
//
// Exit status: 0 on success, 1 when the encoder fails, 2 for bad arguments or
// a model that does not load.
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/logging.h"
#include "common/status.h"
#include "encoder/npy_io.h"
#include "scheduler/conformer_streaming_model.h"
#include "scheduler/model_factory.h"

namespace oasr::scheduler {
namespace {

absl::Status Encode(ConformerStreamingModel& model, const std::string& feats_path, int chunk,
                    int left, const std::string& out_path) {
  const encoder::ModelConfig& c = model.model().config();
  OASR_ASSIGN_OR_RETURN(Tensor feats, encoder::ReadNpyFloat32(feats_path));
  if (feats.shape().rank() != 2 || feats.dim(1) != c.input_dim) {
    return absl::InvalidArgumentError(absl::StrCat(feats_path, ": shape ", feats.shape().ToString(),
                                                   ", expected [T, ", c.input_dim, "]"));
  }
  model.model().cmvn().Apply(feats.data<float>(), feats.dim(0));
  encoder::ConformerEncoder& encoder = model.encoder();
  OASR_ASSIGN_OR_RETURN(
      Tensor att,
      Tensor::Zeros({c.num_blocks, c.attention_heads, 0, 2 * c.head_dim()}, DType::kFloat32));
  OASR_ASSIGN_OR_RETURN(Tensor cnn, Tensor::Zeros(encoder.ConvStateShape(), DType::kFloat32));
  const int required = left < 0 ? -1 : chunk * left;
  std::vector<float> log_probs;
  int64_t offset = 0;
  for (int64_t start = 0; start + c.right_context() < feats.dim(0);
       start += int64_t{chunk} * c.subsampling_rate()) {
    const int64_t n = std::min<int64_t>(c.WindowFrames(chunk), feats.dim(0) - start);
    encoder::DenseChunkInput in;
    in.feats = feats.view().Slice(start, n);
    in.offset = offset;
    in.att_cache = att.view();
    in.cnn_cache = cnn.view();
    OASR_ASSIGN_OR_RETURN(encoder::DenseChunkOutput out, encoder.ForwardChunk(in, required));
    log_probs.insert(log_probs.end(), out.log_probs.data<float>(),
                     out.log_probs.data<float>() + out.log_probs.numel());
    offset += out.log_probs.dim(0);
    att = std::move(out.att_cache);
    cnn = std::move(out.cnn_cache);
  }
  return encoder::WriteNpyFloat32(out_path, TensorView(log_probs.data(), DType::kFloat32,
                                                       {offset, c.output_dim}, Device::Cpu()));
}

int Main(int argc, char** argv) {
  CLI::App app{"oasr-encode: fbank features through the streaming encoder, CTC log-probs out"};
  std::string model_dir, feats, out, device = "auto", dtype, log_level = "warn";
  int chunk = 0, left = -2, threads = 1;
  app.add_option("--model-dir", model_dir, "Model directory (docs/model-format.md)")->required();
  app.add_option("--feats", feats, "Raw fbank features, .npy float32 [T, feature_dim]")->required();
  app.add_option("--out", out, "Log-probs out, .npy float32 [frames, vocab]")->required();
  app.add_option("--device", device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--dtype", dtype, "float32, bfloat16 or float16 (default: the device's)");
  app.add_option("--chunk", chunk, "Encoder frames per chunk (default: the model's)");
  app.add_option("--num-left-chunks", left,
                 "Chunks of history kept (-1 all; default: the model's)");
  app.add_option("--threads", threads, "CPU threads")->check(CLI::Range(1, 256));
  app.add_option("--log-level", log_level, "stderr log level");
  CLI11_PARSE(app, argc, argv);
  if (absl::Status s = InitLogging(log_level); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  ModelOptions options;
  options.model_dir = model_dir;
  options.cpu_threads = threads;
  if (absl::Status s = SetComputeFlags(device, dtype, &options); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  absl::StatusOr<LoadedModel> loaded = LoadModel(options);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
    return 2;
  }
  auto* model = dynamic_cast<ConformerStreamingModel*>(loaded->model.get());
  const ModelGeometry& g = loaded->geometry;
  if (chunk <= 0) chunk = g.chunk_size;
  if (left == -2) left = g.num_left_chunks;
  if (absl::Status s = Encode(*model, feats, chunk, left, out); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace oasr::scheduler

int main(int argc, char** argv) { return oasr::scheduler::Main(argc, argv); }
