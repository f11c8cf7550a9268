#include <gtest/gtest.h>

#include "kvlm/text/reasoning.h"

namespace kvlm {
namespace {

using Split = std::pair<std::string, std::string>;

TEST(Reasoning, ThinkBlockIsSplitFromContent) {
  EXPECT_EQ(split_reasoning("<think>\nLet me see.\n</think>\n\nParis."), Split("Let me see.", "Paris."));
}

TEST(Reasoning, LoneCloseTagMeansThePromptOpenedTheBlock) {
  EXPECT_EQ(split_reasoning("Let me see.\n</think>\n\nParis."), Split("Let me see.", "Paris."));
}

TEST(Reasoning, NoTagsIsAllContent) { EXPECT_EQ(split_reasoning("  Paris. "), Split("", "Paris.")); }

TEST(Reasoning, UnclosedBlockIsAllReasoning) {
  EXPECT_EQ(split_reasoning("<think>still thinking"), Split("still thinking", ""));
}

TEST(Reasoning, EmptyThinkBlock) { EXPECT_EQ(split_reasoning("<think>\n\n</think>\n\nHi"), Split("", "Hi")); }

TEST(Reasoning, TextBeforeTheBlockStaysContent) {
  EXPECT_EQ(split_reasoning("Sure. <think>hmm</think> Done."), Split("hmm", "Sure.  Done."));
}

TEST(Reasoning, StartedInsideWithoutCloseIsAllReasoning) {
  EXPECT_EQ(split_reasoning("thinking, cut off", true), Split("thinking, cut off", ""));
  EXPECT_EQ(split_reasoning("thinking, cut off", false), Split("", "thinking, cut off"));
}

TEST(Reasoning, DetectsPromptsEndingInAnOpenBlock) {
  EXPECT_TRUE(prompt_ends_in_open_think("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_ends_in_open_think("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_ends_in_open_think("<|im_start|>assistant\n"));
  EXPECT_FALSE(prompt_ends_in_open_think("<think> x"));
}

}  // namespace
}  // namespace kvlm
