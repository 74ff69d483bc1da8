#include "decoder/ngram_lm.h"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/check.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace oasr::decoder {
namespace {

std::atomic<uint32_t> next_serial{1};

// A thread's memory of NgramLm::Score's answers, by (model, state, unit).
struct ScoreMemo {
  struct Entry {
    uint32_t model = 0;  // 0: empty.
    int32_t state = 0;
    int32_t unit = 0;
    float score = 0.0f;
    int32_t next = 0;
  };
  static constexpr int kBits = 15;
  std::vector<Entry> entries = std::vector<Entry>(size_t{1} << kBits);

  static size_t Index(uint32_t model, int32_t state, int32_t unit) {
    const uint32_t h = (static_cast<uint32_t>(state) * 0x9E3779B1u) ^
                       (static_cast<uint32_t>(unit) * 0x85EBCA77u) ^ (model * 0xC2B2AE3Du);
    return (h * 0x27D4EB2Fu) >> (32 - kBits);
  }
};

constexpr float kLn10 = 2.302585093f;
// ln P of a unit the file does not list when it has no <unk> either (log10 -7).
constexpr float kUnlistedLog10 = -7.0f;
constexpr int kMaxOrder = 16;

// Reads lines of a plain or gzip file (zlib reads both), of any length.
class LineReader {
 public:
  explicit LineReader(const std::string& path) : file_(gzopen(path.c_str(), "rb")) {
    if (file_ != nullptr) gzbuffer(file_, 1 << 18);
  }
  ~LineReader() {
    if (file_ != nullptr) gzclose(file_);
  }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  bool is_open() const { return file_ != nullptr; }
  int64_t line_no() const { return line_no_; }

  // The next line without its end of line, or false at the end of the file.
  // The view is valid until the next call. Any byte but '\n' belongs to the
  // line, NUL included (gzgets would end the line's text there).
  bool Next(absl::string_view* line) {
    line_.clear();
    bool read = false;  // A byte of this line, its '\n' included.
    while (next_ < end_ || Fill()) {
      read = true;
      const char* begin = buffer_ + next_;
      const char* newline = static_cast<const char*>(std::memchr(begin, '\n', end_ - next_));
      const char* stop = newline != nullptr ? newline : buffer_ + end_;
      line_.append(begin, stop);
      next_ = static_cast<size_t>(stop - buffer_);
      if (newline != nullptr) {
        ++next_;
        break;
      }
    }
    if (!read) return false;
    ++line_no_;
    while (!line_.empty() && line_.back() == '\r') line_.pop_back();
    *line = line_;
    return true;
  }

 private:
  // Reads the next block of the (decompressed) file; false at its end or on
  // a read error, which ends the lines as the end of the file does.
  bool Fill() {
    const int n = gzread(file_, buffer_, sizeof(buffer_));
    if (n <= 0) return false;
    next_ = 0;
    end_ = static_cast<size_t>(n);
    return true;
  }

  gzFile file_;
  char buffer_[4096];
  size_t next_ = 0, end_ = 0;  // The unread bytes of buffer_.
  std::string line_;
  int64_t line_no_ = 0;
};

bool IsBlank(absl::string_view line) {
  return line.find_first_not_of(" \t") == absl::string_view::npos;
}

// The n-grams of one order as read: words row-major [count, n].
struct Level {
  std::vector<int32_t> words;
  std::vector<float> log_probs;
  std::vector<float> backoffs;
  std::vector<int32_t> order;  // entry indices sorted by their words
};

}  // namespace

