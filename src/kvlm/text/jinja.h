#pragma once
// A Jinja template engine for chat templates: parse once, render many times. Rendering follows
// jinja2 as transformers configures it (see chat_template.h); anything outside the supported
// subset fails with "template line N: ..." naming the construct.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvlm/text/jinja_value.h"

namespace kvlm::jinja {

// Bounds that keep a hostile template from hanging or exhausting memory.
struct Limits {
  size_t max_output = size_t(64) << 20;  // bytes of rendered output, and of any built string
  int max_depth = 400;                   // nested evaluation (macro recursion included)
  uint64_t max_steps = 20'000'000;       // statements, loop iterations and expressions
  int64_t max_range = 1'000'000;         // elements range() may produce
};

struct Stmt;

class Template {
 public:
  // Throws kvlm::Error("template line N: ...") on syntax errors.
  explicit Template(std::string_view source);
  ~Template();

  // Renders with `vars` as the template's variables (plus the builtin globals). Throws
  // kvlm::Error: "template line N: message" for render errors, or the message of the
  // template's own raise_exception(...) unchanged.
  std::string render(const std::vector<std::pair<std::string, Value>>& vars,
                     const Limits& limits = {}) const;

 private:
  std::vector<std::unique_ptr<Stmt>> body_;
};

}  // namespace kvlm::jinja
