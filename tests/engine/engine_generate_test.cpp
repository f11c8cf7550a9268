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
  for (size_t i : {1u, 2u, 4u, 7u}) {  // requests that do not ignore EOS
    const GenerationRequest& r = pool[i];
    GenerateOptions g;
    g.sampler = r.sampling;
    g.max_tokens = r.max_tokens;
    ASSERT_FALSE(r.ignore_eos);  // generate() has no such option
    const test::Outcome solo = test::run_solo(model, r);
    const GenerationResult ref = generate(*model, *test::bundled_tokenizer(), r.prompt, g);
    EXPECT_EQ(solo.tokens, ref.tokens) << i;
    EXPECT_EQ(solo.text, ref.text) << i;
    EXPECT_EQ(solo.reason, ref.finish) << i;
  }
}

}  // namespace
}  // namespace kvlm
