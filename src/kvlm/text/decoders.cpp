// Decoders: HF's decode_chain over the list of token strings; decode() joins the result.
#include "kvlm/base/error.h"
#include "kvlm/text/components.h"
#include "kvlm/text/regex.h"
#include "kvlm/text/unicode.h"

namespace kvlm::text {

namespace {

// Maps byte-level characters back to bytes over all tokens, then decodes UTF-8 lossily. A token
// containing a character outside the table (an added token such as "<|im_start|>" written
// verbatim) contributes its raw UTF-8 bytes instead.
class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      size_t mark = bytes.size();
      bool all_mapped = true;
      for (size_t i = 0; i < t.size();) {
        int b = byte_from_char(next_code_point(t, i));
        if (b < 0) {
          all_mapped = false;
          break;
        }
        bytes += static_cast<char>(b);
      }
      if (!all_mapped) {
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(const Json& j, const std::string& origin)
      : replacement_(json_get_or<std::string>(j, "replacement", "\u2581", origin)) {
    std::string scheme = "always";
    if (j.contains("prepend_scheme") && !j.at("prepend_scheme").is_null())
      scheme = json_get<std::string>(j, "prepend_scheme", origin);
    else if (!json_get_or<bool>(j, "add_prefix_space", true, origin))
      scheme = "never";
    check(scheme == "always" || scheme == "first" || scheme == "never",
          origin + ": unknown prepend_scheme '" + scheme + "'");
    strip_first_ = scheme != "never";
  }
  // Every replacement character becomes a space, except in the first token, where HF drops it
  // (the prefix space the pre-tokenizer added).
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t p = 0; p < t.size();) {
        if (t.compare(p, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && strip_first_)) out += ' ';
          p += replacement_.size();
        } else {
          out += t[p++];
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

// "<0xAB>" -> 0xAB, else -1.
int parse_byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int k = 3; k < 5; ++k) {
    char c = t[static_cast<size_t>(k)];
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                             : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// Runs of <0xXX> tokens become their UTF-8 text, or one U+FFFD per byte when the run is not
// valid UTF-8 as a whole.
class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string run;
    size_t run_len = 0;
    auto flush = [&] {
      if (run_len == 0) return;
      if (is_valid_utf8(run)) {
        out.push_back(run);
      } else {
        std::string rep;
        for (size_t k = 0; k < run_len; ++k) rep += "\xEF\xBF\xBD";
        out.push_back(rep);
      }
      run.clear();
      run_len = 0;
    };
    for (std::string& t : tokens) {
      int b = parse_byte_token(t);
      if (b >= 0) {
        run += static_cast<char>(b);
        ++run_len;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
  bool holds_tail(const std::string& last) const override { return parse_byte_token(last) >= 0; }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(const Json& j, const std::string& origin)
      : start_(json_get_or<size_t>(j, "start", 0, origin)),
        stop_(json_get_or<size_t>(j, "stop", 0, origin)) {
    std::vector<char32_t> c = to_code_points(json_get<std::string>(j, "content", origin));
    check(c.size() == 1, origin + ": content must be one character");
    content_ = c[0];
  }
  // Removes up to `start` leading and `stop` trailing copies of the content character from
  // every token.
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::vector<char32_t> cps = to_code_points(t);
      size_t b = 0, e = cps.size();
      while (b < start_ && b < e && cps[b] == content_) ++b;
      size_t cut = 0;
      while (cut < stop_ && e > b && cps[e - 1] == content_) --e, ++cut;
      std::string out;
      for (size_t k = b; k < e; ++k) append_utf8(out, cps[k]);
      t = std::move(out);
    }
  }
  bool holds_tail(const std::string&) const override { return stop_ > 0; }

 private:
  size_t start_, stop_;
  char32_t content_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(const Json& j, const std::string& origin)
      : pattern_(json_get<Json>(j, "pattern", origin), origin),
        content_(json_get<std::string>(j, "content", origin)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      auto matches = pattern_.find_all(t);
      if (matches.empty()) continue;
      std::string out;
      size_t prev = 0;
      for (auto [b, e] : matches) {
        out.append(t, prev, b - prev);
        out += content_;
        prev = e;
      }
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  Pattern pattern_;
  std::string content_;
};

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
  return s;
}

// HF's cleanup of tokenization spaces before punctuation and English contractions.
std::string cleanup_spaces(std::string s) {
  static const std::pair<const char*, const char*> rules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},           {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},         {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : rules) s = replace_all(std::move(s), from, to);
  return s;
}

class WordPieceDecoder : public Decoder {
 public:
  WordPieceDecoder(const Json& j, const std::string& origin)
      : prefix_(json_get_or<std::string>(j, "prefix", "##", origin)),
        cleanup_(json_get_or<bool>(j, "cleanup", true, origin)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (t.compare(0, prefix_.size(), prefix_) == 0)
          t.erase(0, prefix_.size());
        else
          t.insert(0, " ");
      }
      if (cleanup_) t = cleanup_spaces(std::move(t));
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class SequenceDecoder : public Decoder {
 public:
  SequenceDecoder(const Json& j, const std::string& origin) {
    for (const Json& d : json_get<Json>(j, "decoders", origin))
      if (auto made = make_decoder(d, origin)) steps_.push_back(std::move(made));
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : steps_) d->decode_chain(tokens);
  }
  // Each step sees what the previous steps made of the last token.
  bool holds_tail(const std::string& last) const override {
    std::vector<std::string> t = {last};
    for (const auto& d : steps_) {
      if (t.empty() || d->holds_tail(t.back())) return !t.empty();
      d->decode_chain(t);
    }
    return false;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const Json& j, const std::string& origin) {
  if (j.is_null()) return nullptr;
  std::string type = json_get<std::string>(j, "type", origin + ": decoder");
  const std::string where = origin + ": decoder " + type;
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") return std::make_unique<MetaspaceDecoder>(j, where);
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") return std::make_unique<StripDecoder>(j, where);
  if (type == "Replace") return std::make_unique<ReplaceDecoder>(j, where);
  if (type == "WordPiece") return std::make_unique<WordPieceDecoder>(j, where);
  if (type == "Sequence") return std::make_unique<SequenceDecoder>(j, origin);
  throw Error(origin + ": unknown decoder type '" + type + "'");
}

}  // namespace kvlm::text
