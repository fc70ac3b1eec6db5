// Serving benchmark, in the manner of vLLM's benchmark_serving: a set of
// prompts (random token ids of a fixed length, or the lines of a file) sent
// at a fixed request rate (Poisson arrivals) or as fast as a concurrency
// limit allows, each streamed; reported: request and token throughput, and
// time to first token (TTFT), time per output token after the first (TPOT)
// and the gaps between streamed tokens (ITL) — mean, p50, p90, p99.
//
// Two drivers send a request: over HTTP to any OpenAI-compatible server
// (`replayssm serve`, vLLM, llama-server; streamed completions or chat
// completions), or straight to an in-process EngineLoop — the engine the
// server drives, without HTTP — so the two can be compared at one
// concurrency.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "io/tokenizer.h"
#include "replayssm/status.h"
#include "serve/engine_loop.h"

namespace replayssm::serve {

struct BenchPrompt {
  std::vector<int32_t> ids;  // random prompts (and file prompts, when a tokenizer is at hand)
  std::string text;          // file prompts
};

struct ServeBenchOptions {
  std::string dataset = "random";  // "random" or a file: one prompt per line, or JSON lines with "prompt"
  int64_t input_len = 1024, output_len = 256, num_prompts = 64;
  int64_t vocab_size = 4096;  // random ids are drawn from [0, vocab_size)
  int64_t concurrency = 0;    // most requests in flight (0: num_prompts)
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s (inf: all at once)
  uint64_t seed = 0;
};
Status check_serve_bench_options(const ServeBenchOptions& o);

// The prompts of a run (deterministic in the seed).
Result<std::vector<BenchPrompt>> bench_prompts(const ServeBenchOptions& o);

// One request's outcome, times in seconds from its start.
struct RequestOutcome {
  bool ok = false;
  std::string error;
  int64_t prompt_tokens = 0, output_tokens = 0;
  double ttft = 0, latency = 0;
  std::vector<double> itl;  // between successive streamed tokens
};
// Sends one prompt asking for `output_len` tokens (EOS ignored), streamed.
using BenchDriver = std::function<RequestOutcome(const BenchPrompt& p, int64_t output_len)>;

struct Percentiles {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
};
Percentiles percentiles(std::vector<double> v);  // linear interpolation, as numpy's default

struct ServeBenchReport {
  int64_t completed = 0, failed = 0, max_in_flight = 0;
  double duration = 0;
  int64_t input_tokens = 0, output_tokens = 0;
  double request_throughput = 0, output_throughput = 0, total_throughput = 0;  // per second
  Percentiles ttft, tpot, itl, e2e;  // seconds
  std::string first_error;
  nlohmann::json to_json() const;
  std::string table(const std::string& title) const;
};

Result<ServeBenchReport> run_serve_bench(const ServeBenchOptions& o, const std::vector<BenchPrompt>& prompts,
                                         const BenchDriver& send);

// Over HTTP: "http://host:port", the served model's id, "completions" or
// "chat" (chat needs text prompts), the API key (may be empty).
struct HttpTarget {
  std::string url, model, endpoint = "completions", api_key;
};
Result<HttpTarget> resolve_http_target(HttpTarget t);  // checks the URL; an empty model: /v1/models' first
BenchDriver http_driver(const HttpTarget& t);
// In process; `tok` (may be null) tokenizes text prompts; speculation as
// `replayssm serve --spec` applies it.
BenchDriver engine_driver(EngineLoop& loop, const Tokenizer* tok, RequestParams::Spec spec = RequestParams::kNoSpec,
                          int64_t spec_tokens = 0);

}  // namespace replayssm::serve
