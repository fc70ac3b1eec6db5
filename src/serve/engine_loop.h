// EngineLoop: the Engine on a thread of its own, for a server whose
// connections each wait on one request.
//
// The Engine is driven by one thread; connections submit from theirs. So
// submissions go through an inbox the loop thread drains before each step,
// and each request's events reach its connection through a Channel (a
// queue with a condition variable) that the engine's callback fills on the
// loop thread. Cancels and stop-string ends go straight to the engine
// (Engine::cancel_async, stop_async: thread-safe). The loop sleeps while
// the engine is idle and its inbox empty.
//
// Thread safety: every public method may be called from any thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "replayssm/engine.h"

namespace replayssm::serve {

// One request's events, in order, from the loop thread to its connection.
class Channel {
 public:
  void push(TokenEvent e);
  // The next event, or nullopt after `timeout` without one.
  std::optional<TokenEvent> pop(std::chrono::milliseconds timeout);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> q_;
};

// What /metrics reads: a copy taken after each step.
struct LoopStats {
  EngineStats engine;
  StateStats state;
  int64_t running = 0, waiting = 0;
  int64_t checkpoint_bytes = 0, page_log_bytes = 0;  // one checkpoint, one page's log
};

class EngineLoop {
 public:
  explicit EngineLoop(std::unique_ptr<Engine> engine);
  ~EngineLoop();  // stops the thread; unfinished requests are cancelled
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Queues a request; its events go to `channel` (which must outlive the
  // request's last event: its finished events). Fails with the engine's
  // refusal of the request.
  Result<Engine::RequestId> submit(RequestParams p, std::shared_ptr<Channel> channel);
  void cancel(Engine::RequestId id);
  void stop_completion(Engine::RequestId id, int64_t index);

  LoopStats stats() const;
  // Requests submitted and not yet finished.
  int64_t in_flight() const;
  // An engine failure that is no request's own (the backend's), if any: the
  // loop stops stepping after it.
  Status failure() const;

 private:
  struct Submission {
    RequestParams p;
    std::shared_ptr<Channel> channel;
    std::promise<Result<Engine::RequestId>>* result;
  };
  void run();

  std::unique_ptr<Engine> engine_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Submission> inbox_;
  bool stop_ = false;
  LoopStats stats_;
  Status failure_;
  int64_t in_flight_ = 0;
  Engine::RequestId submitted_ = 0;  // ids below this were handed out (loop thread only)
  std::thread thread_;
};

}  // namespace replayssm::serve
