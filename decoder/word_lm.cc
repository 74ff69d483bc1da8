#include "decoder/word_lm.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status.h"

namespace oasr::decoder {
namespace {

WordScore Negated(const WordScore& s) { return WordScore{-s.log_prob, -s.words, -s.unknown_words}; }

std::atomic<uint32_t> next_serial{1};

// A thread's memory of WordLm::Extend's answers, by (model, state, unit): the
// prefix beam search asks for the same extensions of its hypotheses every
// frame, and prunes most of them again. Exact: Extend is a pure function of
// the three.
struct ExtendMemo {
  struct Entry {
    uint32_t model = 0;  // 0: empty.
    WordLm::State state{0, 0};
    int32_t unit = 0;
    WordScore score;
    WordLm::State next{0, 0};
  };
  static constexpr int kBits = 14;
  std::vector<Entry> entries = std::vector<Entry>(size_t{1} << kBits);

  static size_t Index(uint32_t model, WordLm::State state, int32_t unit) {
    const uint32_t h = (static_cast<uint32_t>(state.history) * 0x9E3779B1u) ^
                       (static_cast<uint32_t>(state.node) * 0x85EBCA77u) ^
                       (static_cast<uint32_t>(unit) * 0xC2B2AE3Du) ^ (model * 0x27D4EB2Fu);
    return (h * 0x165667B1u) >> (32 - kBits);
  }
};

}  // namespace

absl::StatusOr<std::shared_ptr<const WordLm>> WordLm::Load(const std::string& path,
                                                           const SymbolTable& units) {
  if (!units.is_bpe()) {
    return absl::InvalidArgumentError(
        "a word language model needs units that mark word starts with \"\xe2\x96\x81\" (BPE)");
  }
  OASR_ASSIGN_OR_RETURN(SymbolTable words, ReadArpaWords(path));
  auto model = std::shared_ptr<WordLm>(new WordLm());
  model->serial_ = next_serial.fetch_add(1, std::memory_order_relaxed);
  OASR_ASSIGN_OR_RETURN(model->lm_, NgramLm::LoadArpa(path, words));
  model->unknown_word_ = words.Find("<unk>");
  if (model->unknown_word_ < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": a word language model must list <unk> (unknown words score it)"));
  }
  model->unknown_log_prob_ = model->lm_->UnigramScore(model->unknown_word_);

  std::vector<std::pair<std::string, int32_t>> spellings;
  for (int w = 0; w < words.size(); ++w) {
    if (!words.IsSpecial(w)) spellings.emplace_back(words.Token(w), w);
  }
  if (spellings.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no words"));
  std::sort(spellings.begin(), spellings.end());
  model->num_words_ = static_cast<int>(spellings.size());
  model->nodes_.resize(1);
  model->child_bytes_.resize(1);
  model->Build(spellings, 0, spellings.size(), 0, kEmpty);
  model->nodes_.shrink_to_fit();
  model->child_bytes_.shrink_to_fit();

  model->units_.reserve(units.size());
  for (int u = 0; u < units.size(); ++u) {
    const std::string& text = units.Token(u);
    const bool starts_word = absl::StartsWith(text, kWordStartMarker);
    model->units_.push_back(UnitSpelling{starts_word, units.IsSpecial(u),
                                         starts_word ? text.substr(kWordStartMarkerBytes) : text});
  }
  return std::shared_ptr<const WordLm>(std::move(model));
}

