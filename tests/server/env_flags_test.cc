// Flags read from OASR_* variables (issue 20: a container sets any flag
// without repeating the entrypoint).
#include "server/env_flags.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

namespace oasr::server {
namespace {

// A small app shaped like oasr-server's: an int, a double, a string, a
// negated flag, a plain flag, plus --help/--version/--config.
struct Parsed {
  int port = 50051;
  double grace = 7.0;
  std::string model_dir;
  bool use_lm = true;
  bool verbose = false;
  int exit_code = 0;
};

Parsed Parse(std::vector<std::string> args) {
  Parsed p;
  CLI::App app{"test"};
  app.set_version_flag("--version", "1");
  app.set_config("--config", "", "config");
  app.add_option("--port", p.port);
  app.add_option("--shutdown-grace", p.grace);
  app.add_option("--model-dir", p.model_dir);
  app.add_flag("!--no-lm", p.use_lm);
  app.add_flag("--verbose", p.verbose);
  ReadOptionsFromEnvironment(&app, "OASRTEST_");
  std::vector<char*> argv = {const_cast<char*>("test")};
  for (std::string& a : args) argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    p.exit_code = e.get_exit_code();
  }
  return p;
}

class EnvFlagsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* name : {"OASRTEST_PORT", "OASRTEST_SHUTDOWN_GRACE", "OASRTEST_MODEL_DIR",
                             "OASRTEST_NO_LM", "OASRTEST_VERBOSE"}) {
      unsetenv(name);
    }
  }
};

TEST(EnvironmentNameTest, UpperCaseWithUnderscores) {
  EXPECT_EQ(EnvironmentName("OASR_", "max-active-streams"), "OASR_MAX_ACTIVE_STREAMS");
  EXPECT_EQ(EnvironmentName("OASR_", "port"), "OASR_PORT");
}

TEST_F(EnvFlagsTest, EveryKindOfOptionReadsItsVariable) {
  setenv("OASRTEST_PORT", "6000", 1);
  setenv("OASRTEST_SHUTDOWN_GRACE", "2.5", 1);
  setenv("OASRTEST_MODEL_DIR", "/models/x", 1);
  setenv("OASRTEST_VERBOSE", "true", 1);
  const Parsed p = Parse({});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_EQ(p.port, 6000);
  EXPECT_DOUBLE_EQ(p.grace, 2.5);
  EXPECT_EQ(p.model_dir, "/models/x");
  EXPECT_TRUE(p.verbose);
  EXPECT_TRUE(p.use_lm);
}

TEST_F(EnvFlagsTest, TheCommandLineWinsWithoutADuplicateError) {
  // The image's defaults come from the environment; `docker run IMAGE --port
  // 6000` must override them, not fail with "At Most 1 required".
  setenv("OASRTEST_PORT", "50051", 1);
  setenv("OASRTEST_MODEL_DIR", "/models/x", 1);
  const Parsed p = Parse({"--port", "6000", "--model-dir", ""});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_EQ(p.port, 6000);
  EXPECT_EQ(p.model_dir, "");
}

TEST_F(EnvFlagsTest, NegatedFlagReadsOneAsGivenAndZeroAsNot) {
  setenv("OASRTEST_NO_LM", "1", 1);
  EXPECT_FALSE(Parse({}).use_lm);
  setenv("OASRTEST_NO_LM", "true", 1);
  EXPECT_FALSE(Parse({}).use_lm);
  setenv("OASRTEST_NO_LM", "0", 1);
  EXPECT_TRUE(Parse({}).use_lm);
  unsetenv("OASRTEST_NO_LM");
  EXPECT_TRUE(Parse({}).use_lm);
  EXPECT_FALSE(Parse({"--no-lm"}).use_lm);
}

TEST_F(EnvFlagsTest, EmptyVariableCountsAsUnsetAndBadValuesAreParseErrors) {
  setenv("OASRTEST_PORT", "", 1);
  EXPECT_EQ(Parse({}).port, 50051);
  setenv("OASRTEST_PORT", "sixty", 1);
  EXPECT_NE(Parse({}).exit_code, 0);
  setenv("OASRTEST_PORT", "1", 1);
  setenv("OASRTEST_NO_LM", "maybe", 1);
  EXPECT_NE(Parse({}).exit_code, 0);
}

}  // namespace
}  // namespace oasr::server
