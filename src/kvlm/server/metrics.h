#pragma once
// Server metrics: request counters and latency histograms kept by the server, merged with the
// engine's own statistics into Prometheus text (GET /metrics) and JSON (GET /stats).
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kvlm/base/json.h"
#include "kvlm/engine/engine.h"

namespace kvlm::server {

// A Prometheus histogram: counts per upper bound (cumulative when rendered), sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // observations <= bounds[i]
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Prometheus text exposition format (version 0.0.4) pieces.
std::string prometheus_header(const std::string& name, const std::string& help, const std::string& type);
std::string prometheus_sample(const std::string& name, const std::string& labels, double value);
std::string prometheus_histogram(const std::string& name, const std::string& help,
                                 const Histogram::Snapshot& s);

class ServerMetrics {
 public:
  ServerMetrics();

  void count_request(const std::string& endpoint, int status);
  void count_disconnect();                    // a client went away mid-generation
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  void observe_request_duration(double seconds);

  // Prometheus text of the server's and the engine's figures.
  std::string prometheus(const EngineStats& engine) const;
  // The server's own figures as JSON (the "server" part of /stats).
  Json json() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t disconnects_ = 0;
  Histogram ttft_, itl_, duration_;
};

// GET /stats: the engine (batch, requests, tokens), prefix cache and KV memory.
Json engine_stats_json(const EngineStats& s);

}  // namespace kvlm::server
