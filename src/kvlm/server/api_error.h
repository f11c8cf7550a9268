#pragma once
// ApiError: a request the server refuses. Protocol code throws it with the HTTP status and the
// OpenAI error fields; the HTTP layer turns it into the error body of the endpoint's protocol
// (OpenAI for /v1/chat/completions and /v1/completions, Anthropic for /v1/messages).
#include <stdexcept>
#include <string>

#include "kvlm/base/json.h"

namespace kvlm::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type, std::string param = "",
           std::string code = "")
      : std::runtime_error(std::move(message)),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }  // the request field at fault, or ""
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string type_, param_, code_;
};

// 400 invalid_request_error naming `param`.
ApiError invalid_request(std::string message, std::string param = "", std::string code = "");

// {"error": {"message", "type", "param", "code"}}; empty param/code become null (OpenAI's shape).
Json openai_error_body(const ApiError& e);
// {"type": "error", "error": {"type", "message"}} (Anthropic's shape).
Json anthropic_error_body(const ApiError& e);

}  // namespace kvlm::server
