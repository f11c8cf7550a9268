#include "kvlm/server/api_error.h"

namespace kvlm::server {

ApiError invalid_request(std::string message, std::string param, std::string code) {
  return ApiError(400, std::move(message), "invalid_request_error", std::move(param),
                  std::move(code));
}

namespace {
Json null_if_empty(const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); }
}  // namespace

Json openai_error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.what()},
            {"type", e.type()},
            {"param", null_if_empty(e.param())},
            {"code", null_if_empty(e.code())}}}};
}

Json anthropic_error_body(const ApiError& e) {
  // Anthropic names error types by what went wrong; the OpenAI type names map onto them.
  std::string type = e.type();
  if (e.status() == 404) type = "not_found_error";
  else if (e.status() == 401) type = "authentication_error";
  else if (e.status() == 503) type = "overloaded_error";
  else if (e.status() >= 500) type = "api_error";
  else if (e.status() == 413) type = "request_too_large";
  else type = "invalid_request_error";
  return {{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}};
}

}  // namespace kvlm::server
