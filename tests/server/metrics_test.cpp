// Prometheus text format and the /stats JSON.
#include <gtest/gtest.h>

#include <sstream>

#include "kvlm/server/metrics.h"

namespace kvlm::server {
namespace {

TEST(Prometheus, HistogramIsCumulativeWithInfSumAndCount) {
  Histogram h({0.1, 1});
  h.observe(0.05);
  h.observe(0.1);  // on a bound: counted in that bucket (le = less or equal)
  h.observe(0.5);
  h.observe(7);
  EXPECT_EQ(prometheus_histogram("x_seconds", "X.", h.snapshot()),
            "# HELP x_seconds X.\n"
            "# TYPE x_seconds histogram\n"
            "x_seconds_bucket{le=\"0.1\"} 2\n"
            "x_seconds_bucket{le=\"1\"} 3\n"
            "x_seconds_bucket{le=\"+Inf\"} 4\n"
            "x_seconds_sum 7.65\n"
            "x_seconds_count 4\n");
}

TEST(Prometheus, ServerAndEngineFigures) {
  ServerMetrics m;
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 400);
  m.observe_time_to_first_token(0.02);
  m.observe_inter_token_latency(0.004);
  EngineStats e;
  e.running = 2;
  e.waiting = 1;
  e.kv_blocks_total = 100;
  e.kv_blocks_free = 75;
  e.prefix_hits = 3;
  e.prefix_misses = 1;
  e.generated_tokens_total = 42;
  const std::string text = m.prometheus(e);
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("kvlm_http_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 2"));
  EXPECT_TRUE(has("kvlm_http_requests_total{endpoint=\"/v1/chat/completions\",status=\"400\"} 1"));
  EXPECT_TRUE(has("kvlm_requests_running 2"));
  EXPECT_TRUE(has("kvlm_requests_waiting 1"));
  EXPECT_TRUE(has("kvlm_kv_usage_ratio 0.25"));
  EXPECT_TRUE(has("kvlm_prefix_cache_hit_ratio 0.75"));
  EXPECT_TRUE(has("kvlm_generation_tokens_total 42"));
  EXPECT_TRUE(has("kvlm_time_to_first_token_seconds_count 1"));
  EXPECT_TRUE(has("kvlm_inter_token_latency_seconds_count 1"));
  EXPECT_TRUE(has("# TYPE kvlm_requests_running gauge"));
  // Every line is a comment or "name[{labels}] value", and every sample's family has a TYPE.
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("# ", 0) == 0) continue;
    const size_t space = line.rfind(' ');
    ASSERT_NE(space, std::string::npos) << line;
    EXPECT_NO_THROW(std::stod(line.substr(space + 1))) << line;
    std::string name = line.substr(0, std::min(line.find('{'), space));
    for (const char* suffix : {"_bucket", "_sum", "_count"})
      if (text.find("# TYPE " + name + " ") == std::string::npos && name.ends_with(suffix))
        name.resize(name.size() - std::string(suffix).size());
    EXPECT_NE(text.find("# TYPE " + name + " "), std::string::npos) << line;
  }
}

TEST(Stats, EngineJsonSections) {
  EngineStats e;
  e.running = 1;
  e.prefix_hits = 1;
  e.prefix_misses = 3;
  e.kv_bytes_used = 4096;
  const Json j = engine_stats_json(e);
  EXPECT_EQ(j["batch"]["running"], 1);
  EXPECT_DOUBLE_EQ(j["prefix_cache"]["hit_rate"].get<double>(), 0.25);
  EXPECT_EQ(j["memory"]["kv_bytes_used"], 4096);
  EXPECT_TRUE(j.contains("requests"));
}

}  // namespace
}  // namespace kvlm::server
