// Each normalizer, pre-tokenizer and decoder on its own against HF `tokenizers`
// (goldens/components.json from tools/tokenizer_goldens.py), including configurations that no
// bundled tokenizer uses: the Llama-3 and Qwen2 Split regexes, every split behaviour and invert,
// Metaspace prepend schemes, Digits, Punctuation, Whitespace, BertPreTokenizer, Nmt, ...
#include <gtest/gtest.h>

#include "kvlm/text/components.h"
#include "tokenizer_goldens.h"

namespace kvlm::text {
namespace {

const std::string& components_path() {
  static const std::string p = test::tokenizer_data("goldens/components.json");
  return p;
}

Json components() {
  static const Json j = read_json_file(components_path());
  return j;
}

// Runs `check_case` over every case of every configuration of `kind`; configurations that HF
// itself rejected are expected to be rejected here too.
template <typename Make, typename CheckCase>
void for_each_config(const char* kind, Make make, CheckCase check_case) {
  const Json list = components().at(kind);
  ASSERT_FALSE(list.empty());
  for (const Json& entry : list) {
    const Json& config = entry.at("config");
    SCOPED_TRACE(config.dump());
    if (entry.contains("error")) {
      EXPECT_THROW(make(config), Error) << "HF rejected it: " << entry.at("error");
      continue;
    }
    auto component = make(config);
    ASSERT_TRUE(component);
    for (const Json& c : entry.at("cases")) check_case(*component, c);
  }
}

TEST(Components, NormalizersMatchHf) {
  if (!file_exists(components_path()))
    GTEST_SKIP() << "no goldens/components.json yet: run tools/tokenizer_goldens.py --out DIR on "
                    "the accelerator machine and copy DIR/components.json there";
  for_each_config(
      "normalizers", [](const Json& c) { return make_normalizer(c, "components.json"); },
      [](const Normalizer& n, const Json& c) {
        const std::string text = c.at("text");
        EXPECT_EQ(n.normalize(text), c.at("normalized").get<std::string>()) << "[" << text << "]";
      });
}

TEST(Components, PreTokenizersMatchHf) {
  if (!file_exists(components_path()))
    GTEST_SKIP() << "no goldens/components.json yet: run tools/tokenizer_goldens.py --out DIR on "
                    "the accelerator machine and copy DIR/components.json there";
  for_each_config(
      "pre_tokenizers", [](const Json& c) { return make_pre_tokenizer(c, "components.json"); },
      [](const PreTokenizer& p, const Json& c) {
        const std::string text = c.at("text");
        std::vector<Piece> pieces;  // as the encoder builds them: none for an empty string
        if (!text.empty()) pieces.push_back({text, true});
        p.pre_tokenize(pieces);
        std::vector<std::string> got;
        for (const Piece& piece : pieces) got.push_back(piece.text);
        EXPECT_EQ(got, c.at("pieces").get<std::vector<std::string>>()) << "[" << text << "]";
      });
}

TEST(Components, DecodersMatchHf) {
  if (!file_exists(components_path()))
    GTEST_SKIP() << "no goldens/components.json yet: run tools/tokenizer_goldens.py --out DIR on "
                    "the accelerator machine and copy DIR/components.json there";
  for_each_config(
      "decoders", [](const Json& c) { return make_decoder(c, "components.json"); },
      [](const Decoder& d, const Json& c) {
        auto tokens = c.at("tokens").get<std::vector<std::string>>();
        std::vector<std::string> chain = tokens;
        d.decode_chain(chain);
        std::string joined;
        for (const std::string& t : chain) joined += t;
        EXPECT_EQ(joined, c.at("decoded").get<std::string>()) << Json(tokens).dump();
      });
}

}  // namespace
}  // namespace kvlm::text
