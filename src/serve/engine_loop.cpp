// EngineLoop (see engine_loop.h).
#include "serve/engine_loop.h"

namespace replayssm::serve {

void Channel::push(TokenEvent e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    q_.push_back(std::move(e));
  }
  cv_.notify_one();
}

std::optional<TokenEvent> Channel::pop(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return !q_.empty(); })) return std::nullopt;
  TokenEvent e = std::move(q_.front());
  q_.pop_front();
  return e;
}

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {
  stats_.checkpoint_bytes = engine_->state().checkpoint_bytes();
  stats_.page_log_bytes = engine_->state().page_log_bytes();
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

Result<Engine::RequestId> EngineLoop::submit(RequestParams p, std::shared_ptr<Channel> channel) {
  std::promise<Result<Engine::RequestId>> result;
  std::future<Result<Engine::RequestId>> f = result.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return unsupported("server: shutting down");
    inbox_.push_back({std::move(p), std::move(channel), &result});
  }
  wake_.notify_all();
  return f.get();
}

void EngineLoop::cancel(Engine::RequestId id) {
  engine_->cancel_async(id);
  wake_.notify_all();
}

void EngineLoop::stop_completion(Engine::RequestId id, int64_t index) {
  engine_->stop_async(id, index);
  wake_.notify_all();
}

LoopStats EngineLoop::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

int64_t EngineLoop::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

Status EngineLoop::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void EngineLoop::run() {
  for (;;) {
    std::vector<Submission> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Idle: sleep until a submission (or a cancel of one just submitted) comes.
      wake_.wait(lock, [this] { return stop_ || !inbox_.empty() || (!engine_->idle() && failure_.ok()); });
      if (stop_) break;
      batch.swap(inbox_);
    }
    for (Submission& s : batch) {
      std::shared_ptr<Channel> ch = s.channel;
      Result<Engine::RequestId> id = engine_->submit(std::move(s.p), [this, ch](const TokenEvent& e) {
        ch->push(e);
        // A request ends with the finished event of its last completion;
        // its own bookkeeping (Engine::running/waiting) tells when.
      });
      if (id.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        ++in_flight_;
        submitted_ = std::max(submitted_, *id + 1);
      }
      s.result->set_value(std::move(id));
    }
    const int64_t finished_before = engine_->stats().finished;
    const Status st = engine_->idle() ? Status() : engine_->step();
    std::lock_guard<std::mutex> lock(mu_);
    if (!st.ok()) failure_ = st;
    in_flight_ -= engine_->stats().finished - finished_before;
    stats_.engine = engine_->stats();
    stats_.state = engine_->state().stats();
    stats_.running = engine_->running();
    stats_.waiting = engine_->waiting();
  }
  // Whatever still runs ends now: its connections get their finished events.
  for (Engine::RequestId id = 0; id < submitted_; ++id) (void)engine_->cancel(id);
}

}  // namespace replayssm::serve
