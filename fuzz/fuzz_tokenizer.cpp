// libFuzzer target for tokenizer.json: the loader must turn any bytes into either a tokenizer or
// one kvlm::Error. The same input is also encoded by a fixed small tokenizer (added tokens,
// normalizers, a regex pre-tokenizer, byte-fallback BPE), and a tokenizer that did load from the
// fuzzed bytes encodes a short text; every encode is decoded and streamed back.
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "kvlm/base/error.h"
#include "kvlm/base/file.h"
#include "kvlm/text/detokenizer.h"
#include "kvlm/text/tokenizer.h"

namespace {

const char* kFixed = R"json({
  "added_tokens": [
    {"id": 0, "content": "<s>", "special": true, "normalized": false},
    {"id": 1, "content": "</s>", "special": true, "normalized": false, "rstrip": true},
    {"id": 2, "content": "<unk>", "special": true, "normalized": false},
    {"id": 300, "content": "tool", "special": false, "normalized": true, "lstrip": true,
     "single_word": true}],
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "NFKC"}, {"type": "Replace", "pattern": {"Regex": "\\s{3,}"}, "content": "  "},
    {"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"String": " "},
     "content": "\u2581"}]},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|\\p{N}{1,3}| ?\\p{L}+|\\s+(?!\\S)"},
     "behavior": "Isolated", "invert": false},
    {"type": "Digits", "individual_digits": true}]},
  "post_processor": {"type": "TemplateProcessing", "single": [
    {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true,
    "vocab": {VOCAB}, "merges": ["\u2581 t", "h e", "\u2581t he", "o o", "t oo", "l o"]}
})json";

std::string fixed_json() {
  std::string vocab = R"("<s>": 0, "</s>": 1, "<unk>": 2)";
  for (int b = 0; b < 256; ++b) {
    char name[16];
    std::snprintf(name, sizeof name, ", \"<0x%02X>\": %d", b, 3 + b);
    vocab += name;
  }
  const char* pieces[] = {"\u2581", "t", "h", "e", "o", "l", "\u2581t", "he", "\u2581the", "oo",
                          "too", "lo", "a", "s", "1", "2"};
  int id = 259;
  for (const char* p : pieces) vocab += std::string(", \"") + p + "\": " + std::to_string(id++);
  std::string json = kFixed;
  json.replace(json.find("{VOCAB}"), 7, "{" + vocab + "}");
  return json;
}

std::string temp_path(const char* tag) {
  return "/tmp/kvlm_fuzz_tok_" + std::to_string(::getpid()) + tag + ".json";
}

const kvlm::Tokenizer& fixed() {
  static const kvlm::Tokenizer tok = [] {
    std::string path = temp_path("_fixed");
    kvlm::write_file(path, fixed_json());
    kvlm::Tokenizer t = kvlm::Tokenizer::from_file(path);
    ::unlink(path.c_str());
    return t;
  }();
  return tok;
}

void round_trip(const kvlm::Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> ids = tok.encode(text, true);
  for (bool skip : {false, true}) {
    std::string whole = tok.decode(ids, skip);
    kvlm::StreamingDetokenizer detok(tok, skip);
    std::string streamed;
    for (int32_t id : ids) streamed += detok.push(id);
    streamed += detok.finish();
    if (streamed != whole) __builtin_trap();  // the detokenizer's contract
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  round_trip(fixed(), bytes);
  static const std::string path = temp_path("");
  kvlm::write_file(path, bytes);
  try {
    kvlm::Tokenizer tok = kvlm::Tokenizer::from_file(path);
    round_trip(tok, "Hello world! 123 \xC3\xA9\xF0\x9F\xA6\x99 <s>tool</s>");
  } catch (const kvlm::Error&) {
    // Rejected with a message: the expected outcome for most inputs.
  }
  return 0;
}