absl::StatusOr<std::shared_ptr<const NgramLm>> NgramLm::LoadArpa(const std::string& path,
                                                                 const SymbolTable& units) {
  LineReader reader(path);
  if (!reader.is_open()) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", reader.line_no(), ": ", what));
  };
  absl::string_view line;
  auto next = [&] { return reader.Next(&line); };

  // Header.
  bool found_data = false;
  while (next()) {
    if (absl::StripAsciiWhitespace(line) == "\\data\\") {
      found_data = true;
      break;
    }
  }
  if (!found_data) return error("no \\data\\ section");
  std::vector<int64_t> header_counts;
  while (next()) {
    const absl::string_view stripped = absl::StripAsciiWhitespace(line);
    if (stripped.empty()) {
      if (header_counts.empty()) continue;
      break;
    }
    absl::string_view rest = stripped;
    if (!absl::ConsumePrefix(&rest, "ngram ")) return error("expected 'ngram N=count'");
    const std::vector<absl::string_view> parts = absl::StrSplit(rest, '=');
    int n = 0;
    int64_t count = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &n) ||
        !absl::SimpleAtoi(parts[1], &count) || count < 0) {
      return error("expected 'ngram N=count'");
    }
    if (n != static_cast<int>(header_counts.size()) + 1 || n > kMaxOrder) {
      return error(
          absl::StrCat("ngram ", n, " out of order (orders 1..", kMaxOrder, ", ascending)"));
    }
    header_counts.push_back(count);
  }
  if (header_counts.empty()) return error("no 'ngram N=count' lines");

  auto lm = std::shared_ptr<NgramLm>(new NgramLm());
  lm->serial_ = next_serial.fetch_add(1, std::memory_order_relaxed);
  const int order = static_cast<int>(header_counts.size());
  const int vocab = units.size();
  lm->order_ = order;
  lm->vocab_size_ = vocab;
  lm->eos_word_ = vocab;
  const int32_t bos_word = vocab + 1;
  const int32_t unk_unit = units.Find("<unk>");
  bool have_unk = false;
  float unk_log10 = kUnlistedLog10;
  auto word_id = [&](absl::string_view w) -> int32_t {
    if (w == "</s>") return vocab;
    if (w == "<s>") return bos_word;
    return units.Find(std::string(w));
  };

  std::vector<Level> levels(order);
  std::vector<int32_t> ids(order);
  for (int n = 1; n <= order; ++n) {
    Level& level = levels[n - 1];
    // Section header "\n-grams:" (blank lines before it are fine).
    bool found = false;
    while (next()) {
      if (IsBlank(line)) continue;
      if (absl::StripAsciiWhitespace(line) != absl::StrCat("\\", n, "-grams:")) {
        return error(absl::StrCat("expected \\", n, "-grams:"));
      }
      found = true;
      break;
    }
    if (!found) return error(absl::StrCat("missing \\", n, "-grams: section"));
    int64_t read = 0;
    // The header's count is the file's word, not yet a fact: reserve at most
    // 4 M entries up front (a claim of 2e18 must fail as a count mismatch,
    // not as an allocation).
    level.words.reserve(static_cast<size_t>(std::min<int64_t>(header_counts[n - 1], 1 << 22)) *
                        static_cast<size_t>(n));
    while (next()) {
      if (IsBlank(line)) break;
      const std::vector<absl::string_view> fields =
          absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
      if (fields.size() != static_cast<size_t>(n + 1) &&
          fields.size() != static_cast<size_t>(n + 2)) {
        return error(
            absl::StrCat("expected a log-probability, ", n, " words and an optional backoff"));
      }
      float log_prob = 0.0f, backoff = 0.0f;
      if (!absl::SimpleAtof(fields[0], &log_prob) || !(log_prob <= 0.0f)) {
        return error("the log-probability is not a number <= 0");
      }
      if (fields.size() == static_cast<size_t>(n + 2) &&
          (!absl::SimpleAtof(fields[n + 1], &backoff) || !std::isfinite(backoff))) {
        return error("the backoff is not a finite number");
      }
      ++read;
      bool known = true;
      for (int i = 0; i < n; ++i) {
        ids[i] = word_id(fields[i + 1]);
        if (ids[i] < 0) {
          known = false;
          if (n == 1 && fields[1] == "<unk>") {
            have_unk = true;
            unk_log10 = log_prob;
          }
        }
      }
      if (!known) {
        if (n == 1) ++lm->skipped_words_;
        continue;
      }
      if (n == 1 && ids[0] == unk_unit) {
        have_unk = true;
        unk_log10 = log_prob;
      }
      level.words.insert(level.words.end(), ids.begin(), ids.begin() + n);
      level.log_probs.push_back(log_prob * kLn10);
      level.backoffs.push_back(backoff * kLn10);
    }
    if (read != header_counts[n - 1]) {
      return error(absl::StrCat("\\", n, "-grams: has ", read, " entries, the header says ",
                                header_counts[n - 1]));
    }
  }
  bool found_end = false;
  while (next()) {
    if (IsBlank(line)) continue;
    if (absl::StripAsciiWhitespace(line) == "\\end\\") found_end = true;
    break;
  }
  if (!found_end) return error("expected \\end\\");
  lm->unknown_log_prob_ = (have_unk ? unk_log10 : kUnlistedLog10) * kLn10;

  // Sort every level and lay the nodes out level by level: the children of a
  // node are then one sorted run of the next level.
  size_t total = 1;
  for (int n = 1; n <= order; ++n) {
    Level& level = levels[n - 1];
    const int32_t count = static_cast<int32_t>(level.log_probs.size());
    level.order.resize(count);
    std::iota(level.order.begin(), level.order.end(), 0);
    const int32_t* w = level.words.data();
    std::sort(level.order.begin(), level.order.end(), [w, n](int32_t a, int32_t b) {
      return std::lexicographical_compare(w + a * n, w + a * n + n, w + b * n, w + b * n + n);
    });
    lm->counts_.push_back(count);
    total += count;
  }
  if (total > static_cast<size_t>(INT32_MAX)) return error("too many n-grams");
  lm->nodes_.resize(total);
  lm->nodes_[kRoot] = Node{-1, 0.0f, 0.0f, 1, 0, kRoot};
  lm->unigram_.assign(vocab + 2, -1);
  std::vector<int32_t> level_start(order + 1, 1);
  for (int n = 1; n <= order; ++n) {
    level_start[n] =
        level_start[n - 1] + static_cast<int32_t>(n == 1 ? 0 : levels[n - 2].order.size());
  }
  for (int n = 1; n <= order; ++n) {
    const Level& level = levels[n - 1];
    const Level* parent_level = n > 1 ? &levels[n - 2] : nullptr;
    size_t p = 0;  // rank in the parent level
    for (size_t r = 0; r < level.order.size(); ++r) {
      const int32_t e = level.order[r];
      const int32_t* words = level.words.data() + static_cast<size_t>(e) * n;
      if (r > 0) {
        const int32_t* prev = level.words.data() + static_cast<size_t>(level.order[r - 1]) * n;
        if (std::equal(words, words + n, prev)) {
          return absl::InvalidArgumentError(absl::StrCat(path, ": a ", n, "-gram is listed twice"));
        }
      }
      int32_t parent = kRoot;
      if (parent_level != nullptr) {
        // The parent level is sorted the same way, so its n-1 word prefixes
        // are met in order.
        const auto prefix_less = [&](size_t rank) {
          const int32_t* pw =
              parent_level->words.data() + static_cast<size_t>(parent_level->order[rank]) * (n - 1);
          return std::lexicographical_compare(pw, pw + n - 1, words, words + n - 1);
        };
        while (p < parent_level->order.size() && prefix_less(p)) ++p;
        const int32_t* pw =
            p < parent_level->order.size()
                ? parent_level->words.data() + static_cast<size_t>(parent_level->order[p]) * (n - 1)
                : nullptr;
        if (pw == nullptr || !std::equal(pw, pw + n - 1, words)) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": a ", n, "-gram whose first ", n - 1, " words are not listed"));
        }
        parent = level_start[n - 1] + static_cast<int32_t>(p);
      }
      const int32_t id = level_start[n] + static_cast<int32_t>(r);
      Node& node = lm->nodes_[id];
      node = Node{words[n - 1], level.log_probs[e], level.backoffs[e], 0, 0, kRoot};
      Node& up = lm->nodes_[parent];
      if (up.num_children == 0) up.first_child = id;
      ++up.num_children;
      if (n == 1) lm->unigram_[words[0]] = id;
    }
  }
  // Suffix links: the node of each n-gram without its first word.
  for (int n = 2; n <= order; ++n) {
    const Level& level = levels[n - 1];
    for (size_t r = 0; r < level.order.size(); ++r) {
      const int32_t* words = level.words.data() + static_cast<size_t>(level.order[r]) * n;
      int32_t node = kRoot;
      for (int i = 1; i < n && node >= 0; ++i) node = lm->FindChild(node, words[i]);
      if (node < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": a ", n, "-gram whose last ", n - 1, " words are not listed"));
      }
      lm->nodes_[level_start[n] + r].suffix = node;
    }
  }
  if (lm->unigram_[bos_word] < 0 || lm->unigram_[lm->eos_word_] < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": <s> and </s> must be listed"));
  }
  lm->start_state_ = lm->Minimize(lm->unigram_[bos_word]);
  return std::shared_ptr<const NgramLm>(std::move(lm));
}

