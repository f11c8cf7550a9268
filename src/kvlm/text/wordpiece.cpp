// WordPiece (BERT) and WordLevel models.
#include "kvlm/base/error.h"
#include "kvlm/text/components.h"
#include "kvlm/text/unicode.h"
#include "kvlm/text/vocab.h"

namespace kvlm::text {

namespace {

Vocab load_vocab_object(const Json& j, const std::string& origin) {
  const Json& vocab = json_get<Json>(j, "vocab", origin);
  check(vocab.is_object(), origin + ": field 'vocab' must be an object of token -> id");
  Vocab v;
  for (const auto& [tok, id] : vocab.items()) {
    check(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (1 << 30),
          origin + ": vocab id of '" + tok + "' is not a valid id (" + id.dump() + ")");
    v.add(tok, id.get<int32_t>());
  }
  return v;
}

int32_t required_unk(const Vocab& v, const Json& j, const std::string& origin) {
  std::string unk = json_get<std::string>(j, "unk_token", origin);
  auto id = v.find(unk);
  check(id.has_value(), origin + ": unk_token '" + unk + "' is not in the vocab");
  return *id;
}

// Greedy longest-match-first; a word with any unmatched remainder becomes a single unk.
class WordPiece : public Model {
 public:
  WordPiece(const Json& j, const std::string& origin)
      : vocab_(load_vocab_object(j, origin)),
        unk_id_(required_unk(vocab_, j, origin)),
        prefix_(json_get_or<std::string>(j, "continuing_subword_prefix", "##", origin)),
        max_chars_(json_get_or<size_t>(j, "max_input_chars_per_word", 100, origin)) {}

  void tokenize(std::string_view word, std::vector<int32_t>& out) const override {
    std::vector<size_t> bounds;  // byte offset of every character boundary
    for (size_t i = 0; i < word.size(); next_code_point(word, i)) bounds.push_back(i);
    bounds.push_back(word.size());
    if (bounds.size() - 1 > max_chars_) {
      out.push_back(unk_id_);
      return;
    }
    std::vector<int32_t> ids;
    std::string candidate;
    for (size_t b = 0; b + 1 < bounds.size();) {
      std::optional<int32_t> found;
      size_t e = bounds.size() - 1;
      for (; e > b; --e) {
        candidate.clear();
        if (b > 0) candidate = prefix_;
        candidate.append(word.substr(bounds[b], bounds[e] - bounds[b]));
        if ((found = vocab_.find(candidate))) break;
      }
      if (!found) {
        out.push_back(unk_id_);
        return;
      }
      ids.push_back(*found);
      b = e;
    }
    out.insert(out.end(), ids.begin(), ids.end());
  }

  std::optional<int32_t> token_to_id(std::string_view t) const override { return vocab_.find(t); }
  const std::string* id_to_token(int32_t id) const override { return vocab_.token(id); }
  int32_t size() const override { return vocab_.size(); }

 private:
  Vocab vocab_;
  int32_t unk_id_;
  std::string prefix_;
  size_t max_chars_;
};

class WordLevel : public Model {
 public:
  WordLevel(const Json& j, const std::string& origin)
      : vocab_(load_vocab_object(j, origin)), unk_id_(required_unk(vocab_, j, origin)) {}
  void tokenize(std::string_view word, std::vector<int32_t>& out) const override {
    out.push_back(vocab_.find(word).value_or(unk_id_));
  }
  std::optional<int32_t> token_to_id(std::string_view t) const override { return vocab_.find(t); }
  const std::string* id_to_token(int32_t id) const override { return vocab_.token(id); }
  int32_t size() const override { return vocab_.size(); }

 private:
  Vocab vocab_;
  int32_t unk_id_;
};

}  // namespace

std::unique_ptr<Model> make_bpe_model(const Json& j, const std::string& origin);
std::unique_ptr<Model> make_unigram_model(const Json& j, const std::string& origin);

std::unique_ptr<Model> make_model(const Json& j, const std::string& origin) {
  check(j.is_object(), origin + ": missing required field 'model'");
  std::string type;
  if (j.contains("type")) {
    type = json_get<std::string>(j, "type", origin + ": model");
  } else if (j.contains("merges")) {
    type = "BPE";  // older serialisations omit the type; the fields identify the model
  } else if (j.contains("vocab") && j.at("vocab").is_array()) {
    type = "Unigram";
  } else if (j.contains("max_input_chars_per_word") || j.contains("continuing_subword_prefix")) {
    type = "WordPiece";
  } else if (j.contains("vocab") && j.contains("unk_token")) {
    type = "WordLevel";
  } else {
    throw Error(origin + ": model has no 'type' and its fields match no known model");
  }
  const std::string where = origin + ": model " + type;
  if (type == "BPE") return make_bpe_model(j, where);
  if (type == "Unigram") return make_unigram_model(j, where);
  if (type == "WordPiece") return std::make_unique<WordPiece>(j, where);
  if (type == "WordLevel") return std::make_unique<WordLevel>(j, where);
  throw Error(origin + ": unknown model type '" + type + "'");
}

}  // namespace kvlm::text
