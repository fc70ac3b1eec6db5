// `replayssm bench-serve`: the serving benchmark (src/serve/serve_bench.h)
// against a running OpenAI-compatible server (--url), or against the engine
// that `replayssm serve` would drive, in this process (--in-process, the
// same model and engine options as serve). --concurrency takes a list: one
// run per value, over the same server.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/served_model.h"
#include "serve/serve_bench.h"

namespace replayssm::cli {

namespace {

struct BenchServeArgs {
  serve::HttpTarget target;
  bool in_process = false;
  ServedModelArgs m;
  serve::ServeBenchOptions o;
  std::string concurrency = "0", request_rate = "inf", out;
  bool json = false;
};

Result<std::vector<int64_t>> concurrency_list(const std::string& text) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 0) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (...) {
      return invalid_argument("--concurrency: '" + item + "' is not a count (expected e.g. 1,16,64)");
    }
    at = comma + 1;
  }
  return out;
}

Status run_bench_serve(BenchServeArgs a) {
  if (a.request_rate == "inf") {
    a.o.request_rate = std::numeric_limits<double>::infinity();
  } else {
    try {
      size_t used = 0;
      a.o.request_rate = std::stod(a.request_rate, &used);
      if (used != a.request_rate.size()) throw std::invalid_argument(a.request_rate);
    } catch (...) {
      return invalid_argument("--request-rate: '" + a.request_rate + "' (expected requests per second, or inf)");
    }
  }
  RSSM_ASSIGN_OR_RETURN(const std::vector<int64_t> levels, concurrency_list(a.concurrency));
  if (a.o.vocab_size < 0) return invalid_argument("--vocab-size: must be >= 1");
  {
    serve::ServeBenchOptions early = a.o;  // the vocabulary is resolved below
    early.vocab_size = std::max<int64_t>(early.vocab_size, 1);
    RSSM_RETURN_IF_ERROR(serve::check_serve_bench_options(early));
  }
  if (a.in_process == !a.target.url.empty())
    return invalid_argument("give one of --url (a running server) or --in-process");

  std::unique_ptr<ServedModel> sm;
  std::unique_ptr<serve::EngineLoop> loop;
  serve::BenchDriver send;
  std::string what;
  if (a.in_process) {
    RSSM_ASSIGN_OR_RETURN(sm, load_served_model(a.m));
    // Random ids from the model's own vocabulary unless told otherwise.
    if (a.o.vocab_size == 0) a.o.vocab_size = sm->model->config().vocab_size;
    loop = std::make_unique<serve::EngineLoop>(std::move(sm->engine));
    send = serve::engine_driver(*loop, sm->tokenizer ? &*sm->tokenizer : nullptr, sm->spec, sm->spec_tokens);
    what = "in-process engine, " + sm->source + " on " + a.m.device;
  } else {
    if (a.o.vocab_size == 0) a.o.vocab_size = 4096;  // within every preset's vocabulary
    RSSM_ASSIGN_OR_RETURN(a.target, serve::resolve_http_target(a.target));
    send = serve::http_driver(a.target);
    what = a.target.url + " (" + a.target.model + ", " + a.target.endpoint + ")";
  }
  RSSM_ASSIGN_OR_RETURN(std::vector<serve::BenchPrompt> prompts, serve::bench_prompts(a.o));

  // One short request first: connections, lazy allocations, page faults.
  if (serve::RequestOutcome w = send(prompts[0], std::min<int64_t>(a.o.output_len, 4)); !w.ok)
    return io_error("bench-serve: the warm-up request failed: " + w.error);

  nlohmann::json runs = nlohmann::json::array();
  for (int64_t c : levels) {
    serve::ServeBenchOptions o = a.o;
    o.concurrency = c;
    RSSM_ASSIGN_OR_RETURN(serve::ServeBenchReport r, serve::run_serve_bench(o, prompts, send));
    nlohmann::json j = r.to_json();
    j["concurrency"] = c;
    j["request_rate"] = std::isfinite(o.request_rate) ? nlohmann::json(o.request_rate) : nlohmann::json("inf");
    j["input_len"] = o.input_len;
    j["output_len"] = o.output_len;
    j["num_prompts"] = o.num_prompts;
    j["target"] = what;
    runs.push_back(j);
    if (!a.json)
      std::printf("%s", r.table(what + ", concurrency " + (c == 0 ? std::string("unbounded") : std::to_string(c)))
                            .c_str());
    if (r.failed > 0)
      std::fprintf(stderr, "bench-serve: %lld of %lld requests failed (first: %s)\n", (long long)r.failed,
                   (long long)(r.failed + r.completed), r.first_error.c_str());
  }
  if (a.json) std::printf("%s\n", runs.dump(2).c_str());
  if (!a.out.empty()) {
    std::ofstream f(a.out);
    if (!(f << runs.dump(2) << "\n")) return io_error("--out: cannot write '" + a.out + "'");
  }
  for (const auto& r : runs)
    if (r["failed"].get<int64_t>() > 0) return io_error("bench-serve: some requests failed");
  return {};
}

}  // namespace

Runner add_bench_serve(CLI::App& app) {
  auto a = std::make_shared<BenchServeArgs>();
  a->o.vocab_size = 0;  // resolved per target
  app.add_option("--url", a->target.url, "A running OpenAI-compatible server, http://HOST:PORT");
  app.add_option("--served-model", a->target.model, "The model id to ask for (default: /v1/models' first)");
  app.add_option("--endpoint", a->target.endpoint, "completions or chat (chat needs --dataset FILE)")
      ->capture_default_str();
  app.add_option("--api-key", a->target.api_key, "Sent as 'Authorization: Bearer KEY'");
  app.add_flag("--in-process", a->in_process, "Drive the engine serve would run, in this process (no HTTP)");
  add_served_model_options(app, &a->m);
  app.add_option("--dataset", a->o.dataset, "random (token ids), or a file: one prompt per line or JSON lines")
      ->capture_default_str();
  app.add_option("--input-len", a->o.input_len, "Tokens per random prompt")->capture_default_str();
  app.add_option("--output-len", a->o.output_len, "Tokens generated per request (EOS ignored)")->capture_default_str();
  app.add_option("--num-prompts", a->o.num_prompts, "Requests per run")->capture_default_str();
  app.add_option("--vocab-size", a->o.vocab_size,
                 "Random ids are drawn below this (default: the model's vocabulary in process, 4096 over HTTP)");
  app.add_option("--concurrency", a->concurrency, "Most requests in flight; a list runs each (0: unbounded)")
      ->capture_default_str();
  app.add_option("--request-rate", a->request_rate, "Requests per second, Poisson arrivals (inf: all at once)")
      ->capture_default_str();
  app.add_option("--seed", a->o.seed, "Seed of the prompts and arrivals")->capture_default_str();
  app.add_flag("--json", a->json, "Print the results as JSON instead of tables");
  app.add_option("--out", a->out, "Also write the JSON results to this file");
  return [a] { return run_bench_serve(*a); };
}

}  // namespace replayssm::cli
