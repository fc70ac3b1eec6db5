// Server (see server.h): routes, authentication, and one request's
// exchange from its body to its last byte.
#include "serve/server.h"

#include <httplib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "core/clock.h"
#include "serve/chat_template.h"
#include "serve/text_stream.h"

namespace replayssm::serve {

using json = nlohmann::ordered_json;

namespace {

constexpr auto kPoll = std::chrono::milliseconds(200);  // how often a waiting connection looks up
constexpr double kKeepAlive = 1.0;                      // seconds of silence before an SSE comment
constexpr double kProbe = 1.0;                          // seconds between a waiting non-streamed body's probes

std::string random_hex(int n) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < n; ++i) s += digits[rng() % 16];
  return s;
}

void send_error(httplib::Response& res, Metrics& m, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
  m.http_error(e.status);
}

ApiError from_status(const Status& st) {
  switch (st.code()) {
    case StatusCode::kInvalidArgument: return {400, st.message(), "invalid_request_error", "", ""};
    case StatusCode::kOutOfBudget:
      return {400, "the request does not fit the server's state budget: " + st.message(), "invalid_request_error", "",
              ""};
    case StatusCode::kUnsupported: return {503, st.message(), "server_error", "", ""};
    default: return {500, st.message(), "server_error", "", ""};
  }
}

const char* reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: break;
  }
  return "none";
}

}  // namespace

// One HTTP request's generation: its engine requests, what each choice has
// received, and the JSON it becomes.
struct Server::Exchange {
  struct Choice {
    explicit Choice(const Tokenizer* tok, const std::vector<std::string>& stops) : text(tok, stops) {}
    TextStream text;
    std::vector<int32_t> tokens;
    std::vector<double> logprobs;
    std::vector<std::vector<TokenLogprob>> top;
    std::string finish;   // "" until done
    size_t sent = 0;      // tokens whose logprobs a stream has sent
    size_t sent_text = 0; // bytes of its text a stream has sent
    bool role_sent = false;
    double last_token = 0.0;
  };

  Exchange(Server& s, ApiRequest r)
      : srv(s), req(std::move(r)), id((req.chat ? "chatcmpl-" : "cmpl-") + random_hex(24)),
        created(static_cast<int64_t>(std::time(nullptr))), t0(now_seconds()), ch(std::make_shared<Channel>()) {
    const size_t n = req.prompts.size() * static_cast<size_t>(req.n);
    for (size_t i = 0; i < n; ++i) choices.emplace_back(srv.tok_, req.stop);
    prompt_lp.resize(req.prompts.size());
    prompt_top.resize(req.prompts.size());
    cached.assign(req.prompts.size(), 0);
  }

  Server& srv;
  ApiRequest req;
  std::string id;
  int64_t created = 0;
  double t0 = 0.0, first_token = -1.0;
  std::shared_ptr<Channel> ch;
  std::vector<int64_t> engine_ids;  // per prompt
  std::vector<Choice> choices;      // prompt p's completion j at p·n + j
  std::vector<std::vector<double>> prompt_lp;
  std::vector<std::vector<std::vector<TokenLogprob>>> prompt_top;
  std::vector<int64_t> cached;      // per prompt: tokens the prefix cache held
  Status error;                     // a failure no token was sent before
  size_t done = 0;
  bool cancelled = false;
  bool ended = false;               // logged and counted

  bool finished() const { return done == choices.size() || !error.ok(); }
  size_t reportable() const { return static_cast<size_t>(req.max_tokens); }
  int64_t prompt_of(int64_t engine_id) const {
    for (size_t p = 0; p < engine_ids.size(); ++p)
      if (engine_ids[p] == engine_id) return static_cast<int64_t>(p);
    return -1;
  }
  int64_t prompt_tokens() const {
    int64_t n = 0;
    for (const RequestParams& p : req.prompts) n += static_cast<int64_t>(p.prompt.size());
    return n;
  }
  int64_t completion_tokens() const {
    int64_t n = 0;
    for (const Choice& c : choices) n += static_cast<int64_t>(c.tokens.size());
    return n;
  }

