// kvlm tokenize [MODEL_DIR] TEXT: shows how the model's tokenizer splits a text.
#include <cstdio>
#include <iostream>
#include <iterator>

#include "kvlm/base/error.h"
#include "kvlm/base/json.h"
#include "kvlm/cli/command.h"
#include "kvlm/text/tokenizer.h"

namespace kvlm::cli {
namespace {

constexpr const char* kHelp =
    "Encode TEXT with the model's tokenizer.json and print one line per token: the id and the "
    "vocabulary piece as a JSON string (so spaces and control characters stay visible). "
    "With one positional argument it is the text and the bundled default model is used; a text "
    "of \"-\" is read from stdin. Special tokens (e.g. BOS) are added as the tokenizer's "
    "post-processor says, unless --no-special is given.";

struct Options {
  std::vector<std::string> positional;
  bool no_special = false;
  bool ids_only = false;
};

int run(const Options& o) {
  check(!o.positional.empty() && o.positional.size() <= 2,
        "tokenize: expected [MODEL_DIR] TEXT, got " + std::to_string(o.positional.size()) +
            " arguments");
  std::string dir = o.positional.size() == 2 ? o.positional[0] : default_model_dir();
  std::string text = o.positional.back();
  if (text == "-")
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  Tokenizer tok = Tokenizer::from_model_dir(dir);
  std::vector<int32_t> ids = tok.encode(text, !o.no_special);
  if (o.ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
  } else {
    for (int32_t id : ids) {
      // Pieces can hold bytes that are not UTF-8 on their own; replace rather than fail.
      std::string piece = Json(tok.id_to_token(id)).dump(-1, ' ', false, Json::error_handler_t::replace);
      std::printf("%d\t%s%s\n", id, piece.c_str(), tok.is_special(id) ? "\tspecial" : "");
    }
  }
  std::fprintf(stderr, "%zu tokens, %zu bytes\n", ids.size(), text.size());
  return 0;
}

Runner setup(CLI::App& sub) {
  auto o = std::make_shared<Options>();
  sub.description(kHelp);
  sub.add_option("args", o->positional, "[MODEL_DIR] TEXT")->required()->expected(1, 2);
  sub.add_flag("--no-special", o->no_special, "do not add the post-processor's special tokens");
  sub.add_flag("--ids", o->ids_only, "print only the ids, space-separated on one line");
  return [o] { return run(*o); };
}

const Registration reg{"tokenize", "Show the token ids and pieces of a text", setup};

}  // namespace
}  // namespace kvlm::cli
