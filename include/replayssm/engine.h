// Engine: continuous batching of many requests over one model and one
// replay store — the C++ API a serving loop drives.
//
// Requests join (submit) and leave (finish, cancel) between steps. Each
// step is one batched forward: a decode token for every running request,
// then prompt chunks (at most prefill_chunk tokens per request) for the
// requests still prefilling, up to max_batch_tokens. A waiting request is
// admitted only while its estimated state fits the store's budget (or when
// nothing else runs, leaving the rest to the store's eviction). Tokens are
// streamed through the request's callback as they are chosen.
//
// Not thread-safe: one thread calls submit/step/cancel.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "replayssm/model.h"
#include "replayssm/replay_store.h"

namespace replayssm {

class Session;

struct RequestParams {
  std::vector<int32_t> prompt;
  int64_t max_new_tokens = 16;
  float temperature = 0.0f;  // 0 = greedy
  float top_p = 1.0f;
  uint64_t seed = 0;
  bool stop_at_eos = true;
  int64_t state_budget = 0;  // bytes for this request's state (0 = no cap)
};

struct EngineOptions {
  StoreOptions store;
  int64_t max_batch_tokens = 256;  // tokens in one step
  int64_t prefill_chunk = 64;      // prompt tokens per request per step
  int64_t max_running = 64;        // requests admitted at once
  Status validate() const;
};

struct TokenEvent {
  int64_t request = 0;
  int32_t token = -1;      // -1 when the event only reports an end
  bool finished = false;   // no more events for this request
  Status error;            // why it ended early (e.g. kOutOfBudget), ok otherwise
};

struct EngineStats {
  int64_t steps = 0, prefill_tokens = 0, decode_tokens = 0;
  int64_t max_batch_rows = 0, max_running = 0, max_waiting = 0;
  // Steps in which some request took prompt tokens, and the wall time of
  // the model's passes (a step returns its tokens to the host, so each is
  // timed whole): where a serving run's time goes.
  int64_t prefill_steps = 0;
  double prefill_step_s = 0.0, decode_step_s = 0.0;
};

class Engine {
 public:
  using RequestId = int64_t;
  using Callback = std::function<void(const TokenEvent&)>;

  static Result<std::unique_ptr<Engine>> create(const Model& model, const EngineOptions& opt);
  ~Engine();

  // Queues a request; checks its prompt (non-empty, ids in the vocabulary).
  Result<RequestId> submit(RequestParams params, Callback on_token = {});
  // Ends a waiting or running request (its callback gets a finished event).
  Status cancel(RequestId id);
  // One batched step. Fails only on errors that are not a request's own
  // (those end the request through its callback).
  Status step();
  // Steps until every request has finished.
  Status run();
  bool idle() const;
  // Tokens generated so far for a request that has not been forgotten.
  Result<std::vector<int32_t>> output(RequestId id) const;

  const EngineStats& stats() const { return stats_; }
  const ReplayStore& store() const;

 private:
  struct Request;
  Engine(const Model& model, const EngineOptions& opt, std::unique_ptr<Session> s);
  // Ends a request: releases its sequence, drops it from the queues and
  // sends the final event (with `token` if one was just chosen).
  void finish(RequestId id, int32_t token, Status error);
  bool admit_one(int64_t* reserved);

  const Model& model_;
  EngineOptions opt_;
  std::unique_ptr<Session> session_;
  std::vector<std::unique_ptr<Request>> requests_;  // index = id
  std::vector<RequestId> waiting_, running_;
  EngineStats stats_;
};

}  // namespace replayssm
