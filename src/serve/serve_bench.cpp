// The serving benchmark (see serve_bench.h).
#include "serve/serve_bench.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

namespace replayssm::serve {

using json = nlohmann::json;

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Times of one streamed request, as its tokens arrive.
struct Clock {
  double t0 = now_seconds(), last = -1;
  RequestOutcome* out;
  void token() {
    const double t = now_seconds() - t0;
    if (last < 0) out->ttft = t;
    else out->itl.push_back(t - last);
    last = t;
  }
};

}  // namespace

Status check_serve_bench_options(const ServeBenchOptions& o) {
  if (o.input_len < 1) return invalid_argument("--input-len: must be >= 1, got " + std::to_string(o.input_len));
  if (o.output_len < 1) return invalid_argument("--output-len: must be >= 1, got " + std::to_string(o.output_len));
  if (o.num_prompts < 1) return invalid_argument("--num-prompts: must be >= 1, got " + std::to_string(o.num_prompts));
  if (o.num_prompts > 1000000) return invalid_argument("--num-prompts: at most 1000000");
  if (o.vocab_size < 1) return invalid_argument("--vocab-size: must be >= 1, got " + std::to_string(o.vocab_size));
  if (o.concurrency < 0 || o.concurrency > 4096)
    return invalid_argument("--concurrency: must be in [0, 4096], got " + std::to_string(o.concurrency));
  if (!(o.request_rate > 0)) return invalid_argument("--request-rate: must be > 0 (inf: all at once)");
  return {};
}

Result<std::vector<BenchPrompt>> bench_prompts(const ServeBenchOptions& o) {
  RSSM_RETURN_IF_ERROR(check_serve_bench_options(o));
  std::vector<BenchPrompt> out;
  if (o.dataset == "random") {
    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(std::min<int64_t>(o.vocab_size, INT32_MAX) - 1));
    for (int64_t i = 0; i < o.num_prompts; ++i) {
      BenchPrompt p;
      p.ids.resize(static_cast<size_t>(o.input_len));
      for (int32_t& t : p.ids) t = id(rng);
      out.push_back(std::move(p));
    }
    return out;
  }
  std::ifstream f(o.dataset);
  if (!f) return not_found("--dataset: cannot read '" + o.dataset + "' (expected 'random' or a file of prompts)");
  std::vector<std::string> lines;
  std::string line;
  for (int64_t n = 1; std::getline(f, line); ++n) {
    if (line.empty()) continue;
    if (line[0] == '{') {  // JSON lines: {"prompt": "..."}
      json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
        return invalid_argument(o.dataset + ":" + std::to_string(n) + ": a JSON line needs a string \"prompt\"");
      lines.push_back(j["prompt"].get<std::string>());
    } else {
      lines.push_back(line);
    }
  }
  if (lines.empty()) return invalid_argument(o.dataset + ": no prompts");
  // Cycled to num_prompts, in the file's order.
  for (int64_t i = 0; i < o.num_prompts; ++i) out.push_back({{}, lines[static_cast<size_t>(i) % lines.size()]});
  return out;
}

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  auto at = [&](double q) {
    const double pos = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  p.p50 = at(0.5), p.p90 = at(0.9), p.p99 = at(0.99);
  return p;
}

Result<ServeBenchReport> run_serve_bench(const ServeBenchOptions& o, const std::vector<BenchPrompt>& prompts,
                                         const BenchDriver& send) {
  RSSM_RETURN_IF_ERROR(check_serve_bench_options(o));
  const size_t n = prompts.size();
  if (n == 0) return invalid_argument("no prompts");
  // Arrival times: Poisson at request_rate, or all at 0.
  std::vector<double> arrive(n, 0.0);
  if (std::isfinite(o.request_rate)) {
    std::mt19937_64 rng(o.seed + 1);
    std::exponential_distribution<double> gap(o.request_rate);
    double t = 0;
    for (size_t i = 0; i < n; ++i) arrive[i] = (t += gap(rng));
  }
  const size_t workers = std::min<size_t>(n, o.concurrency > 0 ? static_cast<size_t>(o.concurrency) : n);
  std::vector<RequestOutcome> outcomes(n);
  std::atomic<size_t> next{0};
  std::atomic<int64_t> in_flight{0}, max_in_flight{0};
  const double t0 = now_seconds();
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      for (size_t i; (i = next++) < n;) {
        const double wait = t0 + arrive[i] - now_seconds();
        if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
        const int64_t now = ++in_flight;
        for (int64_t m = max_in_flight.load(); now > m && !max_in_flight.compare_exchange_weak(m, now);) {
        }
        outcomes[i] = send(prompts[i], o.output_len);
        --in_flight;
      }
    });
  for (std::thread& t : threads) t.join();

  ServeBenchReport r;
  r.duration = now_seconds() - t0;
  r.max_in_flight = max_in_flight.load();
  std::vector<double> ttft, tpot, itl, e2e;
  for (const RequestOutcome& x : outcomes) {
    if (!x.ok) {
      ++r.failed;
      if (r.first_error.empty()) r.first_error = x.error;
      continue;
    }
    ++r.completed;
    r.input_tokens += x.prompt_tokens;
    r.output_tokens += x.output_tokens;
    ttft.push_back(x.ttft);
    e2e.push_back(x.latency);
    if (x.output_tokens > 1) tpot.push_back((x.latency - x.ttft) / static_cast<double>(x.output_tokens - 1));
    itl.insert(itl.end(), x.itl.begin(), x.itl.end());
  }
  r.request_throughput = static_cast<double>(r.completed) / r.duration;
  r.output_throughput = static_cast<double>(r.output_tokens) / r.duration;
  r.total_throughput = static_cast<double>(r.input_tokens + r.output_tokens) / r.duration;
  r.ttft = percentiles(ttft), r.tpot = percentiles(tpot), r.itl = percentiles(itl), r.e2e = percentiles(e2e);
  return r;
}

