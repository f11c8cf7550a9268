#pragma once
// A token <-> id table with string_view lookups, shared by the models.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvlm::text {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class Vocab {
 public:
  // Adds token with id; duplicate tokens keep the first id (as a JSON object would).
  void add(std::string token, int32_t id);
  std::optional<int32_t> find(std::string_view token) const {
    auto it = ids_.find(token);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  const std::string* token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !present_[static_cast<size_t>(id)])
      return nullptr;
    return &tokens_[static_cast<size_t>(id)];
  }
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }

 private:
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids_;
  std::vector<std::string> tokens_;
  std::vector<bool> present_;
};

}  // namespace kvlm::text
