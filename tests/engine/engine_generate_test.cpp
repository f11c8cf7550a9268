// The engine running one request reproduces the single-sequence generate() path token for token.
#include <gtest/gtest.h>

#include "engine_test_util.h"
#include "kvlm/engine/generate.h"

namespace kvlm {
namespace {

constexpr int64_t kPoolBytes = 4 << 20;

TEST(EngineSolo, MatchesGenerate) {
  auto model = test::load_fixture("llama_untied_bias", kPoolBytes);
  const auto pool = test::request_pool();
  for (size_t i : {0u, 1u, 3u, 7u}) {
    const GenerationRequest& r = pool[i];
    GenerateOptions g;
    g.sampler = r.sampling;
    g.max_tokens = r.max_tokens;
    const test::Outcome solo = test::run_solo(model, r);
    if (r.ignore_eos) continue;  // generate() has no ignore_eos
    const GenerationResult ref = generate(*model, *test::bundled_tokenizer(), r.prompt, g);
    EXPECT_EQ(solo.tokens, ref.tokens) << i;
    EXPECT_EQ(solo.text, ref.text) << i;
    // Both enums spell their reasons the OpenAI way.
    EXPECT_STREQ(finish_reason_name(solo.reason), finish_reason_name(ref.finish)) << i;
  }
}

}  // namespace
}  // namespace kvlm
