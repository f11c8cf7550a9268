// Post-processors: add the model's special tokens around an encoded sequence (single-sequence
// inputs; pairs are not part of kvlm's API).
#include "kvlm/base/error.h"
#include "kvlm/text/components.h"

namespace kvlm::text {

namespace {

// Adds fixed ids before and after the sequence.
class WrapProcessor : public PostProcessor {
 public:
  WrapProcessor(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }

 private:
  std::vector<int32_t> before_, after_;
};

class NoOpProcessor : public PostProcessor {
 public:
  void process(std::vector<int32_t>&, bool) const override {}
};

// TemplateProcessing's "single" template: $A (the sequence) among special-token pieces.
std::unique_ptr<PostProcessor> make_template(const Json& j, const std::string& origin) {
  const Json& single = json_get<Json>(j, "single", origin);
  const Json specials = json_get_or<Json>(j, "special_tokens", Json::object(), origin);
  check(single.is_array(), origin + ": field 'single' must be a list");
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (const Json& item : single) {
    if (item.contains("Sequence")) {
      std::string id = json_get<std::string>(item.at("Sequence"), "id", origin);
      check(id == "A", origin + ": single template refers to sequence '" + id + "'");
      check(!seen_sequence, origin + ": single template has $A twice");
      seen_sequence = true;
    } else if (item.contains("SpecialToken")) {
      std::string name = json_get<std::string>(item.at("SpecialToken"), "id", origin);
      check(specials.contains(name),
            origin + ": special token '" + name + "' is missing from special_tokens");
      for (const Json& id : json_get<Json>(specials.at(name), "ids", origin))
        (seen_sequence ? after : before).push_back(id.get<int32_t>());
    } else {
      throw Error(origin + ": unknown template piece " + item.dump());
    }
  }
  check(seen_sequence, origin + ": single template has no $A");
  return std::make_unique<WrapProcessor>(std::move(before), std::move(after));
}

int32_t token_pair_id(const Json& j, const char* key, const std::string& origin) {
  const Json& p = json_get<Json>(j, key, origin);
  check(p.is_array() && p.size() == 2 && p[1].is_number_integer(),
        origin + ": field '" + key + "' must be [token, id]");
  return p[1].get<int32_t>();
}

class SequenceProcessor : public PostProcessor {
 public:
  SequenceProcessor(const Json& j, const std::string& origin) {
    for (const Json& p : json_get<Json>(j, "processors", origin))
      if (auto made = make_post_processor(p, origin)) steps_.push_back(std::move(made));
  }
  void process(std::vector<int32_t>& ids, bool add) const override {
    for (const auto& s : steps_) s->process(ids, add);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const Json& j, const std::string& origin) {
  if (j.is_null()) return nullptr;
  std::string type = json_get<std::string>(j, "type", origin + ": post_processor");
  const std::string where = origin + ": post_processor " + type;
  if (type == "TemplateProcessing") return make_template(j, where);
  if (type == "ByteLevel") return std::make_unique<NoOpProcessor>();  // only trims offsets
  if (type == "RobertaProcessing" || type == "BertProcessing")
    return std::make_unique<WrapProcessor>(std::vector<int32_t>{token_pair_id(j, "cls", where)},
                                           std::vector<int32_t>{token_pair_id(j, "sep", where)});
  if (type == "Sequence") return std::make_unique<SequenceProcessor>(j, origin);
  throw Error(origin + ": unknown post_processor type '" + type + "'");
}

}  // namespace kvlm::text