json ServeBenchReport::to_json() const {
  auto ms = [](const Percentiles& p) {
    return json{{"mean", p.mean * 1e3}, {"p50", p.p50 * 1e3}, {"p90", p.p90 * 1e3}, {"p99", p.p99 * 1e3}};
  };
  json j = {{"completed", completed},
            {"failed", failed},
            {"max_in_flight", max_in_flight},
            {"duration_s", duration},
            {"input_tokens", input_tokens},
            {"output_tokens", output_tokens},
            {"request_throughput", request_throughput},
            {"output_throughput", output_throughput},
            {"total_token_throughput", total_throughput},
            {"ttft_ms", ms(ttft)},
            {"tpot_ms", ms(tpot)},
            {"itl_ms", ms(itl)},
            {"e2e_ms", ms(e2e)}};
  if (!first_error.empty()) j["first_error"] = first_error;
  return j;
}

std::string ServeBenchReport::table(const std::string& title) const {
  std::string s;
  char line[160];
  auto row = [&](const char* name, double v, const char* fmt) {
    std::snprintf(line, sizeof line, fmt, name, v);
    s += line;
  };
  std::snprintf(line, sizeof line, "==== %s ====\n", title.c_str());
  s += line;
  row("Successful requests:", double(completed), "%-34s %12.0f\n");
  row("Failed requests:", double(failed), "%-34s %12.0f\n");
  row("Most requests in flight:", double(max_in_flight), "%-34s %12.0f\n");
  row("Benchmark duration (s):", duration, "%-34s %12.2f\n");
  row("Total input tokens:", double(input_tokens), "%-34s %12.0f\n");
  row("Total generated tokens:", double(output_tokens), "%-34s %12.0f\n");
  row("Request throughput (req/s):", request_throughput, "%-34s %12.2f\n");
  row("Output token throughput (tok/s):", output_throughput, "%-34s %12.2f\n");
  row("Total token throughput (tok/s):", total_throughput, "%-34s %12.2f\n");
  auto block = [&](const char* name, const Percentiles& p) {
    std::snprintf(line, sizeof line, "---- %s (ms): mean %.2f  p50 %.2f  p90 %.2f  p99 %.2f\n", name, p.mean * 1e3,
                  p.p50 * 1e3, p.p90 * 1e3, p.p99 * 1e3);
    s += line;
  };
  block("Time to first token", ttft);
  block("Time per output token", tpot);
  block("Inter-token latency", itl);
  block("End-to-end latency", e2e);
  if (!first_error.empty()) s += "first error: " + first_error + "\n";
  return s;
}

Result<HttpTarget> resolve_http_target(HttpTarget t) {
  if (t.url.rfind("http://", 0) != 0)
    return invalid_argument("--url: '" + t.url + "' (expected http://HOST:PORT; https is not supported)");
  if (t.endpoint != "completions" && t.endpoint != "chat")
    return invalid_argument("--endpoint: '" + t.endpoint + "' (expected completions or chat)");
  httplib::Client c(t.url);
  c.set_connection_timeout(5, 0);
  httplib::Headers h;
  if (!t.api_key.empty()) h.emplace("Authorization", "Bearer " + t.api_key);
  auto r = c.Get("/v1/models", h);
  if (!r) return io_error("--url: no answer from " + t.url + "/v1/models (" + httplib::to_string(r.error()) + ")");
  if (r->status != 200)
    return io_error("--url: " + t.url + "/v1/models answered " + std::to_string(r->status) + ": " + r->body);
  if (t.model.empty()) {
    const json j = json::parse(r->body, nullptr, false);
    if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
        !j["data"][0].contains("id"))
      return io_error("--url: " + t.url + "/v1/models lists no model");
    t.model = j["data"][0]["id"].get<std::string>();
  }
  return t;
}

