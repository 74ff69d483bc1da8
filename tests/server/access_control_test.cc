// The tokens file's parser, SHA-256 and peer addresses (server/access_control.h),
// without a server; the calls themselves are in security_test.cc.
#include "server/access_control.h"

#include <gtest/gtest.h>

namespace oasr::server {
namespace {

TEST(Sha256HexTest, KnownDigests) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(TokenTableTest, PlainAndHashedTokensWithNamesAndQuotas) {
  absl::StatusOr<TokenTable> table = TokenTable::Parse(
      "# comment\n"
      "\n"
      "  plain-one   name=alice max_streams=3  \n"
      "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD name=bob\n"
      "third\n",
      "test");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 3u);
  const TokenEntry* alice = table->Find("plain-one");
  ASSERT_NE(alice, nullptr);
  EXPECT_EQ(alice->name, "alice");
  EXPECT_EQ(alice->max_streams, 3);
  const TokenEntry* bob = table->Find("abc");  // The hash is of "abc", upper case accepted.
  ASSERT_NE(bob, nullptr);
  EXPECT_EQ(bob->name, "bob");
  EXPECT_EQ(bob->max_streams, 0);
  const TokenEntry* third = table->Find("third");
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third->name, "line 5");
  EXPECT_EQ(table->Find("plain"), nullptr);
  EXPECT_EQ(table->Find(""), nullptr);
}

TEST(TokenTableTest, ErrorsNameTheLineAndNeverTheToken) {
  struct Case {
    const char* text;
    const char* expected;
  };
  const Case cases[] = {
      {"secret-1 max_streams=-2\n", "test line 1: max_streams='-2'"},
      {"ok\nsecret-2 colour=blue\n", "test line 2: field 2"},
      {"sha256:abcd\n", "test line 1: sha256: needs"},
      {"secret-3\nsecret-3\n", "test line 2: the same token"},
      {"abc\nsha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n",
       "test line 2: the same token"},
      {"# nothing\n\n", "test: no token"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<TokenTable> table = TokenTable::Parse(c.text, "test");
    ASSERT_FALSE(table.ok()) << c.text;
    const std::string message(table.status().message());
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
    EXPECT_EQ(message.find("secret"), std::string::npos) << message;
  }
}

TEST(PeerAddressTest, DropsThePort) {
  EXPECT_EQ(PeerAddress("ipv4:127.0.0.1:54321"), "ipv4:127.0.0.1");
  EXPECT_EQ(PeerAddress("ipv6:[::1]:80"), "ipv6:[::1]");
  EXPECT_EQ(PeerAddress("ipv6:%5B::1%5D:80"), "ipv6:%5B::1%5D");
  EXPECT_EQ(PeerAddress("unix:/tmp/socket"), "unix:/tmp/socket");
  EXPECT_EQ(PeerAddress("unknown"), "unknown");
}

}  // namespace
}  // namespace oasr::server
