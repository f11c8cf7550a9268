// Streaming detokenization by windowed re-decoding. The text of ids[window_start, emitted_until)
// has already been emitted; a push decodes ids[window_start, end) and emits what follows the
// decoding of the already-emitted part of the window. Decoding from a window start that is a
// previously emitted token keeps first-token rules (Metaspace/Strip dropping a leading space,
// WordPiece joining) applied to context text only, so the difference is exactly the new text of
// decode(all), and each push costs only the size of the window, not of the whole stream.
// Text is held back while it ends in U+FFFD (an incomplete UTF-8 sequence) or while the decoder
// says a later token could still change it.
#include "kvlm/text/detokenizer.h"

#include "kvlm/text/tokenizer_impl.h"

namespace kvlm {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

bool ends_with_replacement(const std::string& s) {
  return s.size() >= kReplacement.size() &&
         s.compare(s.size() - kReplacement.size(), kReplacement.size(), kReplacement) == 0;
}

}  // namespace

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(tok), skip_special_(skip_special_tokens) {}

std::string StreamingDetokenizer::push(int32_t id) {
  ids_.push_back(id);
  return emit_ready(false);
}

std::string StreamingDetokenizer::finish() {
  std::string out = emit_ready(true);
  ids_.clear();
  window_start_ = emitted_until_ = 0;
  emitted_.clear();
  return out;
}

std::string StreamingDetokenizer::emit_ready(bool at_end) {
  const text::TokenizerImpl& impl = tok_.impl();
  std::span<const int32_t> all(ids_);
  if (!at_end && impl.decoder) {
    // The newest id that reaches the decoder (skipped specials do not separate byte runs).
    size_t k = ids_.size();
    while (k > 0 && !impl.yields_token(ids_[k - 1], skip_special_)) --k;
    if (k > 0 && impl.decoder->holds_tail(impl.decoder_input(all.subspan(k - 1, 1), skip_special_)[0]))
      return {};
  }
  std::string full = impl.run_decoder(impl.decoder_input(all.subspan(window_start_), skip_special_));
  if (!at_end && ends_with_replacement(full)) return {};
  std::string prefix = impl.run_decoder(impl.decoder_input(
      all.subspan(window_start_, emitted_until_ - window_start_), skip_special_));
  std::string fresh;
  if (full.compare(0, prefix.size(), prefix) == 0) {
    fresh = full.substr(prefix.size());
  } else if (at_end) {
    // The window's text was revised; the whole stream's decoding settles what remains.
    std::string whole = tok_.decode(all, skip_special_);
    fresh = whole.compare(0, emitted_.size(), emitted_) == 0 ? whole.substr(emitted_.size()) : "";
  } else {
    return {};  // wait until the decoding of the window stops revising earlier text
  }
  // The next window starts at this group unless the group decodes to no token at all (skipped
  // specials): the window must begin with a real token, or the decoder would treat the first
  // new token as the start of the text.
  bool group_has_token = false;
  for (size_t k = emitted_until_; k < ids_.size() && !group_has_token; ++k)
    group_has_token = impl.yields_token(ids_[k], skip_special_);
  if (group_has_token) window_start_ = emitted_until_;
  emitted_until_ = ids_.size();
  emitted_ += fresh;
  return fresh;
}

}  // namespace kvlm
