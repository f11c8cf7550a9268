// Bad tokenizer.json input: each problem gives one kvlm::Error whose message names the file and
// the offending part, never a crash.
#include <gtest/gtest.h>

#include <filesystem>

#include "kvlm/base/error.h"
#include "kvlm/base/file.h"
#include "kvlm/text/tokenizer.h"

namespace kvlm {
namespace {

class TokenizerErrors : public ::testing::Test {
 protected:
  std::string path_ =
      (std::filesystem::temp_directory_path() / ("kvlm_tok_" + std::to_string(::getpid()) + ".json"))
          .string();
  void TearDown() override { std::filesystem::remove(path_); }

  // Loads `json` from a file and returns the error message ("" when it loads).
  std::string load_error(const std::string& json) {
    write_file(path_, json);
    try {
      Tokenizer::from_file(path_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  // A tiny valid BPE tokenizer.json with one component replaced.
  static std::string with(const std::string& key, const std::string& value) {
    std::string model = R"({"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]})";
    std::string normalizer = "null", pre = "null", post = "null", decoder = "null";
    if (key == "model") model = value;
    if (key == "normalizer") normalizer = value;
    if (key == "pre_tokenizer") pre = value;
    if (key == "post_processor") post = value;
    if (key == "decoder") decoder = value;
    return R"({"added_tokens":[],"normalizer":)" + normalizer + R"(,"pre_tokenizer":)" + pre +
           R"(,"post_processor":)" + post + R"(,"decoder":)" + decoder + R"(,"model":)" + model +
           "}";
  }
};

TEST_F(TokenizerErrors, TheMiniatureTokenizerLoads) {
  EXPECT_EQ(load_error(with("", "")), "");
  Tokenizer tok = Tokenizer::from_file(path_);
  EXPECT_EQ(tok.encode("abab", false), (std::vector<int32_t>{2, 2}));
}

TEST_F(TokenizerErrors, AddedTokensFieldIsOptional) {
  // Found by fuzz_tokenizer: a file without "added_tokens" used to crash on encode.
  std::string json = with("", "");
  json.erase(json.find(R"("added_tokens":[],)"), 18);
  EXPECT_EQ(load_error(json), "");
  EXPECT_EQ(Tokenizer::from_file(path_).encode("ab", false), (std::vector<int32_t>{2}));
}

TEST_F(TokenizerErrors, MissingFile) {
  EXPECT_THROW(Tokenizer::from_file(path_ + ".missing"), Error);
}

TEST_F(TokenizerErrors, MalformedJsonNamesFileAndByte) {
  std::string msg = load_error(R"({"model": {"type": "BPE",, }})");
  EXPECT_EQ(msg.rfind(path_ + ": invalid JSON at byte 26", 0), 0u) << msg;
}

TEST_F(TokenizerErrors, NotAnObject) {
  EXPECT_EQ(load_error("[1, 2]"), path_ + ": a tokenizer.json must be a JSON object");
}

TEST_F(TokenizerErrors, MissingModel) {
  EXPECT_EQ(load_error(R"({"normalizer": null})"), path_ + ": missing required field 'model'");
}

TEST_F(TokenizerErrors, UnknownModelType) {
  EXPECT_EQ(load_error(with("model", R"({"type":"Sentencepiece2","vocab":{}})")),
            path_ + ": unknown model type 'Sentencepiece2'");
}

TEST_F(TokenizerErrors, UntypedModelWithUnknownFields) {
  EXPECT_EQ(load_error(with("model", R"({"pieces":[]})")),
            path_ + ": model has no 'type' and its fields match no known model");
}

TEST_F(TokenizerErrors, UnknownNormalizerType) {
  EXPECT_EQ(load_error(with("normalizer", R"({"type":"Uppercase"})")),
            path_ + ": unknown normalizer type 'Uppercase'");
}

TEST_F(TokenizerErrors, UnknownNormalizerInsideASequence) {
  EXPECT_EQ(load_error(with("normalizer",
                            R"({"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"Zap"}]})")),
            path_ + ": unknown normalizer type 'Zap'");
}

TEST_F(TokenizerErrors, UnknownPreTokenizerType) {
  EXPECT_EQ(load_error(with("pre_tokenizer", R"({"type":"UnicodeScripts2"})")),
            path_ + ": unknown pre_tokenizer type 'UnicodeScripts2'");
}

