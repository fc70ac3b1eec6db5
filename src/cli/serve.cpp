// `replayssm serve`: the OpenAI-compatible server (src/serve) on one model,
// or on random weights at a published shape (--preset, for benchmarks).
//
// The port is bound first, so /health answers 503 while the model loads;
// then the backend, the engine and its loop, and the chat template. SIGTERM
// or SIGINT drains: new requests get 503, those in flight finish, and the
// command exits 0.
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/served_model.h"
#include "serve/chat_template.h"
#include "serve/engine_loop.h"
#include "serve/server.h"

namespace replayssm::cli {

namespace {

struct ServeArgs {
  ServedModelArgs m;
  std::string served_name, chat_template;
  serve::ServeOptions http;
  bool no_request_log = false;
};

Status check_limits(const ServeArgs& a) {
  auto positive = [](int64_t v, const char* name) -> Status {
    if (v < 1) return invalid_argument(std::string(name) + ": must be >= 1, got " + std::to_string(v));
    return {};
  };
  const serve::Limits& l = a.http.limits;
  RSSM_RETURN_IF_ERROR(positive(l.max_tokens, "--max-tokens"));
  RSSM_RETURN_IF_ERROR(positive(l.max_n, "--max-n"));
  RSSM_RETURN_IF_ERROR(positive(l.max_beam, "--max-beam"));
  RSSM_RETURN_IF_ERROR(positive(l.max_prompt_tokens, "--max-prompt-tokens"));
  RSSM_RETURN_IF_ERROR(positive(a.http.max_queue, "--max-queue"));
  RSSM_RETURN_IF_ERROR(positive(a.http.max_body_bytes, "--max-body-bytes"));
  if (a.http.port < 0 || a.http.port > 65535)
    return invalid_argument("--port: must be in [0, 65535], got " + std::to_string(a.http.port));
  if (a.http.http_threads < 0) return invalid_argument("--http-threads: must be >= 0");
  if (!a.m.preset.empty() && !a.chat_template.empty())
    return invalid_argument("--chat-template: a --preset model has no tokenizer, so no chat");
  return check_served_model_args(a.m);
}

Status run_serve(ServeArgs a) {
  // Signals go to one thread, which drains the server. The mask is set
  // before any other thread exists, so every thread inherits it: the CUDA
  // runtime starts its own threads when the device is first probed (in
  // check_limits), and a signal delivered to one of those would kill the
  // process undrained.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  RSSM_RETURN_IF_ERROR(check_limits(a));
  const std::string source = a.m.preset.empty() ? a.m.model : a.m.preset;
  a.http.model_name = a.served_name.empty() ? source : a.served_name;
  a.http.log_requests = !a.no_request_log;
  a.http.prefix_cache = !a.m.no_prefix_cache;
  if (!a.m.spec.empty()) {
    std::string draft_dir;
    RSSM_RETURN_IF_ERROR(parse_spec_arg(a.m.spec, &a.http.spec, &a.http.spec_tokens, &draft_dir));
  }

  serve::Server server(a.http);
  RSSM_RETURN_IF_ERROR(server.start());
  std::fprintf(stderr, "serve: listening on %s:%d (loading %s)\n", a.http.host.c_str(), server.port(), source.c_str());
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::fprintf(stderr, "serve: %s: draining\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    server.drain();
    server.stop();
  });
  // Whatever fails from here stops the server before returning.
  auto fail = [&](Status st) {
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
    return st;
  };

  auto m = load_served_model(a.m);
  if (!m.ok()) return fail(m.status());
  ServedModel& sm = **m;
  auto chat = a.m.preset.empty() ? serve::ChatTemplate::load(a.chat_template, a.m.model)
                                 : Result<std::optional<serve::ChatTemplate>>(std::optional<serve::ChatTemplate>());
  if (!chat.ok()) return fail(chat.status());
  serve::EngineLoop loop(std::move(sm.engine));
  const Tokenizer* tok = sm.tokenizer ? &*sm.tokenizer : nullptr;
  server.attach(&loop, tok, &sm.model->config(), chat->has_value() ? &**chat : nullptr);
  std::fprintf(stderr, "serve: ready: model %s on %s%s\n", a.http.model_name.c_str(), a.m.device.c_str(),
               tok == nullptr      ? " (no tokenizer: token-id prompts only, empty texts)"
               : chat->has_value() ? ""
                                   : " (no chat template: /v1/chat/completions refuses)");
  server.wait();
  waiter.join();
  std::fprintf(stderr, "serve: stopped\n");
  return {};
}

}  // namespace

Runner add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  add_served_model_options(app, &a->m);
  app.add_option("--served-model-name", a->served_name, "The model's id in the API (default: --model or --preset)");
  app.add_option("--chat-template", a->chat_template,
                 "Jinja chat template file (default: the model's tokenizer_config.json or chat_template.jinja)");
  app.add_option("--host", a->http.host, "Address to listen on (loopback by default)")->capture_default_str();
  app.add_option("--port", a->http.port, "Port (0: any free one, printed at start)")->capture_default_str();
  app.add_option("--api-key", a->http.api_key, "Require 'Authorization: Bearer KEY' on every endpoint but /health");
  app.add_option("--max-tokens", a->http.limits.max_tokens, "Most new tokens a request may ask for")
      ->capture_default_str();
  app.add_option("--max-n", a->http.limits.max_n, "Most completions a request may ask for (n, best_of)")
      ->capture_default_str();
  app.add_option("--max-beam", a->http.limits.max_beam, "Widest beam search a request may ask for")
      ->capture_default_str();
  app.add_option("--max-prompt-tokens", a->http.limits.max_prompt_tokens, "Most tokens a prompt may have")
      ->capture_default_str();
  app.add_option("--max-queue", a->http.max_queue, "Requests in flight (running and waiting); more get 503")
      ->capture_default_str();
  app.add_option("--max-body-bytes", a->http.max_body_bytes, "Largest request body; larger get 413")
      ->capture_default_str();
  app.add_option("--http-threads", a->http.http_threads, "Connection workers (0: --max-queue + 16)")
      ->capture_default_str();
  app.add_flag("--no-request-log", a->no_request_log, "Do not log one line per request on stderr");
  return [a] { return run_serve(*a); };
}

}  // namespace replayssm::cli
