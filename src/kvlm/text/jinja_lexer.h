#pragma once
// Jinja lexer with the whitespace rules transformers renders chat templates with: trim_blocks
// (drop the newline right after a block or comment tag), lstrip_blocks (drop the spaces and tabs
// before a block or comment tag that starts a line), `-` markers that strip all whitespace on one
// side of a tag, `+` markers that turn lstrip off, and the template's own final newline dropped
// (keep_trailing_newline off).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvlm::jinja {

enum class Tok { kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok kind;
  std::string text;  // data text, name, decoded string literal or operator
  int line = 1;
  int64_t int_value = 0;
  double float_value = 0;
};

// Throws kvlm::Error("template line N: ...") on malformed input.
std::vector<Token> tokenize(std::string_view source);

// The error prefix every template error carries.
std::string line_prefix(int line);

}  // namespace kvlm::jinja
