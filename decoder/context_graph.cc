#include "decoder/context_graph.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "decoder/phrase_tokenizer.h"

namespace oasr::decoder {

absl::Status ContextGraphConfig::Validate() const {
  if (max_phrases < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("context.max_phrases = ", max_phrases, " must be at least 1"));
  }
  if (max_phrase_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("context.max_phrase_tokens = ", max_phrase_tokens, " must be at least 1"));
  }
  if (!(max_boost > 0.0f) || !std::isfinite(max_boost)) {
    return absl::InvalidArgumentError(
        absl::StrCat("context.max_boost = ", max_boost, " must be finite and > 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ContextGraph>> ContextGraph::Build(
    const std::vector<TokenPhrase>& phrases, int vocab_size, const ContextGraphConfig& config) {
  if (absl::Status status = config.Validate(); !status.ok()) return status;
  if (static_cast<int64_t>(phrases.size()) > config.max_phrases) {
    return absl::InvalidArgumentError(
        absl::StrCat(phrases.size(), " phrases exceed context.max_phrases = ", config.max_phrases));
  }
  for (size_t p = 0; p < phrases.size(); ++p) {
    const TokenPhrase& phrase = phrases[p];
    if (phrase.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("phrases[", p, "] has no tokens"));
    }
    if (static_cast<int64_t>(phrase.tokens.size()) > config.max_phrase_tokens) {
      return absl::InvalidArgumentError(absl::StrCat(
          "phrases[", p, "] has ", phrase.tokens.size(),
          " tokens, more than context.max_phrase_tokens = ", config.max_phrase_tokens));
    }
    for (const int32_t token : phrase.tokens) {
      if (token < 0 || token >= vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("phrases[", p, "] token ", token, " is outside [0, ", vocab_size, ")"));
      }
    }
    if (!std::isfinite(phrase.boost) || phrase.boost <= 0.0f || phrase.boost > config.max_boost) {
      return absl::InvalidArgumentError(absl::StrCat("phrases[", p, "].boost = ", phrase.boost,
                                                     " must be in (0, ", config.max_boost, "]"));
    }
  }

  // 1. The trie. token_score is the largest boost of the phrases through a
  //    node, end_score the bonus a phrase ending there earns.
  std::shared_ptr<ContextGraph> graph(new ContextGraph());
  graph->vocab_size_ = vocab_size;
  graph->num_phrases_ = static_cast<int>(phrases.size());
  std::vector<int32_t> parent{-1};
  std::vector<int32_t> token_of{-1};
  std::vector<int32_t> depth{0};
  std::vector<float> token_score{0.0f};
  std::vector<float> end_score{0.0f};
  std::vector<bool> has_children{false};
  FlatIntMap& children = graph->children_;
  for (const TokenPhrase& phrase : phrases) {
    int32_t node = kRoot;
    for (const int32_t token : phrase.tokens) {
      int32_t child = children.Find(FlatIntMap::Key(node, token));
      if (child < 0) {
        child = static_cast<int32_t>(parent.size());
        children.Insert(FlatIntMap::Key(node, token), child);
        parent.push_back(node);
        token_of.push_back(token);
        depth.push_back(depth[node] + 1);
        token_score.push_back(0.0f);
        end_score.push_back(0.0f);
        has_children.push_back(false);
        has_children[node] = true;
      }
      token_score[child] = std::max(token_score[child], phrase.boost);
      node = child;
    }
    end_score[node] = std::max(end_score[node], phrase.boost * phrase.tokens.size());
  }

  // 2. Breadth-first: pending scores, failure links, outputs and the state to
  //    resume from. Every quantity reads only shallower nodes.
  const size_t num_nodes = parent.size();
  std::vector<int32_t> order(num_nodes);
  for (size_t i = 0; i < num_nodes; ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return depth[a] < depth[b]; });
  graph->node_score_.assign(num_nodes, 0.0f);
  graph->output_.assign(num_nodes, 0.0f);
  graph->fail_.assign(num_nodes, kRoot);
  graph->resume_.assign(num_nodes, kRoot);
  for (const int32_t node : order) {
    if (node == kRoot) continue;
    const int32_t up = parent[node];
    const int32_t token = token_of[node];
    graph->node_score_[node] = graph->node_score_[up] + token_score[node];
    int32_t fail = kRoot;
    if (up != kRoot) {
      for (int32_t s = graph->fail_[up];; s = graph->fail_[s]) {
        const int32_t next = children.Find(FlatIntMap::Key(s, token));
        if (next >= 0) {
          fail = next;
          break;
        }
        if (s == kRoot) break;
      }
    }
    graph->fail_[node] = fail;
    graph->output_[node] = end_score[node] + graph->output_[fail];
    // A childless node can only be left through its failure link, so resume
    // from there at once; its pending bonus then belongs to the suffix.
    graph->resume_[node] = has_children[node] ? node : graph->resume_[fail];
  }
  return std::shared_ptr<const ContextGraph>(std::move(graph));
}

absl::StatusOr<std::shared_ptr<const ContextGraph>> ContextGraph::BuildFromText(
    const std::vector<TextPhrase>& phrases, const SymbolTable& units,
    const ContextGraphConfig& config) {
  std::vector<TokenPhrase> token_phrases;
  token_phrases.reserve(phrases.size());
  for (size_t p = 0; p < phrases.size(); ++p) {
    absl::StatusOr<std::vector<int32_t>> tokens = TokenizePhrase(phrases[p].text, units);
    if (!tokens.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("phrases[", p, "]: ", std::string(tokens.status().message())));
    }
    token_phrases.push_back(TokenPhrase{std::move(*tokens), phrases[p].boost});
  }
  return Build(token_phrases, units.size(), config);
}

int32_t ContextGraph::Step(int32_t state, int32_t token, float* delta) const {
  int32_t target = kRoot;
  for (int32_t s = state;; s = fail_[s]) {
    const int32_t next = children_.Find(FlatIntMap::Key(s, token));
    if (next >= 0) {
      target = next;
      break;
    }
    if (s == kRoot) break;
  }
  const int32_t resume = resume_[target];
  *delta = output_[target] + node_score_[resume] - node_score_[state];
  return resume;
}

}  // namespace oasr::decoder
