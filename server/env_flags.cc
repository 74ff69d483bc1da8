#include "server/env_flags.h"

#include <cctype>
#include <cstdlib>
#include <vector>

namespace oasr::server {
namespace {

std::string LongName(const CLI::Option& option) {
  const std::vector<std::string>& names = option.get_lnames();
  return names.empty() ? std::string() : names.front();
}

// A flag whose presence stores false: CLI11 negates "1" into "false" when it
// parses the command line, but hands an environment value over unchanged.
bool IsNegatedFlag(const CLI::Option& option) {
  if (option.get_expected_min() != 0) return false;
  const std::string name = LongName(option);
  return !name.empty() && option.get_flag_value(name, "true") == "false";
}

}  // namespace

std::string EnvironmentName(const std::string& prefix, const std::string& long_name) {
  std::string name = prefix;
  for (const char c : long_name) {
    name.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  }
  return name;
}

void ReadOptionsFromEnvironment(CLI::App* app, const std::string& prefix) {
  std::vector<CLI::Option*> negated;
  for (CLI::Option* option : app->get_options()) {
    const std::string name = LongName(*option);
    if (name.empty() || option == app->get_help_ptr() || option == app->get_config_ptr() ||
        name == "version") {
      continue;
    }
    if (IsNegatedFlag(*option)) {
      negated.push_back(option);
    } else {
      option->envname(EnvironmentName(prefix, name));
    }
  }
  if (negated.empty()) return;
  // After the command line and the config file: a flag neither gave reads
  // its variable the way the command line would have read `--flag=VALUE`.
  app->parse_complete_callback([negated, prefix] {
    for (CLI::Option* option : negated) {
      if (option->count() != 0) continue;
      const std::string name = LongName(*option);
      const char* value = std::getenv(EnvironmentName(prefix, name).c_str());
      if (value == nullptr || *value == '\0') continue;
      option->add_result(option->get_flag_value(name, value));
      option->run_callback();
    }
  });
}

}  // namespace oasr::server
