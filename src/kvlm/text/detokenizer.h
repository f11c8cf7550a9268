#pragma once
// StreamingDetokenizer turns ids into text as they are generated. The concatenation of every
// push() result and finish() equals Tokenizer::decode(all ids): text is emitted only once no
// later token can change it (an incomplete UTF-8 sequence, an open run of byte-fallback tokens,
// or a decoder rule that looks at the following token holds it back).
#include <cstdint>
#include <string>
#include <vector>

#include "kvlm/text/tokenizer.h"

namespace kvlm {

class StreamingDetokenizer {
 public:
  StreamingDetokenizer(const Tokenizer& tok, bool skip_special_tokens);

  // Newly final text; may be empty.
  std::string push(int32_t id);
  // Whatever is still held back; the stream is then complete.
  std::string finish();

 private:
  std::string emit_ready(bool at_end);

  Tokenizer tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;     // every id pushed so far
  size_t window_start_ = 0;      // ids_[window_start_, emitted_until_) give decode context
  size_t emitted_until_ = 0;     // ids before this index have had their text emitted
  std::string emitted_;          // all text emitted so far
};

}  // namespace kvlm