TEST_F(TokenizerErrors, UnknownDecoderType) {
  EXPECT_EQ(load_error(with("decoder", R"({"type":"CTC2"})")),
            path_ + ": unknown decoder type 'CTC2'");
}

TEST_F(TokenizerErrors, UnknownPostProcessorType) {
  EXPECT_EQ(load_error(with("post_processor", R"({"type":"Wrapper"})")),
            path_ + ": unknown post_processor type 'Wrapper'");
}

TEST_F(TokenizerErrors, ComponentWithoutType) {
  EXPECT_EQ(load_error(with("decoder", R"({"prefix":"##"})")),
            path_ + ": decoder: missing required field 'type'");
}

TEST_F(TokenizerErrors, InvalidRegex) {
  EXPECT_EQ(load_error(with("pre_tokenizer",
                            R"({"type":"Split","pattern":{"Regex":"(a"},"behavior":"Isolated"})"))
                .rfind(path_ + ": pre_tokenizer Split: invalid regex '(a': ", 0),
            0u);
}

TEST_F(TokenizerErrors, UnknownSplitBehavior) {
  EXPECT_EQ(load_error(with("pre_tokenizer",
                            R"({"type":"Split","pattern":{"String":" "},"behavior":"Sideways"})")),
            path_ + ": pre_tokenizer Split: unknown split behavior 'Sideways'");
}

TEST_F(TokenizerErrors, MergeOutsideTheVocab) {
  EXPECT_EQ(load_error(with("model", R"({"type":"BPE","vocab":{"a":0,"b":1},"merges":["a b"]})")),
            path_ + ": model BPE: merge 0 (\"a b\") uses a token that is not in the vocab");
}

TEST_F(TokenizerErrors, MalformedMerge) {
  EXPECT_EQ(load_error(with("model", R"({"type":"BPE","vocab":{"a":0},"merges":["a b c"]})")),
            path_ + ": model BPE: merge 0 is not two tokens: \"a b c\"");
}

TEST_F(TokenizerErrors, VocabWithWrongType) {
  EXPECT_EQ(load_error(with("model", R"({"type":"BPE","vocab":[1,2],"merges":[]})")),
            path_ + ": model BPE: field 'vocab' must be an object of token -> id");
}

TEST_F(TokenizerErrors, NegativeVocabId) {
  EXPECT_EQ(load_error(with("model", R"({"type":"BPE","vocab":{"a":-3},"merges":[]})")),
            path_ + ": model BPE: vocab id of 'a' is not a valid id (-3)");
}

TEST_F(TokenizerErrors, UnknownUnkToken) {
  EXPECT_EQ(load_error(with("model", R"({"type":"WordPiece","vocab":{"a":0},"unk_token":"[X]"})")),
            path_ + ": model WordPiece: unk_token '[X]' is not in the vocab");
}

TEST_F(TokenizerErrors, UnigramEntryNotAPair) {
  EXPECT_EQ(load_error(with("model", R"({"type":"Unigram","vocab":[["a",-1.0],["b"]]})")),
            path_ + ": model Unigram: Unigram vocab entry 1 is not [piece, score]: [\"b\"]");
}

TEST_F(TokenizerErrors, TemplateWithUnknownSpecialToken) {
  EXPECT_EQ(load_error(with("post_processor",
                            R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>"}},)"
                            R"({"Sequence":{"id":"A"}}],"special_tokens":{}})")),
            path_ + ": post_processor TemplateProcessing: special token '<s>' is missing from "
                    "special_tokens");
}

TEST_F(TokenizerErrors, AddedTokenWithoutId) {
  std::string json = with("", "");
  json.replace(json.find(R"("added_tokens":[])"), 17, R"("added_tokens":[{"content":"<x>"}])");
  EXPECT_EQ(load_error(json), path_ + ": added_tokens: missing required field 'id'");
}

TEST_F(TokenizerErrors, BadPrecompiledCharsmap) {
  EXPECT_EQ(load_error(with("normalizer", R"({"type":"Precompiled","precompiled_charsmap":"!!"})")),
            path_ + ": normalizer Precompiled: precompiled_charsmap is not valid base64");
}

}  // namespace
}  // namespace kvlm
