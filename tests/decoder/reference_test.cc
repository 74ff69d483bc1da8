// The C++ searches against tools/ctc_reference.py, an independent plain
// Python implementation, on random inputs: identical n-best lists (tokens and
// token frames exactly, scores to float precision), with and without phrase
// boosting and blank skipping, decoded in chunks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "decoder/context_graph.h"
#include "decoder/greedy_search.h"
#include "decoder/prefix_beam_search.h"
#include "decoder/synthetic_log_probs.h"
#include "nlohmann/json.hpp"

namespace oasr::decoder {
namespace {

using nlohmann::json;

struct Case {
  int frames;
  int vocab;
  int beam;
  int first_beam;
  float peak;
  float skip;
  bool phrases;
  uint32_t seed;
};

// Runs the reference on `input`; fails the test when it cannot run.
json RunReference(const json& input, const std::string& name) {
  const std::string in_path = ::testing::TempDir() + "/ctc_reference_" + name + "_in.json";
  const std::string out_path = ::testing::TempDir() + "/ctc_reference_" + name + "_out.json";
  std::ofstream(in_path) << input.dump();
  const std::string command = std::string(OASR_REFERENCE_PYTHON) + " " + OASR_CTC_REFERENCE_SCRIPT +
                              " " + in_path + " " + out_path;
  const int rc = std::system(command.c_str());
  EXPECT_EQ(rc, 0) << "reference failed: " << command;
  std::ifstream out(out_path);
  EXPECT_TRUE(out.good()) << "no output from " << command;
  json result = out.good() ? json::parse(out) : json();
  std::remove(in_path.c_str());
  std::remove(out_path.c_str());
  return result;
}

// Phrases that partly occur in the input: two pieces of the greedy output (one
// of them extended by a token so that it is only ever half matched) and a
// random one.
std::vector<TokenPhrase> MakePhrases(const std::vector<float>& lp, const Case& c) {
  GreedySearch greedy(0);
  greedy.Search(lp.data(), c.frames, c.vocab);
  Hypothesis hyp;
  greedy.GetHypothesis(0, &hyp);
  std::vector<TokenPhrase> phrases;
  const auto& t = hyp.tokens;
  if (t.size() >= 4) phrases.push_back({{t[1], t[2], t[3]}, 1.5f});
  if (t.size() >= 7) phrases.push_back({{t[5], t[6], 1 + (t[6] % (c.vocab - 1))}, 2.5f});
  std::mt19937 rng(c.seed);
  phrases.push_back(
      {{1 + static_cast<int32_t>(rng() % 3), 1 + static_cast<int32_t>(rng() % 3)}, 0.7f});
  return phrases;
}

double Tolerance(double x) { return 2e-4 * (1.0 + std::abs(x)); }

void ExpectMatches(const Hypothesis& got, const json& want, const std::string& what) {
  EXPECT_EQ(got.tokens, want["tokens"].get<std::vector<int32_t>>()) << what;
  EXPECT_EQ(got.token_frames, want["frames"].get<std::vector<int64_t>>()) << what;
  const std::vector<double> lps = want["log_probs"].get<std::vector<double>>();
  ASSERT_EQ(got.token_confidences.size(), lps.size()) << what;
  for (size_t i = 0; i < lps.size(); ++i) {
    EXPECT_NEAR(got.token_confidences[i], std::exp(lps[i]), 1e-5) << what;
  }
  for (const char* key : {"score", "ctc_score", "context_score", "viterbi_score"}) {
    const double expected = want[key].get<double>();
    const double actual = key == std::string("score")           ? got.score
                          : key == std::string("ctc_score")     ? got.ctc_score
                          : key == std::string("context_score") ? got.context_score
                                                                : got.viterbi_score;
    EXPECT_NEAR(actual, expected, Tolerance(expected)) << what << " " << key;
  }
}

class ReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceTest, NbestMatchesThePythonReference) {
  const Case c = GetParam();
  SyntheticLogProbsOptions gen;
  gen.num_frames = c.frames;
  gen.vocab_size = c.vocab;
  gen.peak = c.peak;
  gen.blank_frame_ratio = 0.5f;
  gen.seed = c.seed;
  const std::vector<float> lp = SyntheticLogProbs(gen);
  std::vector<TokenPhrase> phrases;
  if (c.phrases) phrases = MakePhrases(lp, c);

