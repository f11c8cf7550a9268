#include "kvlm/text/tokenizer.h"

#include "kvlm/base/error.h"
#include "kvlm/base/file.h"
#include "kvlm/text/tokenizer_impl.h"
#include "kvlm/text/unicode.h"

namespace kvlm {

namespace text {

const AddedToken* TokenizerImpl::added_token(int32_t id) const {
  auto it = added_by_id.find(id);
  return it == added_by_id.end() ? nullptr : &added[it->second];
}

std::vector<int32_t> TokenizerImpl::encode(std::string_view input, bool add_special_tokens) const {
  // Input that is not valid UTF-8 is read as from_utf8_lossy would read it.
  const std::string text = utf8_lossy(input);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Piece> pieces;
  auto run_model = [&](const Segment& seg) {
    pieces.clear();
    // Like HF's PreTokenizedString, an empty string has no splits (so no prefix space is added).
    if (!seg.text.empty()) pieces.push_back({seg.text, seg.at_start});
    if (pre_tokenizer) pre_tokenizer->pre_tokenize(pieces);
    for (const Piece& p : pieces) model->tokenize(p.text, ids);
  };
  for (Segment& raw : split_added(text, true, *raw_matcher, raw_tokens)) {
    if (raw.added_id >= 0) {
      ids.push_back(raw.added_id);
      continue;
    }
    if (normalizer) raw.text = normalizer->normalize(std::move(raw.text));
    for (const Segment& seg :
         split_added(raw.text, raw.at_start, *normalized_matcher, normalized_tokens)) {
      if (seg.added_id >= 0)
        ids.push_back(seg.added_id);
      else
        run_model(seg);
    }
  }
  if (post_processor) post_processor->process(ids, add_special_tokens);
  return ids;
}

bool TokenizerImpl::yields_token(int32_t id, bool skip_special) const {
  if (const AddedToken* t = added_token(id)) return !(skip_special && t->special);
  return model->id_to_token(id) != nullptr;  // unknown ids are skipped, as HF does
}

std::vector<std::string> TokenizerImpl::decoder_input(std::span<const int32_t> ids,
                                                      bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (!yields_token(id, skip_special)) continue;
    const AddedToken* t = added_token(id);
    tokens.push_back(t ? t->content : *model->id_to_token(id));
  }
  return tokens;
}

std::string TokenizerImpl::run_decoder(std::vector<std::string> tokens) const {
  std::string out;
  if (!decoder) {
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  decoder->decode_chain(tokens);
  for (const std::string& t : tokens) out += t;
  return out;
}

namespace {

// `list` may be null: a tokenizer without added tokens still gets (empty) matchers.
void load_added_tokens(TokenizerImpl& impl, const Json& list, const std::string& origin) {
  check(list.is_null() || list.is_array(), origin + ": field 'added_tokens' must be a list");
  for (const Json& j : list.is_null() ? Json::array() : list) {
    AddedToken t = parse_added_token(j, origin + ": added_tokens");
    if (t.content.empty()) continue;
    impl.added_ids.emplace(t.content, t.id);
    if (impl.added_by_id.count(t.id) == 0) impl.added_by_id.emplace(t.id, impl.added.size());
    impl.added.push_back(std::move(t));
  }
  // HF matches special tokens ahead of the others; pointers are taken once `added` is final.
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (int pass = 0; pass < 2; ++pass)
    for (const AddedToken& t : impl.added) {
      if (t.special != (pass == 0)) continue;
      if (t.normalized) {
        impl.normalized_tokens.push_back(&t);
        normalized_patterns.push_back(impl.normalizer ? impl.normalizer->normalize(t.content)
                                                      : t.content);
      } else {
        impl.raw_tokens.push_back(&t);
        raw_patterns.push_back(t.content);
      }
    }
  impl.raw_matcher = std::make_unique<TokenMatcher>(raw_patterns);
  impl.normalized_matcher = std::make_unique<TokenMatcher>(normalized_patterns);
}

std::optional<int32_t> config_token_id(const TokenizerImpl& impl, const Json& config,
                                       const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const Json& v = config.at(key);
  std::string content;
  if (v.is_string())
    content = v.get<std::string>();
  else if (v.is_object() && v.contains("content") && v.at("content").is_string())
    content = v.at("content").get<std::string>();
  else
    return std::nullopt;
  if (auto it = impl.added_ids.find(content); it != impl.added_ids.end()) return it->second;
  return impl.model->token_to_id(content);
}

std::shared_ptr<TokenizerImpl> load(const std::string& path) {
  const Json j = read_json_file(path);
  check(j.is_object(), path + ": a tokenizer.json must be a JSON object");
  auto impl = std::make_shared<TokenizerImpl>();
  impl->origin = path;
  check(j.contains("model"), path + ": missing required field 'model'");
  impl->normalizer = make_normalizer(j.value("normalizer", Json()), path);
  impl->pre_tokenizer = make_pre_tokenizer(j.value("pre_tokenizer", Json()), path);
  impl->model = make_model(j.at("model"), path);
  impl->post_processor = make_post_processor(j.value("post_processor", Json()), path);
  impl->decoder = make_decoder(j.value("decoder", Json()), path);
  load_added_tokens(*impl, j.value("added_tokens", Json()), path);
  impl->vocab_size = impl->model->size();
  for (const text::AddedToken& t : impl->added)
    impl->vocab_size = std::max(impl->vocab_size, t.id + 1);
  return impl;
}

}  // namespace
}  // namespace text

Tokenizer Tokenizer::from_file(const std::string& path) { return Tokenizer(text::load(path)); }

Tokenizer Tokenizer::from_model_dir(const std::string& dir) {
  const std::string json_path = dir + "/tokenizer.json";
  check(file_exists(json_path), dir + ": no tokenizer.json in the model folder");
  auto impl = text::load(json_path);
  const std::string config_path = dir + "/tokenizer_config.json";
  if (file_exists(config_path)) {
    const Json config = read_json_file(config_path);
    impl->bos_id = text::config_token_id(*impl, config, "bos_token");
    impl->eos_id = text::config_token_id(*impl, config, "eos_token");
  }
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return impl_->encode(text, add_special_tokens);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->run_decoder(impl_->decoder_input(ids, skip_special_tokens));
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = impl_->added_ids.find(std::string(token)); it != impl_->added_ids.end())
    return it->second;
  return impl_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (const text::AddedToken* t = impl_->added_token(id)) return t->content;
  const std::string* piece = impl_->model->id_to_token(id);
  return piece ? *piece : std::string();
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

bool Tokenizer::is_special(int32_t id) const {
  const text::AddedToken* t = impl_->added_token(id);
  return t && t->special;
}

std::optional<int32_t> Tokenizer::bos_token_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_token_id() const { return impl_->eos_id; }

}  // namespace kvlm