float WordLm::Build(const std::vector<std::pair<std::string, int32_t>>& words, size_t lo, size_t hi,
                    size_t depth, int32_t index) {
  // Depth first with a stack of its own: a lexicon is as deep as its longest
  // word, and a word of a few hundred kilobytes in a file overflowed the call
  // stack when each byte was a call. Nodes are laid out as that recursion
  // did: a node's children in one run, each child's subtree after the
  // subtree of the child before it.
  struct Frame {
    size_t lo, hi, depth;  // words[lo, hi) share their first `depth` bytes
    int32_t index;         // the node they fill
    int32_t word;          // the word ending here, or -1
    float lookahead;       // the best unigram in the subtree so far
    int32_t first_child, num_children;
    int32_t child;  // the next child to build
    size_t start;   // its first word
  };
  std::vector<Frame> stack;
  // Opens the node `index` for words[lo, hi): its word, and its children's
  // slots (one per distinct next byte; sorted words make each one run).
  auto open = [&](size_t lo, size_t hi, size_t depth, int32_t index) {
    Frame f{lo, hi, depth, index, -1, -std::numeric_limits<float>::infinity(), 0, 0, 0, 0};
    if (f.lo < f.hi && words[f.lo].first.size() == depth) {
      f.word = words[f.lo].second;
      f.lookahead = lm_->UnigramScore(f.word);
      ++f.lo;
    }
    for (size_t i = f.lo; i < f.hi; ++i) {
      if (i == f.lo || words[i].first[depth] != words[i - 1].first[depth]) ++f.num_children;
    }
    f.first_child = static_cast<int32_t>(nodes_.size());
    nodes_.resize(nodes_.size() + f.num_children);
    child_bytes_.resize(nodes_.size());
    f.child = f.first_child;
    f.start = f.lo;
    stack.push_back(f);
  };
  open(lo, hi, depth, index);
  float lookahead = 0.0f;
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.start < f.hi) {
      const char byte = words[f.start].first[f.depth];
      size_t end = f.start + 1;
      while (end < f.hi && words[end].first[f.depth] == byte) ++end;
      child_bytes_[f.child] = static_cast<unsigned char>(byte);
      const size_t child_lo = f.start, child_depth = f.depth + 1;
      const int32_t child = f.child++;
      f.start = end;
      open(child_lo, end, child_depth, child);  // `f` may move
      continue;
    }
    const Frame done = f;
    stack.pop_back();
    nodes_[done.index] = Node{done.first_child, done.num_children, done.word, done.lookahead};
    if (stack.empty()) {
      lookahead = done.lookahead;
    } else {
      stack.back().lookahead = std::max(stack.back().lookahead, done.lookahead);
    }
  }
  return lookahead;
}

int32_t WordLm::Child(int32_t node, unsigned char byte) const {
  const Node& n = nodes_[node];
  const auto first = child_bytes_.begin() + n.first_child;
  const auto last = first + n.num_children;
  const auto it = std::lower_bound(first, last, byte);
  return it != last && *it == byte ? static_cast<int32_t>(it - child_bytes_.begin()) : kOutside;
}

WordScore WordLm::Lookahead(int32_t node) const {
  if (node == kEmpty) return WordScore{};
  if (node == kOutside) return WordScore{unknown_log_prob_, 0, 1};
  return WordScore{nodes_[node].lookahead, 0, 0};
}

WordScore WordLm::Complete(State state, NgramLm::State* history) const {
  *history = state.history;
  if (state.node == kEmpty) return WordScore{};
  const int32_t word = state.node == kOutside ? -1 : nodes_[state.node].word;
  WordScore score;
  score.words = 1;
  if (word >= 0) {
    score.log_prob = lm_->Score(state.history, word, history);
  } else {
    score.log_prob = lm_->Score(state.history, unknown_word_, history);
    score.unknown_words = 1;
  }
  score += Negated(Lookahead(state.node));
  return score;
}

WordScore WordLm::Extend(State state, int32_t unit, State* next) const {
  OASR_DCHECK(unit >= 0 && unit < num_units());
  thread_local ExtendMemo memo;
  ExtendMemo::Entry& e = memo.entries[ExtendMemo::Index(serial_, state, unit)];
  if (e.model == serial_ && e.state.history == state.history && e.state.node == state.node &&
      e.unit == unit) {
    *next = e.next;
    return e.score;
  }
  const WordScore score = ExtendUncached(state, unit, next);
  e = ExtendMemo::Entry{serial_, state, unit, score, *next};
  return score;
}

WordScore WordLm::ExtendUncached(State state, int32_t unit, State* next) const {
  WordScore score;
  int32_t node = state.node;
  next->history = state.history;
  const UnitSpelling& spelling = units_[unit];
  if (spelling.starts_word) {
    score = Complete(state, &next->history);
    node = kEmpty;
  } else {
    score = Negated(Lookahead(node));
  }
  if (spelling.leaves_lexicon) {
    node = kOutside;
  } else {
    for (const char byte : spelling.body) {
      if (node == kOutside) break;
      node = Child(node, static_cast<unsigned char>(byte));
    }
  }
  next->node = node;
  score += Lookahead(node);
  return score;
}

WordScore WordLm::Finish(State state) const {
  NgramLm::State history;
  WordScore score = Complete(state, &history);
  score.log_prob += lm_->FinalScore(history);
  return score;
}

size_t WordLm::memory_bytes() const {
  size_t bytes = lm_->memory_bytes() + nodes_.capacity() * sizeof(Node) + child_bytes_.capacity();
  bytes += units_.capacity() * sizeof(UnitSpelling);
  for (const UnitSpelling& unit : units_) bytes += unit.body.capacity();
  return bytes;
}

}  // namespace oasr::decoder
