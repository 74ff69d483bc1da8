#include "decoder/symbol_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace oasr::decoder {
namespace {

using ::testing::HasSubstr;

TEST(SymbolTableTest, ParsesUnitsFile) {
  absl::StatusOr<SymbolTable> table = SymbolTable::Parse(
      "<blank> 0\n<unk> 1\n\xe2\x96\x81HELLO 2\nLO 3\n<sos/eos> 4\n\n", "units.txt");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 5);
  EXPECT_EQ(table->Token(2), "\xe2\x96\x81HELLO");
  EXPECT_EQ(table->Find("LO"), 3);
  EXPECT_EQ(table->Find("missing"), -1);
  EXPECT_TRUE(table->is_bpe());
  EXPECT_TRUE(table->IsSpecial(0));
  EXPECT_TRUE(table->IsSpecial(4));
  EXPECT_FALSE(table->IsSpecial(3));
  EXPECT_EQ(table->max_unit_bytes(), 9u);
}

TEST(SymbolTableTest, AcceptsIdsInAnyOrder) {
  absl::StatusOr<SymbolTable> table = SymbolTable::Parse("b 1\n<blank> 0\na 2\n", "u");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->Token(1), "b");
  EXPECT_FALSE(table->is_bpe());
}

TEST(SymbolTableTest, LoadsFromFile) {
  const std::string path =
      ::testing::TempDir() + "/units_test_" + std::to_string(::getpid()) + ".txt";
  std::ofstream(path) << "<blank> 0\n\xe4\xbd\xa0 1\n";
  absl::StatusOr<SymbolTable> table = SymbolTable::Load(path);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->Token(1), "\xe4\xbd\xa0");
  std::remove(path.c_str());
}

TEST(SymbolTableTest, MissingFileIsNotFound) {
  absl::StatusOr<SymbolTable> table = SymbolTable::Load("/nonexistent/units.txt");
  EXPECT_EQ(table.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(table.status().message()), HasSubstr("/nonexistent/units.txt"));
}

struct BadUnits {
  const char* text;
  const char* message;
};

class SymbolTableErrorTest : public ::testing::TestWithParam<BadUnits> {};

TEST_P(SymbolTableErrorTest, NamesTheProblem) {
  absl::StatusOr<SymbolTable> table = SymbolTable::Parse(GetParam().text, "units.txt");
  ASSERT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(table.status().message()), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SymbolTableErrorTest,
    ::testing::Values(BadUnits{"<blank> 0\na b 1\n", "units.txt:2: expected \"token id\""},
                      BadUnits{"<blank> 0\na\n", "units.txt:2: expected"},
                      BadUnits{"<blank> 0\na x1\n", "units.txt:2: id \"x1\""},
                      BadUnits{"<blank> 0\na -1\n", "units.txt:2: id \"-1\""},
                      BadUnits{"<blank> 0\na 0\n",
                               "units.txt:2: duplicate id 0 (first defined on line 1)"},
                      BadUnits{"<blank> 0\n<blank> 1\n", "units.txt:2: duplicate token"},
                      BadUnits{"<blank> 0\na 2\n", "id 1 is missing"},
                      // Found by tests/fuzz (units): the table was sized by the
                      // id first, 32 GB for this one.
                      BadUnits{"<blank> 0\na 1000000000\n",
                               "units.txt:2: id 1000000000 is past the file's 3 lines"},
                      BadUnits{"\n\n", "no units"}));

TEST(SymbolTableTest, FromUnitsRejectsBadLists) {
  EXPECT_EQ(SymbolTable::FromUnits({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(SymbolTable::FromUnits({"a", ""}).status().message()),
              HasSubstr("units[1] is empty"));
  EXPECT_THAT(std::string(SymbolTable::FromUnits({"a", "b", "a"}).status().message()),
              HasSubstr("units[2] = \"a\" duplicates units[0]"));
  EXPECT_THAT(std::string(SymbolTable::FromUnits({"a b"}).status().message()),
              HasSubstr("whitespace"));
}

}  // namespace
}  // namespace oasr::decoder
