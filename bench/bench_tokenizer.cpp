// Tokenizer encode throughput (MB/s of UTF-8 input) on about 1 MB of mixed text, for a byte-level
// BPE (GPT-2: regex pre-tokenizer, many short words, word cache) and a Metaspace BPE (Llama 2:
// no pre-tokenizer, so the whole input is one long word merged by the priority queue).
#include <benchmark/benchmark.h>

#include <random>

#include "kvlm/base/file.h"
#include "kvlm/text/detokenizer.h"
#include "kvlm/text/tokenizer.h"

namespace {

// ~1 MB: the multilingual golden inputs and the tricky llama.cpp inputs, interleaved in a
// shuffled order so that the text does not simply repeat one paragraph.
const std::string& corpus() {
  static const std::string text = [] {
    std::string base = std::string(KVLM_TEST_DATA) + "/tokenizers/";
    std::vector<std::string> parts = {
        kvlm::read_file(base + "SOURCES.md"),
        kvlm::read_file(base + "llama.cpp-goldens/ggml-vocab-gpt-2.gguf.inp"),
        kvlm::read_file(base + "swift-transformers-goldens/inputs.json")};
    std::vector<std::string> lines;
    for (const std::string& p : parts)
      for (size_t pos = 0, nl; pos < p.size(); pos = nl + 1) {
        nl = p.find('\n', pos);
        if (nl == std::string::npos) nl = p.size();
        lines.push_back(p.substr(pos, nl - pos + 1));
      }
    std::mt19937 rng(7);
    std::string out;
    while (out.size() < (1u << 20)) {
      std::shuffle(lines.begin(), lines.end(), rng);
      for (const std::string& l : lines) out += l;
    }
    out.resize(1u << 20);
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
    return out;
  }();
  return text;
}

void encode_bench(benchmark::State& state, const char* rel) {
  kvlm::Tokenizer tok =
      kvlm::Tokenizer::from_file(std::string(KVLM_TEST_DATA) + "/tokenizers/" + rel);
  const std::string& text = corpus();
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = tok.encode(text, false);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}

void stream_bench(benchmark::State& state, const char* rel) {
  kvlm::Tokenizer tok =
      kvlm::Tokenizer::from_file(std::string(KVLM_TEST_DATA) + "/tokenizers/" + rel);
  auto ids = tok.encode(corpus().substr(0, 64 << 10), false);
  for (auto _ : state) {
    kvlm::StreamingDetokenizer detok(tok, false);
    size_t n = 0;
    for (int32_t id : ids) n += detok.push(id).size();
    n += detok.finish().size();
    benchmark::DoNotOptimize(n);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ids.size()));
}

BENCHMARK_CAPTURE(encode_bench, gpt2_byte_level, "gpt2/tokenizer.json")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode_bench, llama2_metaspace, "llama2/tokenizer.json")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(stream_bench, gpt2_byte_level, "gpt2/tokenizer.json")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(stream_bench, llama2_metaspace, "llama2/tokenizer.json")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