  Status submit() {
    for (RequestParams p : req.prompts) {
      RSSM_ASSIGN_OR_RETURN(const int64_t eid, srv.loop_->submit(std::move(p), ch));
      engine_ids.push_back(eid);
    }
    return {};
  }
  void cancel() {
    if (cancelled) return;
    cancelled = true;
    for (int64_t eid : engine_ids) srv.loop_->cancel(eid);
  }

  // Folds one event in; false when the exchange failed (error is set).
  void take(const TokenEvent& e) {
    const int64_t p = prompt_of(e.request);
    if (p < 0) return;
    cached[size_t(p)] = e.cached_tokens;
    if (e.index < 0) {  // the prompt's log-probabilities
      prompt_lp[size_t(p)] = e.prompt_logprobs;
      prompt_top[size_t(p)] = e.prompt_top;
      return;
    }
    Choice& c = choices[size_t(p * req.n + e.index)];
    if (!c.finish.empty()) return;
    const double now = now_seconds();
    if (e.token >= 0 && c.tokens.size() < reportable() && !c.text.stopped()) {
      if (first_token < 0) {
        first_token = now;
        srv.metrics_.time_to_first_token(now - t0);
      } else if (c.last_token > 0) {
        srv.metrics_.inter_token_latency(now - c.last_token);
      }
      c.last_token = now;
      c.tokens.push_back(e.token);
      c.logprobs.push_back(e.logprob);
      c.top.push_back(e.top);
      // The end-of-sequence token ends the text; it is not part of it (as
      // with transformers' skip_special_tokens).
      const bool eos = e.finished && e.reason == FinishReason::kStop && srv.cfg_->is_eos(e.token);
      auto d = eos ? Result<TextStream::Delta>(TextStream::Delta{}) : c.text.push(e.token);
      if (!d.ok()) {
        error = d.status();
        cancel();
        return;
      }
      if (d->stopped && !e.finished && !req.search) srv.loop_->stop_completion(e.request, e.index);
    }
    if (!e.finished) return;
    if (!e.error.ok()) {
      error = e.error;
      cancel();
      return;
    }
    c.finish = c.text.stopped()                       ? "stop"
               : c.tokens.size() >= reportable()      ? "length"
                                                      : reason_name(e.reason);
    if (c.finish == "cancelled" && !cancelled) c.finish = "stop";  // a stop string's end, from the engine
    c.text.finish();
    ++done;
  }

  // Waits for the next event (up to kPoll); false on timeout.
  bool step() {
    std::optional<TokenEvent> e = ch->pop(kPoll);
    if (!e) {
      if (Status f = srv.loop_->failure(); !f.ok() && error.ok()) {
        error = f;
        cancel();
      }
      return false;
    }
    take(*e);
    return true;
  }

  // A token's text as a client sees it alone (a piece of a character as U+FFFD).
  // Without a tokenizer, "token_id:N" (as vLLM's --return-tokens-as-token-ids).
  std::string piece(int32_t t) const {
    if (srv.tok_ == nullptr) return "token_id:" + std::to_string(t);
    auto s = srv.tok_->decode({&t, 1});
    return s.ok() ? *s : std::string();
  }
  json bytes_of(int32_t t) const {
    if (srv.tok_ == nullptr) return nullptr;
    json out = json::array();
    auto b = srv.tok_->decode_bytes({&t, 1});
    if (b.ok())
      for (unsigned char c : *b) out.push_back(int(c));
    return out;
  }
  json top_dict(const std::vector<TokenLogprob>& top) const {
    json d = json::object();
    for (const TokenLogprob& t : top) d[piece(t.token)] = t.logprob;
    return d;
  }

