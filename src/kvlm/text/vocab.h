#pragma once
// A token <-> id table with string_view lookups, shared by the models.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

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
    auto it = tokens_.find(id);
    return it == tokens_.end() ? nullptr : &it->second;
  }
  int32_t size() const { return size_; }  // highest id + 1

 private:
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids_;
  // A map rather than a vector indexed by id: a file may number its tokens sparsely, and a
  // single huge id must not make the table huge.
  std::unordered_map<int32_t, std::string> tokens_;
  int32_t size_ = 0;
};

}  // namespace kvlm::text
