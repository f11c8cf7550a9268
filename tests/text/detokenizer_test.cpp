// Streaming detokenizer: pushing ids one at a time must produce exactly decode(all ids).
#include "kvlm/text/detokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "tokenizer_goldens.h"

namespace kvlm {
namespace {

std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip,
                   std::vector<std::string>* chunks = nullptr) {
  StreamingDetokenizer detok(tok, skip);
  std::string out;
  for (int32_t id : ids) {
    std::string piece = detok.push(id);
    if (chunks) chunks->push_back(piece);
    out += piece;
  }
  std::string rest = detok.finish();
  if (chunks) chunks->push_back(rest);
  return out + rest;
}

TEST(StreamingDetokenizer, EveryGoldenTextStreamsToItsDecoding) {
  auto files = test::load_hf_goldens();
  ASSERT_GE(files.size(), 6u);
  for (const auto& f : files) {
    Tokenizer tok = Tokenizer::from_file(f.tokenizer_path);
    for (const auto& c : f.cases) {
      EXPECT_EQ(stream(tok, c.ids_with_special, false), c.decoded) << f.name << ": " << c.text;
      EXPECT_EQ(stream(tok, c.ids_with_special, true), c.decoded_skip_special)
          << f.name << ": " << c.text;
    }
  }
}

TEST(StreamingDetokenizer, RandomIdSequencesStreamToTheirDecoding) {
  // Arbitrary ids produce broken UTF-8, byte-fallback runs and special tokens in any order.
  std::mt19937 rng(1234);
  for (const char* rel : {"gpt2/tokenizer.json", "llama2/tokenizer.json", "phi3/tokenizer.json",
                          "t5/tokenizer.json", "bert/tokenizer.json"}) {
    Tokenizer tok = Tokenizer::from_file(test::tokenizer_data(rel));
    std::uniform_int_distribution<int32_t> any(0, tok.vocab_size() - 1);
    std::uniform_int_distribution<int32_t> low(0, 300);  // byte tokens and specials
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<int32_t> ids(static_cast<size_t>(1 + trial % 17));
      for (int32_t& id : ids) id = (rng() % 2) ? any(rng) : low(rng);
      for (bool skip : {false, true})
        ASSERT_EQ(stream(tok, ids, skip), tok.decode(ids, skip)) << rel << " trial " << trial;
    }
  }
}

TEST(StreamingDetokenizer, EmitsWordsAsSoonAsTheyAreFinal) {
  Tokenizer tok = Tokenizer::from_file(test::tokenizer_data("gpt2/tokenizer.json"));
  std::vector<std::string> chunks;
  auto ids = tok.encode("Hello world", false);
  ASSERT_EQ(ids.size(), 2u);
  stream(tok, ids, false, &chunks);
  EXPECT_EQ(chunks, (std::vector<std::string>{"Hello", " world", ""}));
}

TEST(StreamingDetokenizer, HoldsBackIncompleteUtf8) {
  // GPT-2 splits the llama emoji into byte-level tokens; nothing is emitted mid-character.
  Tokenizer tok = Tokenizer::from_file(test::tokenizer_data("gpt2/tokenizer.json"));
  auto ids = tok.encode("\xF0\x9F\xA6\x99!", false);
  ASSERT_GT(ids.size(), 2u);
  std::vector<std::string> chunks;
  EXPECT_EQ(stream(tok, ids, false, &chunks), "\xF0\x9F\xA6\x99!");
  for (const std::string& c : chunks) EXPECT_EQ(c.find("\xEF\xBF\xBD"), std::string::npos);
  EXPECT_EQ(chunks.front(), "");
}

TEST(StreamingDetokenizer, HoldsBackOpenByteFallbackRuns) {
  // Llama-2 spells U+1F999 as four <0xXX> tokens; a later byte could still make the run
  // invalid, so the text waits for the first token after the run.
  Tokenizer tok = Tokenizer::from_file(test::tokenizer_data("llama2/tokenizer.json"));
  auto ids = tok.encode("a\xF0\x9F\xA6\x99 b", false);
  std::vector<std::string> chunks;
  EXPECT_EQ(stream(tok, ids, false, &chunks), "a\xF0\x9F\xA6\x99 b");
  size_t byte_tokens = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (tok.id_to_token(ids[i]).rfind("<0x", 0) != 0) continue;
    ++byte_tokens;
    EXPECT_EQ(chunks[i], "") << i;
  }
  EXPECT_EQ(byte_tokens, 4u);
}

TEST(StreamingDetokenizer, SkippedSpecialsDoNotCloseAByteRun) {
  // With specials skipped, <0x41> <s> <0xFF> reaches the decoder as one byte run, which is
  // invalid as a whole: "A" must not be emitted before the run is complete.
  Tokenizer tok = Tokenizer::from_file(test::tokenizer_data("llama2/tokenizer.json"));
  std::vector<int32_t> ids = {*tok.token_to_id("<0x41>"), 1, *tok.token_to_id("<0xFF>")};
  EXPECT_EQ(tok.decode(ids, true), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(stream(tok, ids, true), tok.decode(ids, true));
  EXPECT_EQ(stream(tok, ids, false), tok.decode(ids, false));
}

TEST(StreamingDetokenizer, InvalidBytesStillComeOutAtFinish) {
  Tokenizer tok = Tokenizer::from_file(test::tokenizer_data("llama2/tokenizer.json"));
  std::vector<int32_t> ids = {*tok.token_to_id("<0xE2>")};  // a lone lead byte
  EXPECT_EQ(stream(tok, ids, false), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace kvlm
