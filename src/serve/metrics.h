// Metrics: the server's counters and latency histograms, and /metrics in
// the Prometheus text format (version 0.0.4).
//
// Connections record latencies and token counts as they go (a mutex, held
// for an add); the gauges — requests running and waiting, state bytes in
// use by kind, speculation — are the engine loop's snapshot after its last
// step (LoopStats), read when /metrics is asked for.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "serve/engine_loop.h"

namespace replayssm::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  // Lines of `name`'s _bucket, _sum and _count.
  std::string text(const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (the last: +Inf), not cumulative
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void request_started();
  // A request ended: its finish reason ("stop", "length", "cancelled", "error", ...).
  void request_finished(const std::string& reason, int64_t prompt_tokens, int64_t completion_tokens);
  void time_to_first_token(double seconds);
  void inter_token_latency(double seconds);
  void http_error(int status);
  std::string text(const LoopStats& s, const std::string& model) const;

 private:
  mutable std::mutex mu_;
  int64_t started_ = 0, prompt_tokens_ = 0, completion_tokens_ = 0;
  std::map<std::string, int64_t> finished_;
  std::map<int, int64_t> http_errors_;
  Histogram ttft_, itl_;
};

}  // namespace replayssm::serve
