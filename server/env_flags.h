// Every command-line option of a CLI11 app also read from an environment
// variable, so a container or a Kubernetes manifest can set any flag without
// repeating the entrypoint (`-e OASR_MAX_ACTIVE_STREAMS=128`).
#pragma once

#include <string>

#include "CLI/CLI.hpp"

namespace oasr::server {

// The variable `--max-active-streams` reads: `prefix` plus the long name in
// upper case with '-' as '_' ("OASR_" -> "OASR_MAX_ACTIVE_STREAMS").
std::string EnvironmentName(const std::string& prefix, const std::string& long_name);

// Gives every option of `app` added so far (not --help, --version nor the
// config-file option, which are read before the environment is) its
// EnvironmentName. Precedence: the command line, then the config file, then
// the environment, then the default; an empty variable counts as unset.
// Negated flags ("!--no-lm") read "1"/"true" as "given", as on the command
// line. Call once, after the last add_option and before parsing; `app` must
// outlive the parse.
void ReadOptionsFromEnvironment(CLI::App* app, const std::string& prefix);

}  // namespace oasr::server
