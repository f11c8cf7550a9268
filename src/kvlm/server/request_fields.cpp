#include "kvlm/server/request_fields.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>

#include "kvlm/server/api_error.h"

namespace kvlm::server {

namespace {
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
}  // namespace

const RequestJson* FieldReader::get(const char* key) const {
  if (!obj_.is_object()) return nullptr;
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool FieldReader::has(const char* key) const { return get(key) != nullptr; }

std::optional<bool> FieldReader::boolean(const char* key, const std::string& message) const {
  const RequestJson* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw invalid_request(message, key);
  return v->get<bool>();
}

std::optional<double> FieldReader::number(const char* key, const std::string& message) const {
  const RequestJson* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw invalid_request(message, key);
  const double d = v->get<double>();
  if (!std::isfinite(d)) throw invalid_request(message, key);
  return d;
}

std::optional<double> FieldReader::number_in(const char* key, double lo, double hi,
                                             const std::string& message) const {
  auto d = number(key, message);
  if (d && (*d < lo || *d > hi)) throw invalid_request(message, key);
  return d;
}

std::optional<int64_t> FieldReader::integer_in(const char* key, int64_t lo, int64_t hi,
                                               const std::string& message) const {
  const RequestJson* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) throw invalid_request(message, key);
  int64_t i;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int64_t>::max())) throw invalid_request(message, key);
    i = int64_t(u);
  } else {
    i = v->get<int64_t>();
  }
  if (i < lo || i > hi) throw invalid_request(message, key);
  return i;
}

std::optional<std::string> FieldReader::string(const char* key, const std::string& message) const {
  const RequestJson* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw invalid_request(message, key);
  return v->get<std::string>();
}

SamplingDefaults merge_defaults(const SamplingDefaults& high, const SamplingDefaults& low) {
  SamplingDefaults out;
  out.temperature = high.temperature ? high.temperature : low.temperature;
  out.top_p = high.top_p ? high.top_p : low.top_p;
  out.min_p = high.min_p ? high.min_p : low.min_p;
  out.repetition_penalty = high.repetition_penalty ? high.repetition_penalty : low.repetition_penalty;
  out.top_k = high.top_k ? high.top_k : low.top_k;
  out.max_tokens = high.max_tokens ? high.max_tokens : low.max_tokens;
  out.seed = high.seed ? high.seed : low.seed;
  return out;
}

SamplingDefaults builtin_defaults() {
  SamplingDefaults d;
  d.temperature = 0.0f;
  d.top_p = 1.0f;
  d.top_k = 0;
  d.min_p = 0.0f;
  d.repetition_penalty = 0.0f;
  return d;
}

SamplingDefaults generation_config_defaults(const Json& gen, const std::string& origin) {
  SamplingDefaults d;
  if (!gen.is_object()) return d;
  if (auto n = json_get_or<int64_t>(gen, "max_new_tokens", 0, origin); n > 0)
    d.max_tokens = int32_t(std::min<int64_t>(n, kInt32Max));
  if (!gen.contains("do_sample") || gen.at("do_sample").is_null()) return d;
  if (!json_get<bool>(gen, "do_sample", origin)) {
    d.temperature = 0.0f;
    return d;
  }
  d.temperature = json_get_or<float>(gen, "temperature", 1.0f, origin);
  if (gen.contains("top_p")) d.top_p = json_get_or<float>(gen, "top_p", 1.0f, origin);
  if (gen.contains("top_k")) d.top_k = json_get_or<int>(gen, "top_k", 0, origin);
  if (gen.contains("min_p")) d.min_p = json_get_or<float>(gen, "min_p", 0.0f, origin);
  if (gen.contains("repetition_penalty"))
    d.repetition_penalty = json_get_or<float>(gen, "repetition_penalty", 0.0f, origin);
  return d;
}

uint64_t next_default_seed() {
  static std::atomic<uint64_t> weyl{0};
  const uint64_t step = weyl.fetch_add(0x9e3779b97f4a7c15ull) + 0x9e3779b97f4a7c15ull;
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const uint64_t ms = uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
  return ms ^ step;
}

std::vector<std::string> parse_stop(const RequestJson& body, const char* key) {
  std::vector<std::string> out;
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return out;
  const std::string message = std::string(key) + " must be a string or a list of strings";
  auto add = [&](const RequestJson& s) {
    if (!s.is_string()) throw invalid_request(message, key);
    if (!s.get_ref<const std::string&>().empty()) out.push_back(s.get<std::string>());
  };
  if (it->is_array()) {
    for (const RequestJson& s : *it) add(s);
  } else {
    add(*it);
  }
  return out;
}

namespace {

// logit_bias: {"<token id>": bias}. Keys are JSON strings, so they must spell an integer.
std::map<int32_t, float> parse_logit_bias(const RequestJson& body) {
  std::map<int32_t, float> out;
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return out;
  const char* message = "logit_bias must be a dict of int to float";
  if (!it->is_object()) throw invalid_request(message, "logit_bias");
  for (const auto& [key, value] : it->items()) {
    size_t used = 0;
    long long id = 0;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      throw invalid_request(message, "logit_bias");
    }
    if (used != key.size() || id < 0 || id > kInt32Max || !value.is_number())
      throw invalid_request(message, "logit_bias");
    const double bias = value.get<double>();
    if (!std::isfinite(bias)) throw invalid_request(message, "logit_bias");
    out[int32_t(id)] = float(bias);
  }
  return out;
}

