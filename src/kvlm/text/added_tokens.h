#pragma once
// Added tokens (special and user-added): matched in the input before the normalizer and the
// pre-tokenizer run, as HF's AddedVocabulary does.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvlm/base/json.h"

namespace kvlm::text {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = true;
};

AddedToken parse_added_token(const Json& j, const std::string& origin);

// Leftmost-longest matcher over a set of token strings (a byte trie).
class TokenMatcher {
 public:
  // `patterns[k]` matches for token index `k`; empty patterns never match.
  explicit TokenMatcher(const std::vector<std::string>& patterns);
  struct Match {
    size_t start, end;
    size_t index;
  };
  // Non-overlapping matches, leftmost first, the longest at each start.
  std::vector<Match> find_all(std::string_view text) const;
  bool empty() const { return nodes_.size() <= 1; }

 private:
  struct Node {
    int32_t index = -1;  // token index when a pattern ends here
  };
  int32_t child(int32_t node, unsigned char b) const {
    auto it = edges_.find((static_cast<uint64_t>(node) << 8) | b);
    return it == edges_.end() ? -1 : it->second;
  }
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> edges_;
  bool first_byte_[256] = {};
};

// A span of input text: either an added token (id >= 0) or text for the normal pipeline.
struct Segment {
  std::string text;
  int32_t added_id = -1;
  bool at_start = false;  // begins at offset 0 of the original input
};

// Splits `text` around the matches of `tokens` (through `matcher`), honouring each token's
// lstrip / rstrip / single_word flags exactly as HF's find_matches does.
std::vector<Segment> split_added(std::string_view text, bool at_start, const TokenMatcher& matcher,
                                 const std::vector<const AddedToken*>& tokens);

}  // namespace kvlm::text
