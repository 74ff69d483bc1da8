// A StreamingRecognize call's messages through the server's request
// handling, as server/streaming_call.cc runs it but without a network or an
// engine stream: the first message through CheckFirstMessage and
// ParseStreamingConfig (the API's adapter, then ParseRecognitionConfig
// against the served model: encodings, rates, languages, speech contexts and
// their phrase graph, endpointing), every later one refused if it carries a
// config again, else decoded with DecodeSamples and fed to the model's front
// end at the configured rate (resampling, fbank, CMVN), which is then
// finished and read.
//
// Input: one byte choosing the API (oasr.asr.v1, Riva, Google), then the
// messages, each its serialized bytes after a two-byte little-endian length.
// The model is the bundled one (OASR_FUZZ_MODEL_DIR overrides), loaded once,
// without its language models.
#include <cstdlib>
#include <memory>
#include <vector>

#include "server/google_speech_service.h"
#include "server/riva_service.h"
#include "server/served_model.h"
#include "server/streaming_call.h"
#include "spdlog/spdlog.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using oasr::server::ServedModel;

ServedModel* model = nullptr;

// One call of `Api` over the messages left in `in`.
template <typename Api>
void RunCall(oasr::fuzz::InputReader* in) {
  Api api;
  typename Api::Request first;
  const std::string_view bytes = in->Field();
  if (!first.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return;
  if (!oasr::server::CheckFirstMessage(first).ok()) return;
  absl::StatusOr<oasr::server::ParsedConfig> config =
      oasr::server::ParseStreamingConfig(&api, first, *model);
  if (!config.ok()) return;
  absl::StatusOr<std::unique_ptr<oasr::encoder::FeatureSource>> front_end =
      model->engine().model().CreateFrontEnd(config->request.sample_rate);
  if (!front_end.ok()) std::abort();  // ParseRecognitionConfig accepted the rate.
  std::vector<int16_t> samples;
  while (!in->empty()) {
    typename Api::Request message;
    const std::string_view next = in->Field();
    // gRPC ends a call whose message does not parse.
    if (!message.ParseFromArray(next.data(), static_cast<int>(next.size()))) return;
    if (message.has_streaming_config()) return;  // "sent again": the call fails.
    samples.clear();
    if (!oasr::server::DecodeSamples(config->encoding, message.audio_content(), &samples).ok()) {
      return;
    }
    if (!samples.empty() &&
        !(*front_end)->AcceptPcm16(samples.data(), static_cast<int64_t>(samples.size())).ok()) {
      std::abort();
    }
  }
  if (!(*front_end)->InputFinished().ok()) std::abort();
  const int64_t rows = (*front_end)->NumRowsReady();
  std::vector<float> features(static_cast<size_t>(rows) * 80);
  if (rows > 0 && !(*front_end)->GetRows(0, rows, features.data()).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  spdlog::set_level(spdlog::level::warn);
  const char* dir = std::getenv("OASR_FUZZ_MODEL_DIR");
  oasr::server::ServedModelOptions options;
  options.model.model_dir = dir != nullptr && *dir ? dir : OASR_BUNDLED_MODEL_DIR;
  options.model.use_lm = false;
  absl::StatusOr<std::unique_ptr<ServedModel>> loaded = ServedModel::Load(std::move(options));
  if (!loaded.ok()) {
    spdlog::error("fuzz_streaming_request: {}", loaded.status().ToString());
    std::abort();
  }
  model = loaded->release();  // Lives as long as the process.
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  oasr::fuzz::InputReader in(data, size);
  switch (in.Byte() % 3) {
    case 0:
      RunCall<oasr::server::NativeStreamingApi>(&in);
      break;
    case 1:
      RunCall<oasr::server::RivaStreamingApi>(&in);
      break;
    case 2:
      RunCall<oasr::server::GoogleStreamingApi>(&in);
      break;
  }
  return 0;
}