void parse_logprobs(const FieldReader& f, GenerationSettings& s) {
  s.logprobs = f.boolean("logprobs", "logprobs must be of type bool").value_or(false);
  if (!f.has("top_logprobs")) return;
  auto top = f.integer_in("top_logprobs", std::numeric_limits<int64_t>::min(),
                          std::numeric_limits<int64_t>::max(), "top_logprobs must be of type int");
  // -1 is mlx_lm.server's "not requested".
  if (*top == -1) return;
  if (*top < 0) throw invalid_request("top_logprobs must be at least 0", "top_logprobs");
  if (*top > 11) throw invalid_request("top_logprobs must be at most 11", "top_logprobs");
  s.top_logprobs = int(*top);
  if (s.top_logprobs > 0) s.logprobs = true;
}

void parse_stream(const RequestJson& body, const FieldReader& f, GenerationSettings& s) {
  s.stream = f.boolean("stream", "stream must be a boolean").value_or(false);
  if (!f.has("stream_options")) return;
  const RequestJson& opts = body.at("stream_options");
  if (!opts.is_object()) throw invalid_request("stream_options must be an object", "stream_options");
  auto include = opts.find("include_usage");
  if (include == opts.end() || include->is_null()) return;
  if (!include->is_boolean())
    throw invalid_request("stream_options.include_usage must be a boolean", "stream_options");
  s.include_usage = include->get<bool>();
}

std::optional<int32_t> parse_max_tokens(const FieldReader& f) {
  // max_completion_tokens is OpenAI's newer name; when both are given it wins (as in mlx_lm).
  for (const char* key : {"max_completion_tokens", "max_tokens"}) {
    auto n = f.integer_in(key, 1, kInt32Max, std::string(key) + " must be a positive integer");
    if (n) return int32_t(*n);
  }
  return std::nullopt;
}

void parse_sampling(const RequestJson& body, const FieldReader& f, const SamplingDefaults& d,
                    SamplerParams& p) {
  p.temperature = float(f.number_in("temperature", 0, std::numeric_limits<double>::max(),
                                    "temperature must be a non-negative float")
                            .value_or(d.temperature.value_or(0.0f)));
  p.top_p = float(f.number_in("top_p", 0, 1, "top_p must be a float between 0 and 1")
                      .value_or(d.top_p.value_or(1.0f)));
  p.top_k = int(f.integer_in("top_k", 0, kInt32Max, "top_k must be a non-negative integer")
                    .value_or(d.top_k.value_or(0)));
  p.min_p = float(f.number_in("min_p", 0, 1, "min_p must be a float between 0 and 1")
                      .value_or(d.min_p.value_or(0.0f)));
  p.repetition_penalty =
      float(f.number_in("repetition_penalty", 0, std::numeric_limits<double>::max(),
                        "repetition_penalty must be a non-negative float")
                .value_or(d.repetition_penalty.value_or(0.0f)));
  auto context_size = [&](const char* key) {
    return int(f.integer_in(key, 0, kInt32Max, std::string(key) + " must be a non-negative integer")
                   .value_or(20));
  };
  p.repetition_context_size = context_size("repetition_context_size");
  p.presence_penalty = float(
      f.number_in("presence_penalty", -2, 2, "presence_penalty must be a float between -2 and 2")
          .value_or(0.0));
  p.presence_context_size = context_size("presence_context_size");
  p.frequency_penalty = float(
      f.number_in("frequency_penalty", -2, 2, "frequency_penalty must be a float between -2 and 2")
          .value_or(0.0));
  p.frequency_context_size = context_size("frequency_context_size");
  p.xtc_probability = float(f.number_in("xtc_probability", 0, 1,
                                        "xtc_probability must be a float between 0.00 and 1.00")
                                .value_or(0.0));
  p.xtc_threshold = float(
      f.number_in("xtc_threshold", 0, 0.5, "xtc_threshold must be a float between 0.00 and 0.5")
          .value_or(0.0));
  p.logit_bias = parse_logit_bias(body);
  auto seed = f.integer_in("seed", std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max(), "seed must be an integer");
  p.seed = seed ? uint64_t(*seed) : d.seed ? *d.seed : next_default_seed();
}

}  // namespace

GenerationSettings parse_generation_settings(const RequestJson& body, const SamplingDefaults& defaults) {
  GenerationSettings s;
  const FieldReader f(body);
  s.model = f.string("model", "model must be a string").value_or("");
  parse_stream(body, f, s);
  if (f.has("n") && (!body.at("n").is_number_integer() || body.at("n").get<int64_t>() != 1))
    throw invalid_request("n must be 1: one choice per request is supported", "n");
  s.max_tokens = parse_max_tokens(f);
  if (!s.max_tokens) s.max_tokens = defaults.max_tokens;
  parse_sampling(body, f, defaults, s.sampling);
  parse_logprobs(f, s);
  s.sampling.top_logprobs = s.top_logprobs;
  s.stop = parse_stop(body, "stop");
  s.ignore_eos = f.boolean("ignore_eos", "ignore_eos must be a boolean").value_or(false);
  return s;
}

void check_context_length(int64_t prompt_tokens, int64_t max_tokens, int64_t context_window,
                          const std::string& param) {
  if (prompt_tokens + max_tokens <= context_window) return;
  const std::string where = param == "prompt" ? "prompt" : "messages";
  throw invalid_request("This model's maximum context length is " + std::to_string(context_window) +
                            " tokens. However, you requested " +
                            std::to_string(prompt_tokens + max_tokens) + " tokens (" +
                            std::to_string(prompt_tokens) + " in the " + where + ", " +
                            std::to_string(max_tokens) +
                            " in the completion). Please reduce the length of the " + where +
                            " or completion.",
                        param, "context_length_exceeded");
}

}  // namespace kvlm::server
