// Helpers shared by the decoder tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/tensor.h"
#include "decoder/symbol_table.h"

namespace oasr::decoder::testing {

// A units table from a list, failing the test on error.
inline std::shared_ptr<const SymbolTable> MakeUnits(std::vector<std::string> units) {
  absl::StatusOr<SymbolTable> table = SymbolTable::FromUnits(std::move(units));
  EXPECT_TRUE(table.ok()) << table.status();
  return std::make_shared<const SymbolTable>(std::move(*table));
}

// `<blank>`, then units "t1".."t{V-2}", then `<sos/eos>`: V units.
inline std::shared_ptr<const SymbolTable> NumberedUnits(int vocab_size) {
  std::vector<std::string> units = {"<blank>"};
  // absl::StrCat, not "t" + std::to_string: GCC 12 warns falsely (-Wrestrict)
  // on that operator+ once it is inlined here.
  for (int i = 1; i + 1 < vocab_size; ++i) units.push_back(absl::StrCat("t", i));
  units.push_back("<sos/eos>");
  return MakeUnits(units);
}

// Log-probabilities [T, V] from probability rows (each row normalised here).
inline std::vector<float> LogRows(const std::vector<std::vector<float>>& probs) {
  std::vector<float> out;
  for (const std::vector<float>& row : probs) {
    float sum = 0.0f;
    for (float p : row) sum += p;
    for (float p : row) out.push_back(std::log(p / sum));
  }
  return out;
}

// A host float32 view [T, V] of `data`.
inline TensorView View(std::vector<float>& data, int vocab_size) {
  return TensorView(data.data(), DType::kFloat32,
                    Shape{static_cast<int64_t>(data.size()) / vocab_size, vocab_size},
                    Device::Cpu());
}

// A fixture with a fresh temporary directory per test, removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("oasr_decoder_test_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `text` to dir_/name; returns its path.
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  std::filesystem::path dir_;
};

}  // namespace oasr::decoder::testing