BenchDriver http_driver(const HttpTarget& t) {
  return [t](const BenchPrompt& p, int64_t output_len) {
    RequestOutcome out;
    const bool chat = t.endpoint == "chat";
    if (chat && p.text.empty()) {
      out.error = "chat completions need text prompts (--dataset FILE)";
      return out;
    }
    json body = {{"model", t.model}, {"temperature", 0}, {"ignore_eos", true}, {"stream", true},
                 {"stream_options", {{"include_usage", true}}}};
    if (chat) {
      body["messages"] = json::array({{{"role", "user"}, {"content", p.text}}});
      body["max_completion_tokens"] = output_len;
    } else {
      body["prompt"] = p.ids.empty() ? json(p.text) : json(p.ids);
      body["max_tokens"] = output_len;
    }
    httplib::Client c(t.url);
    c.set_read_timeout(600, 0);
    httplib::Headers h;
    if (!t.api_key.empty()) h.emplace("Authorization", "Bearer " + t.api_key);
    Clock clock{now_seconds(), -1, &out};
    std::string buf, error_body;
    int64_t chunks = 0;
    bool done = false;
    auto on_event = [&](const std::string& data) {
      if (data == "[DONE]") {
        done = true;
        return;
      }
      const json j = json::parse(data, nullptr, false);
      if (!j.is_object()) return;
      if (j.contains("error")) {
        out.error = j["error"].dump();
        return;
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        out.prompt_tokens = j["usage"].value("prompt_tokens", int64_t{0});
        out.output_tokens = j["usage"].value("completion_tokens", int64_t{0});
      }
      if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
      const json& c0 = j["choices"][0];
      if (chat && c0.contains("delta") && c0["delta"].contains("role")) return;  // the role, not a token
      const std::string text =
          chat ? (c0.contains("delta") && c0["delta"].contains("content") && c0["delta"]["content"].is_string()
                      ? c0["delta"]["content"].get<std::string>()
                      : "")
               : (c0.contains("text") && c0["text"].is_string() ? c0["text"].get<std::string>() : "");
      const bool end = c0.contains("finish_reason") && !c0["finish_reason"].is_null();
      if (!end || !text.empty()) {
        clock.token();
        ++chunks;
      }
    };
    int status = 0;
    httplib::Request req;
    req.method = "POST";
    req.path = chat ? "/v1/chat/completions" : "/v1/completions";
    req.headers = h;
    req.set_header("Content-Type", "application/json");
    req.body = body.dump();
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
      buf.append(data, len);
      for (size_t end; (end = buf.find("\n\n")) != std::string::npos;) {
        const std::string ev = buf.substr(0, end);
        buf.erase(0, end + 2);
        if (ev.rfind("data: ", 0) == 0) on_event(ev.substr(6));
      }
      return true;
    };
    auto res = c.send(req);
    out.latency = now_seconds() - clock.t0;
    if (!res) {
      out.error = "no response: " + httplib::to_string(res.error());
      return out;
    }
    status = res->status;
    if (status != 200) {
      out.error = "HTTP " + std::to_string(status) + ": " + buf;
      return out;
    }
    if (!out.error.empty()) return out;
    if (!done) {
      out.error = "the stream ended without [DONE]";
      return out;
    }
    if (out.output_tokens == 0) out.output_tokens = chunks;  // a server without usage: one token per chunk
    if (out.prompt_tokens == 0) out.prompt_tokens = static_cast<int64_t>(p.ids.size());
    out.ok = chunks > 0;
    if (!out.ok) out.error = "no tokens streamed";
    return out;
  };
}

BenchDriver engine_driver(EngineLoop& loop, const Tokenizer* tok, RequestParams::Spec spec, int64_t spec_tokens) {
  return [&loop, tok, spec, spec_tokens](const BenchPrompt& p, int64_t output_len) {
    RequestOutcome out;
    RequestParams r;
    if (!p.ids.empty()) {
      r.prompt = p.ids;
    } else if (tok != nullptr) {
      auto ids = tok->encode(p.text, /*add_special_tokens=*/true);
      if (!ids.ok()) {
        out.error = ids.status().message();
        return out;
      }
      r.prompt = std::move(*ids);
    } else {
      out.error = "text prompts need a tokenizer (a --model directory, not a --preset)";
      return out;
    }
    r.max_new_tokens = output_len;
    r.stop_at_eos = false;
    if (spec != RequestParams::kNoSpec) r.spec = spec, r.spec_tokens = spec_tokens;
    Clock clock{now_seconds(), -1, &out};
    auto ch = std::make_shared<Channel>();
    auto id = loop.submit(r, ch);
    if (!id.ok()) {
      out.error = id.status().message();
      return out;
    }
    for (;;) {
      std::optional<TokenEvent> e = ch->pop(std::chrono::milliseconds(1000));
      if (!e) {
        if (Status f = loop.failure(); !f.ok()) {
          out.error = f.message();
          return out;
        }
        continue;
      }
      if (e->token >= 0) {
        clock.token();
        ++out.output_tokens;
      }
      if (e->finished) {
        if (!e->error.ok()) {
          out.error = e->error.message();
          return out;
        }
        break;
      }
    }
    out.latency = now_seconds() - clock.t0;
    out.prompt_tokens = static_cast<int64_t>(r.prompt.size());
    out.ok = out.output_tokens > 0;
    if (!out.ok) out.error = "no tokens";
    return out;
  };
}

}  // namespace replayssm::serve
