#include "kvlm/text/regex.h"

#include <oniguruma.h>

#include <mutex>

#include "kvlm/base/error.h"
#include "kvlm/text/unicode.h"

namespace kvlm::text {

namespace {

void init_onig_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

}  // namespace

struct Regex::State {
  regex_t* re = nullptr;
};

Regex::Regex(const std::string& pattern, const std::string& origin) : state_(new State) {
  init_onig_once();
  OnigErrorInfo info;
  const auto* begin = reinterpret_cast<const OnigUChar*>(pattern.data());
  int rc = onig_new(&state_->re, begin, begin + pattern.size(), ONIG_OPTION_NONE,
                    ONIG_ENCODING_UTF8, ONIG_SYNTAX_RUBY, &info);
  if (rc != ONIG_NORMAL) {
    OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, rc, &info);
    throw Error(origin + ": invalid regex '" + pattern + "': " + reinterpret_cast<char*>(msg));
  }
}

Regex::~Regex() {
  if (state_ && state_->re) onig_free(state_->re);
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
  const OnigUChar* end = str + text.size();
  // A region per call keeps concurrent encodes on one Regex independent.
  OnigRegion* region = onig_region_new();
  size_t pos = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (pos <= text.size()) {
    int r = onig_search(state_->re, str, end, str + pos, end, region, ONIG_OPTION_NONE);
    if (r < 0) break;  // ONIG_MISMATCH, or a matcher error (treated as no further match)
    size_t s = static_cast<size_t>(region->beg[0]);
    size_t e = static_cast<size_t>(region->end[0]);
    if (s == e) {
      // An empty match right after the previous match is skipped; either way the scan moves on
      // by one character so that it terminates.
      if (!(have_last && s == last_end)) out.emplace_back(s, e);
      if (e >= text.size()) break;
      pos = e + utf8_len(static_cast<unsigned char>(text[e]));
    } else {
      out.emplace_back(s, e);
      pos = e;
    }
    have_last = true;
    last_end = e;
  }
  onig_region_free(region, 1);
  return out;
}

}  // namespace kvlm::text
