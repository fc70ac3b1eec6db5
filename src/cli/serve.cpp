// `replayssm serve`: the OpenAI-compatible server (src/serve) on one model.
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
#include "io/tokenizer.h"
#include "replayssm/make_backend.h"
#include "serve/chat_template.h"
#include "serve/engine_loop.h"
#include "serve/server.h"

namespace replayssm::cli {

Result<Tokenizer> load_tokenizer(const std::string& file, const std::string& model_dir);

namespace {

struct ServeArgs {
  std::string model = REPLAYSSM_DEFAULT_MODEL, served_name, chat_template, device = "cpu", spec;
  serve::ServeOptions http;
  StateArgs state;
  int64_t max_running = 256, max_batch_tokens = 1024, prefill_chunk = 256;
  bool no_request_log = false;
};

// "ngram:T" or "draft:DIR:T".
Status parse_spec_arg(const std::string& text, RequestParams::Spec* kind, int64_t* tokens, std::string* dir) {
  auto bad = [&] { return invalid_argument("--spec: '" + text + "' (expected ngram:T or draft:DIR:T)"); };
  const size_t last = text.rfind(':');
  if (last == std::string::npos) return bad();
  try {
    size_t used = 0;
    *tokens = std::stoll(text.substr(last + 1), &used);
    if (used != text.size() - last - 1) return bad();
  } catch (...) {
    return bad();
  }
  if (*tokens < 1 || *tokens > 64) return invalid_argument("--spec: draft length must be in [1, 64]");
  if (text.compare(0, 6, "ngram:") == 0 && last == 5) {
    *kind = RequestParams::kNgram;
    return {};
  }
  if (text.compare(0, 6, "draft:") == 0 && last > 6) {
    *kind = RequestParams::kDraft;
    *dir = text.substr(6, last - 6);
    return {};
  }
  return bad();
}

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
  RSSM_RETURN_IF_ERROR(positive(a.max_running, "--max-running"));
  RSSM_RETURN_IF_ERROR(positive(a.max_batch_tokens, "--max-batch-tokens"));
  RSSM_RETURN_IF_ERROR(positive(a.prefill_chunk, "--prefill-chunk"));
  if (a.http.port < 0 || a.http.port > 65535)
    return invalid_argument("--port: must be in [0, 65535], got " + std::to_string(a.http.port));
  if (a.http.http_threads < 0) return invalid_argument("--http-threads: must be >= 0");
  return {};
}

Status run_serve(ServeArgs a) {
  RSSM_RETURN_IF_ERROR(check_device(a.device));
  RSSM_RETURN_IF_ERROR(check_limits(a));
  RSSM_ASSIGN_OR_RETURN(StateOptions sopt, state_options(a.state));
  RequestParams::Spec spec = RequestParams::kNoSpec;
  int64_t spec_tokens = 0;
  std::string draft_dir;
  if (!a.spec.empty()) RSSM_RETURN_IF_ERROR(parse_spec_arg(a.spec, &spec, &spec_tokens, &draft_dir));
  a.http.model_name = a.served_name.empty() ? a.model : a.served_name;
  a.http.log_requests = !a.no_request_log;
  a.http.spec = spec;
  a.http.spec_tokens = spec_tokens;

  // Signals go to one thread, which drains the server (set before any
  // other thread exists, so every thread inherits the mask).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  serve::Server server(a.http);
  RSSM_RETURN_IF_ERROR(server.start());
  std::fprintf(stderr, "serve: listening on %s:%d (loading %s)\n", a.http.host.c_str(), server.port(), a.model.c_str());
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

  auto model = Model::load(a.model);
  if (!model.ok()) return fail(model.status());
  auto tok = load_tokenizer("", a.model);
  if (!tok.ok()) return fail(tok.status());
  auto backend = make_backend(a.device, **model);
  if (!backend.ok()) return fail(backend.status());
  std::unique_ptr<Model> draft_model;
  std::unique_ptr<Backend> draft_backend;
  if (spec == RequestParams::kDraft) {
    auto dm = Model::load(draft_dir);
    if (!dm.ok()) return fail(dm.status());
    draft_model = std::move(*dm);
    auto db = make_backend(a.device, *draft_model);
    if (!db.ok()) return fail(db.status());
    draft_backend = std::move(*db);
  }
  auto chat = serve::ChatTemplate::load(a.chat_template, a.model);
  if (!chat.ok()) return fail(chat.status());
  EngineOptions eo;
  eo.state = sopt;
  eo.max_running = a.max_running;
  eo.max_batch_tokens = a.max_batch_tokens;
  eo.prefill_chunk = a.prefill_chunk;
  eo.draft = draft_backend.get();
  auto engine = Engine::create(**backend, eo);
  if (!engine.ok()) return fail(engine.status());
  serve::EngineLoop loop(std::move(*engine));
  server.attach(&loop, &*tok, &(*model)->config(), chat->has_value() ? &**chat : nullptr);
  std::fprintf(stderr, "serve: ready: model %s on %s%s\n", a.http.model_name.c_str(), a.device.c_str(),
               chat->has_value() ? "" : " (no chat template: /v1/chat/completions refuses)");
  server.wait();
  waiter.join();
  std::fprintf(stderr, "serve: stopped\n");
  return {};
}

}  // namespace

Runner add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  app.add_option("--model", a->model, "Model directory (default: the embedded NemotronH-style model)")
      ->capture_default_str();
  app.add_option("--served-model-name", a->served_name, "The model's id in the API (default: --model)");
  app.add_option("--chat-template", a->chat_template,
                 "Jinja chat template file (default: the model's tokenizer_config.json or chat_template.jinja)");
  app.add_option("--device", a->device, "cpu or cuda")->capture_default_str();
  app.add_option("--host", a->http.host, "Address to listen on (loopback by default)")->capture_default_str();
  app.add_option("--port", a->http.port, "Port (0: any free one, printed at start)")->capture_default_str();
  app.add_option("--api-key", a->http.api_key, "Require 'Authorization: Bearer KEY' on every endpoint but /health");
  app.add_option("--spec", a->spec, "Speculative decoding for every request: ngram:T or draft:DIR:T");
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
  app.add_option("--max-running", a->max_running, "Requests the engine batches at once")->capture_default_str();
  app.add_option("--max-batch-tokens", a->max_batch_tokens, "Rows of one engine step")->capture_default_str();
  app.add_option("--prefill-chunk", a->prefill_chunk, "Prompt tokens per request per step")->capture_default_str();
  app.add_option("--http-threads", a->http.http_threads, "Connection workers (0: --max-queue + 16)")
      ->capture_default_str();
  app.add_flag("--no-request-log", a->no_request_log, "Do not log one line per request on stderr");
  add_state_options(app, &a->state);
  return [a] { return run_serve(*a); };
}

}  // namespace replayssm::cli
