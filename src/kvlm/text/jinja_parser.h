#pragma once
// Recursive-descent parser for the Jinja subset chat templates use. Grammar and operator
// precedence follow jinja2's parser, so expressions group the way they do under transformers.
#include <string_view>

#include "kvlm/text/jinja_ast.h"

namespace kvlm::jinja {

// Parses a whole template. Throws kvlm::Error("template line N: ...") for syntax errors and for
// statements outside the supported subset (include, extends, import, ...).
Body parse_template(std::string_view source);

}  // namespace kvlm::jinja
