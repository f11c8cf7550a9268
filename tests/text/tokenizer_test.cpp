// Tokenizer parity tests: ids and decoded text must equal Hugging Face's, byte for byte.
#include "kvlm/text/tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <sstream>

#include "kvlm/base/error.h"
#include "kvlm/base/file.h"
#include "kvlm/base/json.h"
#include "kvlm/text/components.h"
#include "kvlm/text/regex.h"
#include "tokenizer_goldens.h"

namespace kvlm {
namespace {

using test::tokenizer_data;

const Tokenizer& cached(const std::string& rel) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(rel);
  if (it == cache.end()) it = cache.emplace(rel, Tokenizer::from_file(tokenizer_data(rel))).first;
  return it->second;
}

std::string show(const std::vector<int32_t>& ids) {
  std::ostringstream s;
  for (int32_t id : ids) s << ' ' << id;
  return s.str();
}

// ---- llama.cpp goldens: HF encode(text, add_special_tokens=False) for 46 tricky inputs ----

std::vector<std::string> read_llama_cpp_inputs(const std::string& path) {
  std::string all = read_file(path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  size_t pos = 0;
  for (size_t next; (next = all.find(sep, pos)) != std::string::npos; pos = next + sep.size())
    inputs.push_back(all.substr(pos, next - pos));
  return inputs;
}

std::vector<std::vector<int32_t>> read_llama_cpp_outputs(const std::string& path) {
  std::istringstream in(read_file(path));
  std::vector<std::vector<int32_t>> outs;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (int32_t id; ls >> id;) ids.push_back(id);
    outs.push_back(ids);
  }
  return outs;
}

struct LlamaCppCase {
  const char* golden;
  const char* tokenizer;
};

class LlamaCppGoldens : public ::testing::TestWithParam<LlamaCppCase> {};

TEST_P(LlamaCppGoldens, EncodeMatchesEveryInput) {
  const auto& p = GetParam();
  const Tokenizer& tok = cached(p.tokenizer);
  std::string base = tokenizer_data(std::string("llama.cpp-goldens/ggml-vocab-") + p.golden);
  auto inputs = read_llama_cpp_inputs(base + ".gguf.inp");
  auto outputs = read_llama_cpp_outputs(base + ".gguf.out");
  ASSERT_EQ(inputs.size(), 46u);
  ASSERT_EQ(outputs.size(), inputs.size());
  int passed = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto ids = tok.encode(inputs[i], false);
    EXPECT_EQ(show(ids), show(outputs[i])) << "input " << i << ": [" << inputs[i] << "]";
    passed += ids == outputs[i];
  }
  RecordProperty("passed", passed);
}

