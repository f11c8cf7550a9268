#include "kvlm/text/vocab.h"

#include <algorithm>

namespace kvlm::text {

void Vocab::add(std::string token, int32_t id) {
  if (ids_.find(token) == ids_.end()) ids_.emplace(token, id);
  size_ = std::max(size_, id + 1);
  tokens_.emplace(id, std::move(token));  // a repeated id keeps its first token
}

}  // namespace kvlm::text