int32_t NgramLm::FindChild(int32_t node, int32_t word) const {
  if (node == kRoot) return unigram_[word];
  const Node& n = nodes_[node];
  const Node* first = nodes_.data() + n.first_child;
  const Node* last = first + n.num_children;
  const Node* it =
      std::lower_bound(first, last, word, [](const Node& a, int32_t w) { return a.word < w; });
  return it != last && it->word == word ? static_cast<int32_t>(it - nodes_.data()) : -1;
}

int32_t NgramLm::Minimize(int32_t node) const {
  while (node != kRoot && nodes_[node].num_children == 0 && nodes_[node].backoff == 0.0f) {
    node = nodes_[node].suffix;
  }
  return node;
}

float NgramLm::ScoreWord(State state, int32_t word, State* next) const {
  float total = 0.0f;
  for (int32_t node = state;;) {
    const int32_t child = FindChild(node, word);
    if (child >= 0) {
      *next = Minimize(child);
      return total + nodes_[child].log_prob;
    }
    if (node == kRoot) {
      *next = kRoot;
      return total + unknown_log_prob_;
    }
    total += nodes_[node].backoff;
    node = nodes_[node].suffix;
  }
}

float NgramLm::Score(State state, int32_t unit, State* next) const {
  OASR_DCHECK(unit >= 0 && unit < vocab_size_);
  thread_local ScoreMemo memo;
  ScoreMemo::Entry& e = memo.entries[ScoreMemo::Index(serial_, state, unit)];
  if (e.model == serial_ && e.state == state && e.unit == unit) {
    *next = e.next;
    return e.score;
  }
  const float score = ScoreWord(state, unit, next);
  e = ScoreMemo::Entry{serial_, state, unit, score, *next};
  return score;
}

