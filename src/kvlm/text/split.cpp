// Splitting helpers shared by pre-tokenizers, normalizers and decoders: HF's
// NormalizedString::split semantics and the {"String"|"Regex"} pattern object.
#include <algorithm>

#include "kvlm/base/error.h"
#include "kvlm/text/components.h"
#include "kvlm/text/regex.h"

namespace kvlm::text {

SplitBehavior parse_split_behavior(const Json& j, const std::string& origin) {
  std::string b = j.is_string() ? j.get<std::string>() : j.dump();
  if (b == "Removed") return SplitBehavior::Removed;
  if (b == "Isolated") return SplitBehavior::Isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return SplitBehavior::Contiguous;
  throw Error(origin + ": unknown split behavior '" + b + "'");
}

namespace {

struct Span {
  size_t start, end;
  bool is_match;
};

// The whole text as alternating (non-)match spans, as HF's Pattern::find_matches returns it.
std::vector<Span> to_spans(std::string_view text,
                           const std::vector<std::pair<size_t, size_t>>& matches, bool invert) {
  std::vector<Span> spans;
  size_t prev = 0;
  for (auto [s, e] : matches) {
    if (prev != s) spans.push_back({prev, s, invert});
    spans.push_back({s, e, !invert});
    prev = e;
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), invert});
  return spans;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> split_by_matches(std::string_view text,
                                          const std::vector<std::pair<size_t, size_t>>& matches,
                                          SplitBehavior behavior, bool invert) {
  std::vector<Span> spans = to_spans(text, matches, invert);
  std::vector<std::pair<size_t, size_t>> kept;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::Removed:
      for (const Span& s : spans)
        if (!s.is_match) kept.emplace_back(s.start, s.end);
      break;
    case SplitBehavior::Isolated:
      for (const Span& s : spans) kept.emplace_back(s.start, s.end);
      break;
    case SplitBehavior::Contiguous:
      for (const Span& s : spans) {
        if (s.is_match == previous_match && !kept.empty())
          kept.back().second = s.end;
        else
          kept.emplace_back(s.start, s.end);
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !kept.empty())
          kept.back().second = s.end;
        else
          kept.emplace_back(s.start, s.end);
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::MergedWithNext:
      // HF folds from the right: a match joins the piece that follows it.
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !kept.empty())
          kept.back().first = it->start;
        else
          kept.emplace_back(it->start, it->end);
        previous_match = it->is_match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  std::erase_if(kept, [](const auto& r) { return r.second <= r.first; });
  return kept;
}

Pattern::Pattern(const Json& j, const std::string& origin) {
  check(j.is_object() && j.size() == 1,
        origin + ": pattern must be {\"String\": ...} or {\"Regex\": ...}, got " + j.dump());
  if (j.contains("String")) {
    literal_ = json_get<std::string>(j, "String", origin);
  } else if (j.contains("Regex")) {
    regex_ = std::make_unique<Regex>(json_get<std::string>(j, "Regex", origin), origin);
  } else {
    throw Error(origin + ": pattern must be {\"String\": ...} or {\"Regex\": ...}, got " +
                j.dump());
  }
}

Pattern::~Pattern() = default;

std::vector<std::pair<size_t, size_t>> Pattern::find_all(std::string_view text) const {
  if (regex_) return regex_->find_all(text);
  std::vector<std::pair<size_t, size_t>> out;
  if (literal_.empty()) return out;
  for (size_t pos = text.find(literal_); pos != std::string_view::npos;
       pos = text.find(literal_, pos + literal_.size()))
    out.emplace_back(pos, pos + literal_.size());
  return out;
}

}  // namespace kvlm::text
