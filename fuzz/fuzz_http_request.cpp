// Fuzzes the HTTP request-body parsers and validators (OpenAI chat and text completions,
// Anthropic messages) and the output splitter that reads model text. Any input must end in a
// parsed request or an ApiError/kvlm::Error, never a crash or another exception type.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvlm/base/error.h"
#include "kvlm/server/anthropic.h"
#include "kvlm/server/api_error.h"
#include "kvlm/server/openai_request.h"
#include "kvlm/server/openai_response.h"
#include "kvlm/server/output.h"

namespace {

using namespace kvlm::server;

template <typename F>
void refused_or_parsed(F&& parse) {
  try {
    parse();
  } catch (const ApiError& e) {
    // Every refusal is a client error with a message and a JSON body that serializes.
    if (e.status() < 400 || e.status() >= 500 || std::string_view(e.what()).empty()) __builtin_trap();
    (void)dump_json(openai_error_body(e));
    (void)dump_json(anthropic_error_body(e));
  } catch (const kvlm::Error&) {
  }
}

// Model output split at every byte boundary the input picks: deltas must concatenate to a
// prefix-consistent whole and serialize as chunks.
void split_output(std::string_view text) {
  OutputSplitter splitter(true, true, !text.empty() && text[0] == '!');
  std::string content;
  for (size_t i = 0; i < text.size(); i += 1 + (uint8_t(text[i]) % 7)) {
    const OutputDelta d = splitter.push(text.substr(i, 1 + (uint8_t(text[i]) % 7)));
    content += d.content;
    (void)dump_json(chat_text_delta_json(d));
  }
  content += splitter.finish().content;
  (void)dump_json(tool_calls_json(splitter.tool_calls(), true));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  refused_or_parsed([&] {
    const RequestJson body = parse_request_body(bytes);
    refused_or_parsed([&] { parse_chat_request(body, builtin_defaults()); });
    refused_or_parsed([&] { parse_completion_request(body, builtin_defaults()); });
    refused_or_parsed([&] { parse_anthropic_request(body, builtin_defaults()); });
  });
  split_output(bytes);
  return 0;
}