float NgramLm::UnigramScore(int32_t unit) const {
  OASR_DCHECK(unit >= 0 && unit < vocab_size_);
  const int32_t node = unigram_[unit];
  return node >= 0 ? nodes_[node].log_prob : unknown_log_prob_;
}

float NgramLm::FinalScore(State state) const {
  State unused;
  return ScoreWord(state, eos_word_, &unused);
}

int64_t NgramLm::num_ngrams_total() const {
  return std::accumulate(counts_.begin(), counts_.end(), int64_t{0});
}

size_t NgramLm::memory_bytes() const {
  return nodes_.capacity() * sizeof(Node) + unigram_.capacity() * sizeof(int32_t);
}

absl::StatusOr<SymbolTable> ReadArpaWords(const std::string& path) {
  LineReader reader(path);
  if (!reader.is_open()) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  absl::string_view line;
  bool found = false;
  while (reader.Next(&line)) {
    if (absl::StripAsciiWhitespace(line) == "\\1-grams:") {
      found = true;
      break;
    }
  }
  if (!found) return absl::InvalidArgumentError(absl::StrCat(path, ": no \\1-grams: section"));
  std::vector<std::string> words;
  while (reader.Next(&line) && !IsBlank(line)) {
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 2 && fields.size() != 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", reader.line_no(),
                       ": expected a log-probability, a word and an optional backoff"));
    }
    if (fields[1] != "<s>" && fields[1] != "</s>") words.emplace_back(fields[1]);
  }
  absl::StatusOr<SymbolTable> table = SymbolTable::FromUnits(std::move(words));
  if (!table.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", table.status().message()));
  }
  return table;
}

namespace {

// Reads the optional number fields of `object` into their targets.
absl::Status ReadNumbers(const nlohmann::json& object, const std::string& where,
                         std::initializer_list<std::pair<const char*, float*>> fields) {
  for (const auto& [key, value] : fields) {
    const auto it = object.find(key);
    if (it == object.end()) continue;
    if (!it->is_number()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": \"", key, "\" must be a number"));
    }
    *value = it->get<float>();
  }
  return absl::OkStatus();
}

// `object`'s "file", directory prepended: "" when absent, an error when it
// is not a non-empty string.
absl::StatusOr<std::string> ReadFileField(const nlohmann::json& object, const std::string& where,
                                          const std::filesystem::path& dir) {
  const auto file = object.find("file");
  if (file == object.end()) return std::string();
  if (!file->is_string() || file->get<std::string>().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": \"file\" must name an ARPA file"));
  }
  return (dir / file->get<std::string>()).string();
}

}  // namespace

absl::StatusOr<std::optional<LanguageModelSpec>> ReadLanguageModelSpec(
    const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  const std::string json_path = (dir / "lm.json").string();
  std::ifstream in(json_path);
  if (!in) return std::optional<LanguageModelSpec>();
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(json_path, ": not a JSON object"));
  }
  LanguageModelSpec spec;
  OASR_ASSIGN_OR_RETURN(spec.path, ReadFileField(j, json_path, dir));
  OASR_RETURN_IF_ERROR(
      ReadNumbers(j, json_path, {{"weight", &spec.weight}, {"token_bonus", &spec.token_bonus}}));
  if (const auto words = j.find("words"); words != j.end()) {
    const std::string where = absl::StrCat(json_path, ": \"words\"");
    if (!words->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where, " must be an object"));
    }
    OASR_ASSIGN_OR_RETURN(spec.word_path, ReadFileField(*words, where, dir));
    if (spec.word_path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": \"file\" must name an ARPA file"));
    }
    OASR_RETURN_IF_ERROR(ReadNumbers(*words, where,
                                     {{"weight", &spec.word_weight},
                                      {"word_bonus", &spec.word_bonus},
                                      {"unknown_word_penalty", &spec.unknown_word_penalty}}));
  }
  if (spec.path.empty() && spec.word_path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        json_path, ": \"file\" must name the unit ARPA file (or \"words\" a word one)"));
  }
  return std::optional<LanguageModelSpec>(std::move(spec));
}

}  // namespace oasr::decoder