  // Completions' logprobs object for choice c's tokens [from, to); echo
  // adds the prompt's first (when from is 0).
  json completion_logprobs(size_t ci, size_t from, size_t to, int64_t text_base) const {
    const Choice& c = choices[ci];
    json tokens = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
    const size_t p = ci / static_cast<size_t>(req.n);
    int64_t base = text_base;
    if (req.echo && from == 0) {
      const std::vector<int32_t>& pt = req.prompts[p].prompt;
      TextStream ts(srv.tok_, {});
      for (size_t i = 0; i < pt.size(); ++i) {
        (void)ts.push(pt[i]);
        tokens.push_back(piece(pt[i]));
        const double lp = i < prompt_lp[p].size() ? prompt_lp[p][i] : NAN;
        lps.push_back(std::isnan(lp) ? json(nullptr) : json(lp));
        tops.push_back(i == 0 || i >= prompt_top[p].size() ? json(nullptr) : top_dict(prompt_top[p][i]));
        offs.push_back(ts.offsets()[i]);
      }
      base += static_cast<int64_t>(req.prompt_texts[p].size());
    }
    for (size_t i = from; i < to; ++i) {
      tokens.push_back(piece(c.tokens[i]));
      lps.push_back(c.logprobs[i]);
      tops.push_back(req.logprobs > 0 ? top_dict(c.top[i]) : json(nullptr));
      offs.push_back(base + (i < c.text.offsets().size() ? c.text.offsets()[i] : 0));
    }
    return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
  }
  json chat_logprobs(size_t ci, size_t from, size_t to) const {
    const Choice& c = choices[ci];
    json content = json::array();
    for (size_t i = from; i < to; ++i) {
      json top = json::array();
      for (const TokenLogprob& t : c.top[i])
        top.push_back({{"token", piece(t.token)},
                       {"logprob", t.logprob},
                       {"bytes", bytes_of(t.token)}});
      content.push_back({{"token", piece(c.tokens[i])},
                         {"logprob", c.logprobs[i]},
                         {"bytes", bytes_of(c.tokens[i])},
                         {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json usage() const {
    json u = {{"prompt_tokens", prompt_tokens()},
              {"completion_tokens", completion_tokens()},
              {"total_tokens", prompt_tokens() + completion_tokens()}};
    if (srv.opt_.prefix_cache) {
      int64_t n = 0;
      for (int64_t c : cached) n += c;
      u["prompt_tokens_details"] = {{"cached_tokens", n}};
    }
    return u;
  }

  // The whole response (non-streaming).
  json response() const {
    json cs = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      const Choice& c = choices[i];
      const size_t p = i / static_cast<size_t>(req.n);
      if (req.chat) {
        cs.push_back({{"index", i},
                      {"message", {{"role", "assistant"}, {"content", c.text.text()}}},
                      {"logprobs", req.logprobs >= 0 ? chat_logprobs(i, 0, c.tokens.size()) : json(nullptr)},
                      {"finish_reason", c.finish}});
      } else {
        cs.push_back({{"index", i},
                      {"text", (req.echo ? req.prompt_texts[p] : std::string()) + c.text.text()},
                      {"logprobs", req.logprobs >= 0 ? completion_logprobs(i, 0, c.tokens.size(), 0) : json(nullptr)},
                      {"finish_reason", c.finish}});
      }
    }
    return {{"id", id},
            {"object", req.chat ? "chat.completion" : "text_completion"},
            {"created", created},
            {"model", req.model},
            {"choices", cs},
            {"usage", usage()}};
  }

  // The SSE events owed for what arrived since the last call.
  std::string stream_events() {
    std::string out;
    auto event = [&](json choice) {
      json chunk = {{"id", id},
                    {"object", req.chat ? "chat.completion.chunk" : "text_completion"},
                    {"created", created},
                    {"model", req.model},
                    {"choices", json::array({std::move(choice)})}};
      if (req.include_usage) chunk["usage"] = nullptr;
      out += "data: " + chunk.dump() + "\n\n";
    };
    for (size_t i = 0; i < choices.size(); ++i) {
      Choice& c = choices[i];
      const size_t p = i / static_cast<size_t>(req.n);
      if (req.chat && !c.role_sent) {
        event({{"index", i}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
               {"finish_reason", nullptr}});
        c.role_sent = true;
      }
      std::string text;
      // The echoed prompt goes with the first token, or alone (max_tokens 0).
      const bool echo_now = !req.chat && req.echo && c.sent == 0 && c.sent_text == 0 &&
                            (!c.tokens.empty() || !c.finish.empty());
      if (echo_now) text = req.prompt_texts[p];
      text += c.text.text().substr(c.sent_text);
      const size_t to = c.tokens.size();
      if (!text.empty() || to > c.sent || echo_now) {
        json lp = nullptr;
        if (req.logprobs >= 0)
          lp = req.chat ? chat_logprobs(i, c.sent, to)
                        : completion_logprobs(i, c.sent, to, static_cast<int64_t>(c.sent_text));
        if (req.chat)
          event({{"index", i}, {"delta", {{"content", text}}}, {"logprobs", lp}, {"finish_reason", nullptr}});
        else
          event({{"index", i}, {"text", text}, {"logprobs", lp}, {"finish_reason", nullptr}});
        c.sent = to;
        c.sent_text = c.text.text().size();
      }
      if (!c.finish.empty() && c.sent != SIZE_MAX) {
        if (req.chat)
          event({{"index", i}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", c.finish}});
        else
          event({{"index", i}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", c.finish}});
        c.sent = SIZE_MAX;  // its end is sent
      }
    }
    return out;
  }

  void log() const {  // one line per request
    if (!srv.opt_.log_requests) return;
    const double end = now_seconds();
    const double ttft = first_token >= 0 ? first_token - t0 : 0.0;
    const double gen = first_token >= 0 ? end - first_token : 0.0;
    std::string reasons;
    for (const Choice& c : choices) reasons += (reasons.empty() ? "" : ",") + (c.finish.empty() ? "-" : c.finish);
    std::fprintf(stderr, "serve: %s prompt=%lld completion=%lld ttft=%.1fms tokens/s=%.1f finish=%s%s\n", id.c_str(),
                 (long long)prompt_tokens(), (long long)completion_tokens(), ttft * 1e3,
                 gen > 0 ? static_cast<double>(completion_tokens()) / gen : 0.0, reasons.c_str(),
                 error.ok() ? (cancelled ? " (client gone)" : "") : (" error: " + error.message()).c_str());
  }
  // Once, however the exchange ends: the log line and the metrics.
  void end() {
    if (ended) return;
    ended = true;
    log();
    std::string reason = !error.ok() ? "error" : cancelled ? "cancelled" : "";
    if (reason.empty() && !choices.empty()) reason = choices[0].finish;
    srv.metrics_.request_finished(reason, prompt_tokens(), completion_tokens());
  }
};

Server::Server(ServeOptions opt) : opt_(std::move(opt)), http_(std::make_unique<httplib::Server>()) {}

Server::~Server() {
  stop();
  wait();
}

bool Server::authorized(const std::string& header) const {
  if (opt_.api_key.empty()) return true;
  const std::string want = "Bearer " + opt_.api_key;
  // Constant time in the header's content: every byte is compared.
  unsigned diff = header.size() == want.size() ? 0u : 1u;
  for (size_t i = 0; i < header.size(); ++i) diff |= static_cast<unsigned char>(header[i]) ^
                                                    static_cast<unsigned char>(want[i % want.size()]);
  return diff == 0;
}

Status Server::start() {
  const int threads = opt_.http_threads > 0 ? opt_.http_threads : static_cast<int>(opt_.max_queue) + 16;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http_->set_payload_max_length(static_cast<size_t>(opt_.max_body_bytes));
  http_->set_keep_alive_max_count(1000);
  routes();
  port_ = opt_.port == 0 ? http_->bind_to_any_port(opt_.host) : (http_->bind_to_port(opt_.host, opt_.port) ? opt_.port : -1);
  if (port_ < 0)
    return io_error("serve: cannot listen on " + opt_.host + ":" + std::to_string(opt_.port) +
                    " (in use, or not an address of this machine)");
  thread_ = std::thread([this] {
    http_->listen_after_bind();
    listen_returned_ = true;
  });
  // httplib's stop() does nothing until the listening loop runs: a stop()
  // right after start() (a model that fails to load at once) would leave
  // the loop accepting forever and the destructor joining it.
  while (!http_->is_running() && !listen_returned_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return {};
}

void Server::attach(EngineLoop* loop, const Tokenizer* tok, const ModelConfig* cfg, const ChatTemplate* chat) {
  loop_ = loop, tok_ = tok, cfg_ = cfg, chat_ = chat;
  ready_ = true;
}

void Server::drain() {
  draining_ = true;
  while (connections_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

void Server::stop() {
  if (http_) http_->stop();
}

void Server::wait() {
  if (thread_.joinable()) thread_.join();
}

void Server::routes() {
  httplib::Server& h = *http_;
  // Bodies for the errors httplib answers itself (an oversized body, no route).
  h.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e{res.status, "", res.status >= 500 ? "server_error" : "invalid_request_error", "", ""};
    e.message = res.status == 413   ? "the request body is over the server's limit of " +
                                          std::to_string(opt_.max_body_bytes) + " bytes"
                : res.status == 404 ? "no such endpoint"
                : res.status == 405 ? "method not allowed"
                                    : "HTTP error " + std::to_string(res.status);
    res.set_content(error_body(e), "application/json");
    metrics_.http_error(res.status);
  });
  h.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {
    }
    send_error(res, metrics_, {500, what, "server_error", "", ""});
  });

  h.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (!ready_ || draining_) {
      res.status = 503;
      res.set_content(ready_ ? "draining\n" : "loading\n", "text/plain");
      return;
    }
    res.set_content("ok\n", "text/plain");
  });

  // Everything but /health: authentication, then readiness.
  auto guard = [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req.get_header_value("Authorization"))) {
      send_error(res, metrics_,
                 {401, "missing or wrong API key (Authorization: Bearer KEY)", "invalid_request_error", "",
                  "invalid_api_key"});
      return false;
    }
    if (!ready_) {
      send_error(res, metrics_, {503, "the model is loading", "server_error", "", ""});
      return false;
    }
    return true;
  };

  h.Get("/metrics", [this, guard](const httplib::Request& req, httplib::Response& res) {
    if (!guard(req, res)) return;
    res.set_content(metrics_.text(loop_->stats(), opt_.model_name), "text/plain; version=0.0.4");
  });
  auto model_json = [this] {
    return json{{"id", opt_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "replayssm"}};
  };
  h.Get("/v1/models", [this, guard, model_json](const httplib::Request& req, httplib::Response& res) {
    if (!guard(req, res)) return;
    res.set_content(json({{"object", "list"}, {"data", json::array({model_json()})}}).dump(), "application/json");
  });
  h.Get(R"(/v1/models/(.+))", [this, guard, model_json](const httplib::Request& req, httplib::Response& res) {
    if (!guard(req, res)) return;
    if (req.matches[1] != opt_.model_name)
      return send_error(res, metrics_,
                        {404, "The model `" + std::string(req.matches[1]) + "` does not exist.",
                         "invalid_request_error", "model", "model_not_found"});
    res.set_content(model_json().dump(), "application/json");
  });

  auto generate = [this, guard](const httplib::Request& req, httplib::Response& res, bool chat) {
    if (!guard(req, res)) return;
    if (draining_) return send_error(res, metrics_, {503, "the server is shutting down", "server_error", "", ""});
    json body;
    if (auto e = parse_body(req.body, &body)) return send_error(res, metrics_, *e);
    const ApiContext ctx{opt_.model_name, tok_, cfg_->vocab_size, opt_.limits};
    ApiRequest api;
    const std::optional<ApiError> err =
        chat ? parse_chat_request(body, ctx, chat_, &api) : parse_completion(body, ctx, &api);
    if (err) return send_error(res, metrics_, *err);
    // The prefix cache's partition: the caller's credentials and its salt.
    const std::string tenant = req.get_header_value("Authorization");
    for (RequestParams& p : api.prompts) {
      if (p.beam_width == 0 && opt_.spec != RequestParams::kNoSpec) p.spec = opt_.spec, p.spec_tokens = opt_.spec_tokens;
      p.cache_key = tenant + '\n' + p.cache_key;
    }
    const int64_t in_flight = loop_->in_flight();
    if (in_flight + static_cast<int64_t>(api.prompts.size()) > opt_.max_queue)
      return send_error(res, metrics_,
                        {503, "the server is busy: " + std::to_string(in_flight) + " requests in flight (limit " +
                                  std::to_string(opt_.max_queue) + ")",
                         "server_error", "", ""});

    auto ex = std::make_shared<Exchange>(*this, std::move(api));
    connections_++;
    metrics_.request_started();
    struct Leave {  // the connection's count, however the exchange ends
      explicit Leave(Server* srv) : s(srv) {}
      Leave(const Leave&) = delete;
      Leave& operator=(const Leave&) = delete;
      ~Leave() { s->connections_--; }
      Server* s;
    };
    auto leave = std::make_shared<Leave>(this);
    if (Status st = ex->submit(); !st.ok()) {
      ex->cancel();
      ex->error = st;
      ex->end();
      return send_error(res, metrics_, from_status(st));
    }
    // Until the first token (or the end) the status can still be an error.
    while (ex->first_token < 0 && !ex->finished()) ex->step();
    if (!ex->error.ok()) {
      ex->end();
      return send_error(res, metrics_, from_status(ex->error));
    }
    if (!ex->req.stream && ex->finished()) {
      ex->end();
      if (!ex->error.ok()) return send_error(res, metrics_, from_status(ex->error));
      res.set_content(ex->response().dump(), "application/json");
      return;
    }
    if (!ex->req.stream) {
      // The body is written when the completion ends. Until then a space
      // (JSON's leading whitespace) each kProbe seconds finds out whether
      // the client is still there: a write to a closed connection fails,
      // and the request is cancelled, its state freed, instead of running
      // for no one.
      // A content type httplib does not compress: a compressor would hold
      // the probes back, and a client that left would go unnoticed.
      res.set_chunked_content_provider(
          "application/json; charset=utf-8",
          [ex, leave, last = now_seconds()](size_t, httplib::DataSink& sink) mutable {
            if (ex->finished()) {
              ex->end();
              // A failure after the status was sent: the error body (rare:
              // the engine failed mid-request).
              const std::string body = ex->error.ok() ? ex->response().dump() : error_body(from_status(ex->error));
              const bool ok = sink.write(body.data(), body.size());
              if (ok) sink.done();
              return ok;
            }
            ex->step();
            if (now_seconds() - last > kProbe) {
              last = now_seconds();
              if (!sink.write(" ", 1)) {
                ex->cancel();
                ex->end();
                return false;
              }
            }
            return true;
          },
          [ex](bool) {
            if (!ex->finished()) ex->cancel();
            ex->end();
          });
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [ex, leave, last = now_seconds()](size_t, httplib::DataSink& sink) mutable {
          auto write = [&](const std::string& s) {
            if (s.empty()) return true;
            last = now_seconds();
            return sink.write(s.data(), s.size());
          };
          if (!write(ex->stream_events())) {
            ex->cancel();  // the client is gone: its sequences go now
            ex->end();
            return false;
          }
          if (ex->finished()) {
            std::string tail;
            if (!ex->error.ok()) {
              // Mid-stream: the error as an event, then the end.
              tail += "data: " + error_body(from_status(ex->error)) + "\n\n";
            } else if (ex->req.include_usage) {
              tail += "data: " +
                      json({{"id", ex->id},
                            {"object", ex->req.chat ? "chat.completion.chunk" : "text_completion"},
                            {"created", ex->created},
                            {"model", ex->req.model},
                            {"choices", json::array()},
                            {"usage", ex->usage()}})
                          .dump() +
                      "\n\n";
            }
            tail += "data: [DONE]\n\n";
            const bool ok = write(tail);
            ex->end();
            if (ok) sink.done();
            return ok;
          }
          if (!ex->step() && now_seconds() - last > kKeepAlive && !write(": keep-alive\n\n")) {
            ex->cancel();
            ex->end();
            return false;
          }
          return true;
        },
        [ex](bool) {
          if (!ex->finished()) ex->cancel();
          ex->end();
        });
  };
  h.Post("/v1/completions", [generate](const httplib::Request& req, httplib::Response& res) { generate(req, res, false); });
  h.Post("/v1/chat/completions",
         [generate](const httplib::Request& req, httplib::Response& res) { generate(req, res, true); });
}

}  // namespace replayssm::serve
