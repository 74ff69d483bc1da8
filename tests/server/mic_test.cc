// oasr-client mic against a server subprocess with the small random model
// (fixture encoder_golden): a WAV played in real time as the microphone
// transcribes as the same file streamed; Ctrl-C ends the stream with its
// final result and exit 0; input devices through PortAudio, where the build
// has it, are listed from a virtual ALSA capture device (the file plugin) and
// a missing device is an error that says so.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "server/audio_codec.h"
#include "tests/server/recognition_helpers.h"
#include "tests/server/server_process.h"

namespace oasr {
namespace {

using testing::MakeAudio;
using testing::RunCommand;
using testing::ServerProcess;

// The text of every line of `out` that starts with `prefix` (then "] ").
std::vector<std::string> Lines(const std::string& out, const std::string& prefix) {
  std::vector<std::string> found;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t text = line.find("] ");
    found.push_back(text == std::string::npos ? "" : line.substr(text + 2));
  }
  return found;
}

class MicTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start(OASR_SERVER_BINARY, {"--model-dir", testing::SmallModelDir()}))
        << server_.error();
  }

  std::string Client() const {
    return std::string(OASR_CLIENT_BINARY) + " --server " + server_.grpc_target() + " ";
  }

  ServerProcess server_;
};

TEST_F(MicTest, AWavPlayedAsTheMicrophoneTranscribesAsTheFileStreamed) {
  const double seconds = 3.0;
  const std::string wav = testing::WriteTemp(
      "mic_test_3s.wav", server::EncodeWav(MakeAudio(31, seconds, 16000), 16000));
  const auto start = std::chrono::steady_clock::now();
  auto [code, out] = RunCommand("timeout 60 " + Client() + "mic --wav " + wav + " 2>/dev/null");
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(code, 0) << out;
  EXPECT_GE(wall, seconds) << "played in real time";
  EXPECT_FALSE(Lines(out, "[partial]").empty()) << out;
  const std::vector<std::string> finals = Lines(out, "[final]");
  ASSERT_FALSE(finals.empty()) << out;

  auto [stream_code, streamed] =
      RunCommand("timeout 60 " + Client() + "stream --fast --no-interim " + wav);
  ASSERT_EQ(stream_code, 0) << streamed;
  std::vector<std::string> want;
  for (std::string f : Lines(streamed, "[final")) {
    f = f.substr(0, f.find(" (finish_reason"));
    if (!f.empty()) want.push_back(f);
  }
  EXPECT_EQ(finals, want);
}

TEST_F(MicTest, CtrlCEndsTheStreamWithItsFinalResult) {
  const std::string wav =
      testing::WriteTemp("mic_test_20s.wav", server::EncodeWav(MakeAudio(32, 20.0, 16000), 16000));
  const auto start = std::chrono::steady_clock::now();
  // One SIGINT after 2 s, as one Ctrl-C; --preserve-status: the client's
  // own exit code. --foreground: without it timeout signals the client and
  // then its whole process group, a second SIGINT, which (as a second
  // Ctrl-C should) kills the client when its handler ran in between.
  auto [code, out] = RunCommand("timeout --foreground --preserve-status -s INT 2 " + Client() +
                                "mic --wav " + wav + " 2>/dev/null");
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(code, 0) << out;
  EXPECT_FALSE(Lines(out, "[final]").empty()) << out;
  EXPECT_LT(wall, 15.0) << "it stopped at Ctrl-C, not at the end of the file";
}

TEST_F(MicTest, DevicesAreListedAndAMissingOneIsAnErrorThatSaysSo) {
  // A capture device that needs no sound card: ALSA's file plugin.
  const std::string home = ::testing::TempDir() + "/oasr-mic-home-" + std::to_string(::getpid());
  std::filesystem::create_directories(home);
  std::ofstream(home + "/in.raw", std::ios::binary) << std::string(32000, '\0');
  std::ofstream(home + "/.asoundrc")
      << "pcm.!default {\n  type file\n  slave.pcm \"null\"\n"
      << "  file \"/dev/null\"\n  infile \"" << home << "/in.raw\"\n  format \"raw\"\n}\n";
  auto [code, out] =
      RunCommand("HOME=" + home + " timeout 30 " + Client() + "mic --list-devices 2>&1");
  if (code == 1 && out.find("without PortAudio") != std::string::npos) {
    GTEST_SKIP() << "oasr-client was built without PortAudio: " << out;
  }
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("default"), std::string::npos) << out;

  auto [missing_code, missing] =
      RunCommand("HOME=" + home + " timeout 30 " + Client() + "mic --device 999 2>&1");
  EXPECT_EQ(missing_code, 1) << missing;
  EXPECT_NE(missing.find("--device 999: no such device"), std::string::npos) << missing;
  std::filesystem::remove_all(home);
}

}  // namespace
}  // namespace oasr
