#pragma once
// Reasoning ("thinking") text that models put between <think> and </think>.
#include <string>
#include <string_view>
#include <utility>

namespace kvlm {

// Returns {reasoning, content}. Handles "<think>R</think>C" and also a lone "R</think>C", which
// is what a model emits when the prompt already opened <think> (Qwen3, DeepSeek-R1 templates).
// An unclosed "<think>R" is all reasoning. Whitespace around both parts is trimmed.
std::pair<std::string, std::string> split_reasoning(std::string_view text);

// Like split_reasoning, but `started_inside` says that the prompt ended inside an open <think>,
// so text before any </think> is reasoning even when the model never closes it.
std::pair<std::string, std::string> split_reasoning(std::string_view text, bool started_inside);

// True when a rendered prompt ends in an open <think> (ignoring trailing whitespace), so the
// model's output starts inside the reasoning block.
bool prompt_ends_in_open_think(std::string_view prompt);

}  // namespace kvlm