INSTANTIATE_TEST_SUITE_P(Families, LlamaCppGoldens,
                         ::testing::Values(LlamaCppCase{"gpt-2", "gpt2/tokenizer.json"},
                                           LlamaCppCase{"llama-spm", "llama2/tokenizer.json"},
                                           LlamaCppCase{"phi-3", "phi3/tokenizer.json"},
                                           LlamaCppCase{"bert-bge", "bert/tokenizer.json"}),
                         [](const auto& info) {
                           std::string n = info.param.golden;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// ---- swift-transformers goldens: transformers 4.57 ids with special tokens and decodes ----

struct SwiftCase {
  const char* golden;
  const char* tokenizer;
  // transformers' decode also runs clean_up_tokenization_spaces when the model's
  // tokenizer_config.json asks for it (t5); `tokenizers` itself never does.
  bool transformers_cleanup;
};

std::string transformers_cleanup(std::string s) {
  for (auto [from, to] : {std::pair{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","},
                          {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"},
                          {" 've", "'ve"}, {" 're", "'re"}}) {
    std::string f = from, t = to;
    for (size_t pos = s.find(f); pos != std::string::npos; pos = s.find(f, pos + t.size()))
      s.replace(pos, f.size(), t);
  }
  return s;
}

class SwiftGoldens : public ::testing::TestWithParam<SwiftCase> {};

TEST_P(SwiftGoldens, EncodeAndDecodeMatchEveryInput) {
  const auto& p = GetParam();
  const Tokenizer& tok = cached(p.tokenizer);
  Json inputs = read_json_file(tokenizer_data("swift-transformers-goldens/inputs.json"));
  Json golden = read_json_file(
      tokenizer_data(std::string("swift-transformers-goldens/") + p.golden + "_multilingual.json"));
  std::map<std::string, std::string> text_by_id;
  for (const Json& in : inputs) text_by_id[in.at("id")] = in.at("text");
  const Json& entries = golden.at("entries");
  ASSERT_EQ(entries.size(), 83u);
  for (const Json& e : entries) {
    const std::string& text = text_by_id.at(e.at("id").get<std::string>());
    auto want = e.at("input_ids").get<std::vector<int32_t>>();
    auto ids = tok.encode(text, true);
    EXPECT_EQ(show(ids), show(want)) << e.at("id") << ": [" << text << "]";
    auto decode = [&](bool skip) {
      std::string d = tok.decode(want, skip);
      return p.transformers_cleanup ? transformers_cleanup(d) : d;
    };
    EXPECT_EQ(decode(false), e.at("decoded_with_special").get<std::string>()) << e.at("id");
    EXPECT_EQ(decode(true), e.at("decoded_skip_special").get<std::string>()) << e.at("id");
  }
}

INSTANTIATE_TEST_SUITE_P(Families, SwiftGoldens,
                         ::testing::Values(SwiftCase{"gpt2", "gpt2/tokenizer.json", false},
                                           SwiftCase{"tinyllama", "llama2/tokenizer.json", false},
                                           SwiftCase{"t5_small", "t5/tokenizer.json", true},
                                           SwiftCase{"bge_small", "bert/tokenizer.json", true}),
                         [](const auto& info) { return std::string(info.param.golden); });

// ---- HF `tokenizers` goldens from tools/tokenizer_goldens.py ----

TEST(HfGoldens, EveryTokenizerMatchesTheOracle) {
  auto files = test::load_hf_goldens();
  ASSERT_GE(files.size(), 6u) << "run tools/tokenizer_goldens.py to produce goldens/";
  for (const auto& f : files) {
    Tokenizer tok = Tokenizer::from_file(f.tokenizer_path);
    int passed = 0;
    for (const auto& c : f.cases) {
      auto ids = tok.encode(c.text, false);
      auto ids_special = tok.encode(c.text, true);
      std::string decoded = tok.decode(c.ids_with_special, false);
      std::string decoded_skip = tok.decode(c.ids_with_special, true);
      EXPECT_EQ(show(ids), show(c.ids)) << f.name << ": [" << c.text << "]";
      EXPECT_EQ(show(ids_special), show(c.ids_with_special)) << f.name << ": [" << c.text << "]";
      EXPECT_EQ(decoded, c.decoded) << f.name << ": [" << c.text << "]";
      EXPECT_EQ(decoded_skip, c.decoded_skip_special) << f.name << ": [" << c.text << "]";
      passed += ids == c.ids && ids_special == c.ids_with_special && decoded == c.decoded &&
                decoded_skip == c.decoded_skip_special;
    }
    std::printf("[ goldens  ] %-8s %d/%zu cases match\n", f.name.c_str(), passed, f.cases.size());
  }
}

// ---- the public API beyond encode/decode ----

TEST(Tokenizer, VocabularyLookups) {
  const Tokenizer& gpt2 = cached("gpt2/tokenizer.json");
  EXPECT_EQ(gpt2.vocab_size(), 50257);
  EXPECT_EQ(gpt2.token_to_id("<|endoftext|>"), 50256);
  EXPECT_EQ(gpt2.token_to_id("Ġthe"), 262);
  EXPECT_EQ(gpt2.token_to_id("no such token"), std::nullopt);
  EXPECT_EQ(gpt2.id_to_token(262), "Ġthe");
  EXPECT_EQ(gpt2.id_to_token(-1), "");
  EXPECT_EQ(gpt2.id_to_token(50257), "");
  EXPECT_TRUE(gpt2.is_special(50256));
  EXPECT_FALSE(gpt2.is_special(262));

  const Tokenizer& phi3 = cached("phi3/tokenizer.json");
  EXPECT_EQ(phi3.vocab_size(), 32011);  // 32000 pieces + added tokens up to id 32010
  EXPECT_EQ(phi3.id_to_token(13), "<0x0A>");
  EXPECT_EQ(phi3.token_to_id("<|assistant|>"), 32001);
}

TEST(Tokenizer, CopiesShareState) {
  Tokenizer a = cached("gpt2/tokenizer.json");
  Tokenizer b = a;
  EXPECT_EQ(a.encode("shared state", false), b.encode("shared state", false));
}

TEST(Tokenizer, InvalidUtf8IsReadLossily) {
  const Tokenizer& gpt2 = cached("gpt2/tokenizer.json");
  // A lone continuation byte reads as U+FFFD, so it encodes like the replacement character.
  EXPECT_EQ(gpt2.encode("a\x80z", false), gpt2.encode("a\xEF\xBF\xBDz", false));
}

TEST(Tokenizer, FromModelDirReadsSpecialTokensFromConfig) {
  Tokenizer tok = Tokenizer::from_model_dir(tokenizer_data("phi3"));
  EXPECT_EQ(tok.bos_token_id(), 1);
  EXPECT_EQ(tok.eos_token_id(), 32000);
  EXPECT_THROW(Tokenizer::from_model_dir(tokenizer_data("no-such-dir")), Error);
}

TEST(Tokenizer, EncodesLongTextQuickly) {
  // 100 KB through both BPE flavours; a quadratic merge loop would take seconds.
  std::string text;
  while (text.size() < 100000) text += "The quick brown fox, 12345 times; ünïcödé 数据 🚀!\n";
  for (const char* rel : {"gpt2/tokenizer.json", "llama2/tokenizer.json"}) {
    const Tokenizer& tok = cached(rel);
    auto start = std::chrono::steady_clock::now();
    auto ids = tok.encode(text, false);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count();
    EXPECT_GT(ids.size(), 10000u);
    EXPECT_LT(ms, 1000.0) << rel;
    EXPECT_EQ(tok.decode(ids, false), text) << rel;
  }
}

TEST(Gpt2Split, MatchesTheRegexOnRandomText) {
  // The hand-written scanner against Oniguruma running GPT-2's pattern, on random strings drawn
  // from characters of every class the pattern distinguishes.
  const std::vector<std::string> alphabet = {
      " ", " ", "  ", "\t", "\n", "\r", "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\xA8", "a",
      "Z", "s", "t", "r", "e", "v", "l", "m", "d", "'", "'", "\xC3\xA9", "\xE6\x97\xA5",
      "\xD7\x90", "0", "7", "\xD9\xA3", "\xC2\xBD", "\xE2\x85\xA0", "!", ".", "-", "_",
      "\xF0\x9F\xA6\x99", "\xCC\x81", "\xE2\x80\x8B", "\x00", "\xEF\xBF\xBD"};
  text::Regex regex(text::kGpt2Pattern, "gpt2");
  std::mt19937 rng(99);
  for (int trial = 0; trial < 20000; ++trial) {
    std::string text;
    for (int k = static_cast<int>(rng() % 24); k > 0; --k) text += alphabet[rng() % alphabet.size()];
    auto expected = regex.find_all(text);
    ASSERT_EQ(text::gpt2_split(text), expected) << "[" << text << "]";
  }
}

}  // namespace
}  // namespace kvlm
