#include "kvlm/server/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kvlm::server {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t bucket = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard lock(mu_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard lock(mu_);
  Snapshot s{bounds_, {}, sum_, count_};
  uint64_t running = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) s.cumulative.push_back(running += counts_[i]);
  return s;
}

namespace {

// Prometheus floats: integers without a fraction, others in the fewest digits that read back
// as the same double (0.1, not 0.10000000000000001).
std::string format_value(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// Label values escape backslash, double quote and newline.
std::string escape_label(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

const std::vector<double> kLatencyBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                            0.5,   1,      2.5,   5,    10,    30,   60};
const std::vector<double> kDurationBounds = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};

}  // namespace

std::string prometheus_header(const std::string& name, const std::string& help, const std::string& type) {
  return "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::string prometheus_sample(const std::string& name, const std::string& labels, double value) {
  return name + (labels.empty() ? "" : "{" + labels + "}") + " " + format_value(value) + "\n";
}

std::string prometheus_histogram(const std::string& name, const std::string& help,
                                 const Histogram::Snapshot& s) {
  std::string out = prometheus_header(name, help, "histogram");
  for (size_t i = 0; i < s.bounds.size(); ++i)
    out += prometheus_sample(name + "_bucket", "le=\"" + format_value(s.bounds[i]) + "\"", double(s.cumulative[i]));
  out += prometheus_sample(name + "_bucket", "le=\"+Inf\"", double(s.count));
  out += prometheus_sample(name + "_sum", "", s.sum);
  out += prometheus_sample(name + "_count", "", double(s.count));
  return out;
}

ServerMetrics::ServerMetrics() : ttft_(kLatencyBounds), itl_(kLatencyBounds), duration_(kDurationBounds) {}

void ServerMetrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard lock(mu_);
  ++requests_[{endpoint, status}];
}

void ServerMetrics::count_disconnect() {
  std::lock_guard lock(mu_);
  ++disconnects_;
}

void ServerMetrics::observe_time_to_first_token(double seconds) { ttft_.observe(seconds); }
void ServerMetrics::observe_inter_token_latency(double seconds) { itl_.observe(seconds); }
void ServerMetrics::observe_request_duration(double seconds) { duration_.observe(seconds); }

std::string ServerMetrics::prometheus(const EngineStats& e) const {
  std::string out = prometheus_header("kvlm_http_requests_total", "HTTP requests by endpoint and status.", "counter");
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, n] : requests_)
      out += prometheus_sample("kvlm_http_requests_total",
                               "endpoint=\"" + escape_label(key.first) + "\",status=\"" + std::to_string(key.second) + "\"",
                               double(n));
    out += prometheus_header("kvlm_client_disconnects_total", "Generations cancelled because the client went away.", "counter");
    out += prometheus_sample("kvlm_client_disconnects_total", "", double(disconnects_));
  }
  auto one = [&](const char* name, const char* help, const char* type, double v) {
    out += prometheus_header(name, help, type);
    out += prometheus_sample(name, "", v);
  };
  one("kvlm_requests_total", "Generation requests the engine accepted.", "counter", double(e.requests_total));
  one("kvlm_prompt_tokens_total", "Prompt tokens of accepted requests.", "counter", double(e.prompt_tokens_total));
  one("kvlm_generation_tokens_total", "Tokens generated.", "counter", double(e.generated_tokens_total));
  one("kvlm_requests_running", "Sequences in the running batch.", "gauge", e.running);
  one("kvlm_requests_waiting", "Requests queued for admission.", "gauge", e.waiting);
  one("kvlm_kv_blocks_total", "Blocks in the KV pool.", "gauge", e.kv_blocks_total);
  one("kvlm_kv_blocks_free", "Free blocks in the KV pool.", "gauge", e.kv_blocks_free);
  one("kvlm_kv_bytes_total", "Bytes of the KV pool.", "gauge", double(e.kv_bytes_total));
  one("kvlm_kv_bytes_used", "Bytes of the KV pool in use.", "gauge", double(e.kv_bytes_used));
  one("kvlm_kv_usage_ratio", "Fraction of KV blocks in use.", "gauge",
      e.kv_blocks_total > 0 ? double(e.kv_blocks_total - e.kv_blocks_free) / e.kv_blocks_total : 0.0);
  one("kvlm_prefix_cache_hits_total", "Requests that reused cached prompt KV.", "counter", double(e.prefix_hits));
  one("kvlm_prefix_cache_misses_total", "Requests that found no cached prompt prefix.", "counter", double(e.prefix_misses));
  one("kvlm_prefix_cache_cached_tokens_total", "Prompt tokens served from the prefix cache.", "counter",
      double(e.prefix_cached_tokens));
  const int64_t lookups = e.prefix_hits + e.prefix_misses;
  one("kvlm_prefix_cache_hit_ratio", "Prefix-cache hits over lookups.", "gauge",
      lookups > 0 ? double(e.prefix_hits) / double(lookups) : 0.0);
  one("kvlm_prefix_cache_bytes", "Bytes held by the prefix cache.", "gauge", double(e.prefix_cache_bytes));
  one("kvlm_engine_steps_total", "Engine steps (batched forward passes).", "counter", double(e.steps));
  one("kvlm_engine_last_step_seconds", "Duration of the most recent engine step.", "gauge", e.last_step_ms / 1000.0);
  out += prometheus_histogram("kvlm_time_to_first_token_seconds", "Time from request to its first token.",
                              ttft_.snapshot());
  out += prometheus_histogram("kvlm_inter_token_latency_seconds", "Time between consecutive tokens of a request.",
                              itl_.snapshot());
  out += prometheus_histogram("kvlm_request_duration_seconds", "Time from request to its last token.",
                              duration_.snapshot());
  return out;
}

Json ServerMetrics::json() const {
  Json requests = Json::object();
  std::lock_guard lock(mu_);
  for (const auto& [key, n] : requests_) requests[key.first][std::to_string(key.second)] = n;
  const auto ttft = ttft_.snapshot();
  const auto itl = itl_.snapshot();
  auto mean = [](const Histogram::Snapshot& s) { return s.count ? s.sum / double(s.count) : 0.0; };
  return {{"requests", std::move(requests)},
          {"client_disconnects", disconnects_},
          {"mean_time_to_first_token_s", mean(ttft)},
          {"mean_inter_token_latency_s", mean(itl)}};
}

Json engine_stats_json(const EngineStats& s) {
  const int64_t lookups = s.prefix_hits + s.prefix_misses;
  return {{"batch", {{"running", s.running}, {"waiting", s.waiting}, {"steps", s.steps}, {"last_step_ms", s.last_step_ms}}},
          {"requests", {{"total", s.requests_total},
                        {"prompt_tokens", s.prompt_tokens_total},
                        {"generated_tokens", s.generated_tokens_total}}},
          {"prefix_cache", {{"hits", s.prefix_hits},
                            {"misses", s.prefix_misses},
                            {"hit_rate", lookups > 0 ? double(s.prefix_hits) / double(lookups) : 0.0},
                            {"cached_tokens", s.prefix_cached_tokens},
                            {"bytes", s.prefix_cache_bytes}}},
          {"memory", {{"kv_blocks_total", s.kv_blocks_total},
                      {"kv_blocks_free", s.kv_blocks_free},
                      {"kv_bytes_total", s.kv_bytes_total},
                      {"kv_bytes_used", s.kv_bytes_used}}}};
}

}  // namespace kvlm::server
