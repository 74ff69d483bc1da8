// The model a server serves: its directory loaded, the decoder built, and
// the scheduler::Engine that runs every stream, plus the facts ListModels
// reports.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "decoder/symbol_table.h"
#include "oasr/asr/v1/asr.pb.h"
#include "scheduler/engine.h"
#include "scheduler/model_factory.h"

namespace oasr::server {

struct ServedModelOptions {
  // The directory, device, threads and decoding (model.model_dir is the
  // directory served).
  scheduler::ModelOptions model;
  std::string name;  // Name clients pass as `model`; empty: the directory's name.
  std::string language_code = "en-US";
  scheduler::EngineConfig engine;  // Slots, waiting queue, buffers.
};

// Immutable after Load except for the engine, which is thread-safe.
class ServedModel {
 public:
  // Loads the model and starts its engine. Errors are the loaders' (they name
  // the file or field) or Engine::Create's (INVALID_ARGUMENT for a bad
  // config, RESOURCE_EXHAUSTED when the pool cannot be allocated).
  static absl::StatusOr<std::unique_ptr<ServedModel>> Load(ServedModelOptions options);

  // Stops the engine: every open stream ends with "cancelled". Idempotent.
  void Stop() { engine_->Stop(); }

  scheduler::Engine& engine() { return *engine_; }
  const scheduler::Engine& engine() const { return *engine_; }
  const decoder::SymbolTable& units() const { return engine_->decoder().units(); }
  // What ListModels reports for this model.
  const asr::v1::ModelInfo& info() const { return info_; }
  const std::string& name() const { return info_.name(); }
  // The rate the model's front end runs at, in Hz.
  int sample_rate() const { return info_.sample_rate_hertz(); }

 private:
  ServedModel() = default;

  std::unique_ptr<scheduler::Engine> engine_;
  asr::v1::ModelInfo info_;
};

}  // namespace oasr::server
