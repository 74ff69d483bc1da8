// Command-line flags of the prefix beam search's pruning, shared by the
// server and the tools (CLI11, header-only).
#pragma once

#include "CLI/CLI.hpp"

namespace oasr::scheduler {

// --blank-skip and --token-beam (decoder::PrefixBeamSearchOptions'
// blank_skip_threshold and token_beam), bound to the given floats.
inline void AddBeamPruningFlags(CLI::App& app, float* blank_skip, float* token_beam) {
  app.add_option("--blank-skip", *blank_skip,
                 "Beam search: frames whose P(blank) is at least this only take the blank (0: off)")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  app.add_option("--token-beam", *token_beam,
                 "Beam search: expand only tokens within this many nats of a frame's best (0: off)")
      ->check(CLI::Range(0.0f, 100.0f))
      ->capture_default_str();
}

}  // namespace oasr::scheduler
