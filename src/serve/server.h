// Server: the OpenAI-compatible HTTP API over one engine (replayssm serve).
//
//   POST /v1/completions, POST /v1/chat/completions   (JSON, or SSE with stream)
//   GET  /v1/models, /v1/models/{id}, /health, /metrics
//
// Each connection runs on a worker of cpp-httplib's pool (sized so that
// every request the engine may run at once has one, and then some): it
// checks the request (openai.h), submits one engine request per prompt to
// the engine loop (engine_loop.h) and waits on their events. A streaming
// response is sent as the tokens come (SSE, `data: [DONE]` last), its text
// through a TextStream per completion (stop strings across token
// boundaries, never half a character); a client that goes away is found at
// the next write — a token, or a keep-alive comment once a second — and its
// requests are cancelled at once, freeing their sequences and pages. A
// non-streaming response is sent whole at the end.
//
// The server starts before the model is loaded (/health answers 503 until
// attach()), binds to loopback unless told otherwise, needs `Authorization:
// Bearer KEY` on every endpoint but /health when it has an API key (compared
// in constant time), and drains on request: new requests get 503 while
// those in flight finish.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "io/tokenizer.h"
#include "replayssm/model_config.h"
#include "serve/engine_loop.h"
#include "serve/metrics.h"
#include "serve/openai.h"

namespace httplib {
class Server;
}

namespace replayssm::serve {

class ChatTemplate;

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                  // 0: any free port (port() says which)
  std::string api_key;              // empty: no authentication
  std::string model_name;           // the id clients name in 'model'
  Limits limits;
  int64_t max_queue = 256;          // requests accepted and unfinished; more get 503
  int64_t max_body_bytes = 4 << 20; // a request body's bytes; more get 413
  int http_threads = 0;             // connection workers (0: max_queue + 16)
  bool log_requests = true;         // one line per request on stderr
  // Speculation for every request but beam searches (--spec).
  RequestParams::Spec spec = RequestParams::kNoSpec;
  int64_t spec_tokens = 4;
  // The engine keeps a prefix cache: usage reports cached_tokens.
  bool prefix_cache = false;
};

class Server {
 public:
  explicit Server(ServeOptions opt);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and serves on a thread of its own; returns once the port is bound
  // (or why it could not be).
  Status start();
  int port() const { return port_; }
  // What requests are served with, from now on (all must outlive the
  // server). `chat` may be null: chat requests then get a 400 saying the
  // model has no chat template.
  void attach(EngineLoop* loop, const Tokenizer* tok, const ModelConfig* cfg, const ChatTemplate* chat);
  // New requests get 503 from now on; returns once those in flight finished.
  void drain();
  void stop();
  // Blocks until the server stops.
  void wait();

  const Metrics& metrics() const { return metrics_; }

 private:
  struct Exchange;  // one HTTP request's generation (server.cpp)
  void routes();
  bool authorized(const std::string& header) const;

  ServeOptions opt_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> ready_{false}, draining_{false}, listen_returned_{false};
  std::atomic<int64_t> connections_{0};  // generation requests being answered
  EngineLoop* loop_ = nullptr;
  const Tokenizer* tok_ = nullptr;
  const ModelConfig* cfg_ = nullptr;
  const ChatTemplate* chat_ = nullptr;
  Metrics metrics_;
  std::atomic<uint64_t> next_id_{0};
};

}  // namespace replayssm::serve