  json input;
  json rows = json::array();
  for (int t = 0; t < c.frames; ++t) {
    rows.push_back(std::vector<float>(lp.begin() + t * c.vocab, lp.begin() + (t + 1) * c.vocab));
  }
  input["log_probs"] = rows;
  input["beam_size"] = c.beam;
  input["first_beam_size"] = c.first_beam;
  input["blank_id"] = 0;
  input["blank_skip_threshold"] = c.skip;
  input["phrases"] = json::array();
  for (const TokenPhrase& p : phrases) {
    input["phrases"].push_back({{"tokens", p.tokens}, {"boost", p.boost}});
  }
  const json reference = RunReference(input, std::to_string(c.seed));
  ASSERT_TRUE(reference.contains("beam"));

  PrefixBeamSearchOptions options;
  options.beam_size = c.beam;
  options.first_beam_size = c.first_beam;
  options.blank_skip_threshold = c.skip;
  PrefixBeamSearch search(options);
  std::shared_ptr<const ContextGraph> graph;
  if (c.phrases) {
    absl::StatusOr<std::shared_ptr<const ContextGraph>> built =
        ContextGraph::Build(phrases, c.vocab);
    ASSERT_TRUE(built.ok()) << built.status();
    graph = *built;
    search.SetContextGraph(graph.get());
  }
  // Decode in chunks, counting arena compactions: long inputs must exercise
  // them, so that the comparison covers compaction too.
  int compactions = 0;
  for (int t = 0; t < c.frames; t += 7) {
    const size_t trie = search.trie_nodes(), paths = search.path_nodes();
    search.Search(lp.data() + t * c.vocab, std::min(7, c.frames - t), c.vocab);
    compactions += (search.trie_nodes() < trie) + (search.path_nodes() < paths);
  }
  if (c.frames >= 600) {
    EXPECT_GE(compactions, 2);
  }
  search.Finalize();
  const json& nbest = reference["beam"];
  ASSERT_EQ(search.NumHypotheses(), static_cast<int>(nbest.size()));
  bool boosted = false;
  for (int r = 0; r < search.NumHypotheses(); ++r) {
    Hypothesis hyp;
    search.GetHypothesis(r, &hyp);
    ExpectMatches(hyp, nbest[r], "rank " + std::to_string(r));
    boosted |= hyp.context_score != 0.0f;
  }
  // Inputs with phrases must exercise the bonus.
  EXPECT_EQ(boosted, c.phrases);

  GreedySearch greedy(0);
  greedy.Search(lp.data(), c.frames, c.vocab);
  Hypothesis hyp;
  greedy.GetHypothesis(0, &hyp);
  ExpectMatches(hyp, reference["greedy"], "greedy");
}

INSTANTIATE_TEST_SUITE_P(RandomInputs, ReferenceTest,
                         ::testing::Values(Case{60, 12, 10, 10, 2.0f, 0.0f, false, 1},
                                           Case{80, 30, 10, 10, 4.0f, 0.0f, false, 2},
                                           Case{50, 7, 4, 3, 1.0f, 0.0f, false, 3},
                                           Case{60, 30, 10, 10, 4.0f, 0.0f, true, 4},
                                           Case{50, 12, 6, 12, 2.0f, 0.0f, true, 5},
                                           Case{100, 30, 10, 10, 6.0f, 0.95f, false, 6},
                                           Case{60, 20, 10, 10, 6.0f, 0.9f, true, 7},
                                           Case{40, 5, 16, 5, 0.5f, 0.0f, true, 8},
                                           Case{700, 20, 10, 10, 5.0f, 0.0f, false, 9}));

}  // namespace
}  // namespace oasr::decoder
