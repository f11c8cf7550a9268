#include "kvlm/text/vocab.h"

namespace kvlm::text {

void Vocab::add(std::string token, int32_t id) {
  if (ids_.find(token) == ids_.end()) ids_.emplace(token, id);
  size_t i = static_cast<size_t>(id);
  if (i >= tokens_.size()) {
    tokens_.resize(i + 1);
    present_.resize(i + 1, false);
  }
  if (!present_[i]) {
    tokens_[i] = std::move(token);
    present_[i] = true;
  }
}

}  // namespace kvlm::text
