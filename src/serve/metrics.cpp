// Metrics (see metrics.h).
#include "serve/metrics.h"

#include <algorithm>
#include <cstdio>

namespace replayssm::serve {

namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

void Histogram::observe(double v) {
  const size_t b = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  counts_[b]++;
  sum_ += v;
  count_++;
}

std::string Histogram::text(const std::string& name) const {
  std::string s;
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    s += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  cum += counts_.back();
  s += name + "_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
  s += name + "_sum " + num(sum_) + "\n";
  s += name + "_count " + std::to_string(count_) + "\n";
  return s;
}

Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60}),
      itl_({0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}) {}

void Metrics::request_started() {
  std::lock_guard<std::mutex> lock(mu_);
  started_++;
}

void Metrics::request_finished(const std::string& reason, int64_t prompt_tokens, int64_t completion_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  finished_[reason]++;
  prompt_tokens_ += prompt_tokens;
  completion_tokens_ += completion_tokens;
}

void Metrics::time_to_first_token(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.observe(seconds);
}

void Metrics::inter_token_latency(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  itl_.observe(seconds);
}

void Metrics::http_error(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  http_errors_[status]++;
}

std::string Metrics::text(const LoopStats& s, const std::string& model) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string m = "{model_name=\"" + model + "\"}";
  std::string t;
  auto metric = [&](const char* name, const char* type, const char* help, const std::string& body) {
    t += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + body;
  };
  metric("replayssm_requests_running", "gauge", "Requests in the engine's batch.",
         "replayssm_requests_running" + m + " " + std::to_string(s.running) + "\n");
  metric("replayssm_requests_waiting", "gauge", "Requests queued or parked.",
         "replayssm_requests_waiting" + m + " " + std::to_string(s.waiting) + "\n");
  metric("replayssm_requests_started_total", "counter", "Requests accepted.",
         "replayssm_requests_started_total" + m + " " + std::to_string(started_) + "\n");
  std::string fin;
  for (const auto& [reason, n] : finished_)
    fin += "replayssm_requests_finished_total{model_name=\"" + model + "\",finish_reason=\"" + reason + "\"} " +
           std::to_string(n) + "\n";
  metric("replayssm_requests_finished_total", "counter", "Requests ended, by finish reason.", fin);
  std::string errs;
  for (const auto& [status, n] : http_errors_)
    errs += "replayssm_http_errors_total{status=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
  metric("replayssm_http_errors_total", "counter", "Error responses, by HTTP status.", errs);
  metric("replayssm_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
         "replayssm_prompt_tokens_total" + m + " " + std::to_string(prompt_tokens_) + "\n");
  metric("replayssm_generation_tokens_total", "counter", "Tokens generated for finished requests.",
         "replayssm_generation_tokens_total" + m + " " + std::to_string(completion_tokens_) + "\n");
  metric("replayssm_time_to_first_token_seconds", "histogram", "From a request's arrival to its first token.",
         ttft_.text("replayssm_time_to_first_token_seconds"));
  metric("replayssm_inter_token_latency_seconds", "histogram", "Between a completion's consecutive tokens.",
         itl_.text("replayssm_inter_token_latency_seconds"));
  metric("replayssm_state_bytes", "gauge", "State held in the backend, by kind.",
         "replayssm_state_bytes{kind=\"checkpoints\"} " + std::to_string(s.state.checkpoint_bytes) + "\n" +
             "replayssm_state_bytes{kind=\"logs\"} " + std::to_string(s.state.log_bytes) + "\n" +
             "replayssm_state_bytes{kind=\"kv\"} " + std::to_string(s.state.kv_bytes) + "\n");
  metric("replayssm_state_bytes_peak", "gauge", "The most state held at once, by kind.",
         "replayssm_state_bytes_peak{kind=\"checkpoints_and_logs\"} " + std::to_string(s.state.state_bytes_peak) +
             "\n" + "replayssm_state_bytes_peak{kind=\"kv\"} " + std::to_string(s.state.kv_bytes_peak) + "\n");
  metric("replayssm_evictions_total", "counter", "Checkpoints and logs evicted under the state budget.",
         "replayssm_evictions_total " + std::to_string(s.state.evictions) + "\n");
  metric("replayssm_restores_total", "counter", "States rebuilt, by path.",
         "replayssm_restores_total{path=\"checkpoint\"} " + std::to_string(s.state.restores_checkpoint) + "\n" +
             "replayssm_restores_total{path=\"log_replay\"} " + std::to_string(s.state.restores_log_replay) + "\n" +
             "replayssm_restores_total{path=\"reprefill\"} " + std::to_string(s.state.restores_reprefill) + "\n");
  metric("replayssm_preemptions_total", "counter", "Requests parked because a step did not fit the state budget.",
         "replayssm_preemptions_total " + std::to_string(s.engine.preemptions) + "\n");
  metric("replayssm_spec_draft_tokens_total", "counter", "Speculative draft tokens verified.",
         "replayssm_spec_draft_tokens_total " + std::to_string(s.engine.spec_drafted) + "\n");
  metric("replayssm_spec_accepted_tokens_total", "counter", "Speculative draft tokens accepted.",
         "replayssm_spec_accepted_tokens_total " + std::to_string(s.engine.spec_accepted) + "\n");
  metric("replayssm_spec_acceptance_rate", "gauge", "Accepted over verified draft tokens since start.",
         "replayssm_spec_acceptance_rate " +
             num(s.engine.spec_drafted ? static_cast<double>(s.engine.spec_accepted) / s.engine.spec_drafted : 0.0) +
             "\n");
  const EngineStats& e = s.engine;
  metric("replayssm_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
         "replayssm_prefix_cache_queries_total " + std::to_string(e.prefix_lookup_tokens) + "\n");
  metric("replayssm_prefix_cache_hits_total", "counter", "Prompt tokens the prefix cache held (not computed).",
         "replayssm_prefix_cache_hits_total " + std::to_string(e.prefix_hit_tokens) + "\n");
  metric("replayssm_prefix_cache_hit_requests_total", "counter", "Requests that reused a cached prefix.",
         "replayssm_prefix_cache_hit_requests_total " + std::to_string(e.prefix_hits) + "\n");
  metric("replayssm_prefix_cache_hit_rate", "gauge", "Cached over looked-up prompt tokens since start.",
         "replayssm_prefix_cache_hit_rate " +
             num(e.prefix_lookup_tokens ? static_cast<double>(e.prefix_hit_tokens) / e.prefix_lookup_tokens : 0.0) +
             "\n");
  metric("replayssm_prefix_cache_entries", "gauge", "Sequences the prefix cache holds.",
         "replayssm_prefix_cache_entries " + std::to_string(e.prefix_entries) + "\n");
  metric("replayssm_prefix_cache_bytes", "gauge", "Bytes only the prefix cache holds, by kind.",
         "replayssm_prefix_cache_bytes{kind=\"state\"} " + std::to_string(e.prefix_state_bytes) + "\n" +
             "replayssm_prefix_cache_bytes{kind=\"kv\"} " + std::to_string(e.prefix_kv_bytes) + "\n");
  metric("replayssm_prefix_cache_evictions_total", "counter", "Prefix cache entries released for room.",
         "replayssm_prefix_cache_evictions_total " + std::to_string(e.prefix_evictions) + "\n");
  metric("replayssm_engine_steps_total", "counter", "Batched steps.",
         "replayssm_engine_steps_total " + std::to_string(s.engine.steps) + "\n");
  metric("replayssm_engine_max_running", "gauge", "The most requests in one batch since start.",
         "replayssm_engine_max_running " + std::to_string(s.engine.max_running) + "\n");
  return t;
}

}  // namespace replayssm::serve
