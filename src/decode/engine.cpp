// Engine (see include/replayssm/engine.h).
#include "replayssm/engine.h"

#include <algorithm>

#include "core/clock.h"
#include "decode/sampler.h"
#include "decode/session.h"

namespace replayssm {

struct Engine::Request {
  RequestParams p;
  Callback cb;
  Sampler sampler;
  int64_t seq = -1;
  int64_t fed = 0;           // prompt tokens fed so far
  int32_t pending = -1;      // sampled, not yet fed
  std::vector<int32_t> out;
  bool done = false;
  Request(RequestParams params, Callback c)
      : p(std::move(params)), cb(std::move(c)), sampler({p.temperature, p.top_p, p.seed}) {}
};

Status EngineOptions::validate() const {
  RSSM_RETURN_IF_ERROR(store.validate());
  if (max_batch_tokens < 1) return invalid_argument("engine: max_batch_tokens must be >= 1");
  if (prefill_chunk < 1) return invalid_argument("engine: prefill_chunk must be >= 1");
  if (max_running < 1) return invalid_argument("engine: max_running must be >= 1");
  return {};
}

Engine::Engine(const Model& model, const EngineOptions& opt, std::unique_ptr<Session> s)
    : model_(model), opt_(opt), session_(std::move(s)) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(const Model& model, const EngineOptions& opt) {
  RSSM_RETURN_IF_ERROR(opt.validate());
  RSSM_ASSIGN_OR_RETURN(auto session, Session::create(model, opt.store));
  return std::unique_ptr<Engine>(new Engine(model, opt, std::move(session)));
}

const ReplayStore& Engine::store() const { return session_->store(); }

Result<Engine::RequestId> Engine::submit(RequestParams params, Callback on_token) {
  const int64_t V = model_.config().vocab_size;
  if (params.prompt.empty()) return invalid_argument("request: the prompt is empty");
  for (int32_t t : params.prompt)
    if (t < 0 || t >= V)
      return invalid_argument("request: token id " + std::to_string(t) + " out of range [0, " + std::to_string(V) + ")");
  if (params.max_new_tokens < 1) return invalid_argument("request: max_new_tokens must be >= 1");
  RSSM_RETURN_IF_ERROR(check_sampling({params.temperature, params.top_p, 0}, "request"));
  if (params.state_budget < 0)
    return invalid_argument("request: state_budget must be >= 0 (0: no cap), got " +
                            std::to_string(params.state_budget));
  const RequestId id = static_cast<RequestId>(requests_.size());
  requests_.push_back(std::make_unique<Request>(std::move(params), std::move(on_token)));
  waiting_.push_back(id);
  stats_.max_waiting = std::max<int64_t>(stats_.max_waiting, static_cast<int64_t>(waiting_.size()));
  return id;
}

void Engine::finish(RequestId id, int32_t token, Status error) {
  Request& r = *requests_[id];
  r.done = true;
  if (r.seq >= 0) (void)session_->store().release(r.seq);
  r.seq = -1;
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), id), waiting_.end());
  running_.erase(std::remove(running_.begin(), running_.end(), id), running_.end());
  if (r.cb) r.cb(TokenEvent{id, token, true, std::move(error)});
}

Status Engine::cancel(RequestId id) {
  if (id < 0 || id >= static_cast<RequestId>(requests_.size()) || requests_[id]->done)
    return invalid_argument("cancel: no live request " + std::to_string(id));
  finish(id, -1, {});
  return {};
}

bool Engine::idle() const { return waiting_.empty() && running_.empty(); }

bool Engine::admit_one(int64_t* reserved) {
  if (waiting_.empty() || static_cast<int64_t>(running_.size()) >= opt_.max_running) return false;
  const RequestId id = waiting_.front();
  Request& r = *requests_[id];
  // What its first step needs: a checkpoint and the log pages of one
  // prompt chunk (+1 for a page boundary).
  const ReplayStore& st = session_->store();
  const StoreOptions& so = opt_.store;
  const int64_t chunk = std::min<int64_t>(opt_.prefill_chunk, static_cast<int64_t>(r.p.prompt.size()));
  const int64_t pages = (chunk + so.page_size - 1) / so.page_size + 1;
  const int64_t estimate = st.checkpoint_bytes() + pages * st.page_log_bytes();
  if (so.state_budget > 0 && st.stats().state_bytes + *reserved + estimate > so.state_budget && !running_.empty())
    return false;  // wait: running requests free memory as they finish
  *reserved += estimate;
  waiting_.erase(waiting_.begin());
  r.seq = session_->store().add_sequence(r.p.state_budget);
  running_.push_back(id);
  stats_.max_running = std::max<int64_t>(stats_.max_running, static_cast<int64_t>(running_.size()));
  return true;
}

Status Engine::step() {
  int64_t reserved = 0;  // estimates of requests admitted in this step
  while (admit_one(&reserved)) {
  }
  if (running_.empty()) return {};
  const int64_t V = model_.config().vocab_size;
  // Decode tokens first (latency), then prompt chunks in admission order.
  std::vector<StepInput> in;
  std::vector<RequestId> who;
  int64_t budget = opt_.max_batch_tokens;
  for (RequestId id : running_) {
    Request& r = *requests_[id];
    if (r.pending < 0 || budget == 0) continue;
    in.push_back({r.seq, {&r.pending, 1}});
    who.push_back(id);
    --budget;
  }
  const size_t n_decode = in.size();
  for (RequestId id : running_) {
    Request& r = *requests_[id];
    if (r.pending >= 0 || budget == 0) continue;
    const int64_t left = static_cast<int64_t>(r.p.prompt.size()) - r.fed;
    const int64_t n = std::min({left, opt_.prefill_chunk, budget});
    const bool last = n == left;
    in.push_back({r.seq, std::span<const int32_t>(r.p.prompt).subspan(r.fed, n), true,
                  last ? StepInput::kLast : StepInput::kNone});
    who.push_back(id);
    budget -= n;
  }
  if (in.empty()) return {};
  std::vector<float> logits;
  const double t0 = now_seconds();
  Status st = session_->step(in, &logits);
  // The store could not fit the batch: keep the decodes and at most one
  // prompt chunk, then decodes alone; prompts dropped from the batch wait
  // (running decodes free memory as they finish). A request that cannot fit
  // even alone ends with the error.
  for (size_t keep : {n_decode + 1, n_decode}) {
    if (st.ok() || st.code() != StatusCode::kOutOfBudget || keep == 0 || keep >= in.size()) continue;
    for (size_t i = keep; i < in.size(); ++i) {
      Request& r = *requests_[who[i]];
      if (r.fed > 0) continue;  // partly prefilled: stays admitted
      (void)session_->store().release(r.seq);
      r.seq = -1;
      running_.erase(std::remove(running_.begin(), running_.end(), who[i]), running_.end());
      waiting_.insert(waiting_.begin(), who[i]);
    }
    in.resize(keep);
    who.resize(keep);
    st = session_->step(in, &logits);
  }
  if (!st.ok() && st.code() == StatusCode::kOutOfBudget && in.size() == 1) {
    finish(who[0], -1, st);
    return {};
  }
  RSSM_RETURN_IF_ERROR(st);
  stats_.steps++;
  const bool prefill = in.size() > n_decode;
  stats_.prefill_steps += prefill;
  (prefill ? stats_.prefill_step_s : stats_.decode_step_s) += now_seconds() - t0;
  int64_t rows = 0;
  size_t row = 0;  // index into the logits rows
  for (size_t i = 0; i < in.size(); ++i) {
    Request& r = *requests_[who[i]];
    rows += static_cast<int64_t>(in[i].tokens.size());
    if (i < n_decode) stats_.decode_tokens++;
    else {
      stats_.prefill_tokens += static_cast<int64_t>(in[i].tokens.size());
      r.fed += static_cast<int64_t>(in[i].tokens.size());
      if (in[i].logits == StepInput::kNone) continue;
    }
    const std::span<const float> lrow(logits.data() + row * V, V);
    ++row;
    // An earlier request's callback may have cancelled this one during
    // this loop: its finished event was its last.
    if (r.done) continue;
    const int32_t t = r.sampler.sample(lrow);
    r.out.push_back(t);
    const bool end = static_cast<int64_t>(r.out.size()) >= r.p.max_new_tokens ||
                     (r.p.stop_at_eos && model_.config().is_eos(t));
    r.pending = t;
    if (end) finish(who[i], t, {});
    else if (r.cb) r.cb(TokenEvent{who[i], t, false, {}});
  }
  stats_.max_batch_rows = std::max(stats_.max_batch_rows, rows);
  return {};
}

Status Engine::run() {
  while (!idle()) {
    const int64_t before = stats_.steps;
    const size_t running = running_.size(), waiting = waiting_.size();
    RSSM_RETURN_IF_ERROR(step());
    if (stats_.steps == before && running_.size() == running && waiting_.size() == waiting)
      return out_of_budget("engine: no request can make progress within the state budget");
  }
  return {};
}

Result<std::vector<int32_t>> Engine::output(RequestId id) const {
  if (id < 0 || id >= static_cast<RequestId>(requests_.size()))
    return invalid_argument("no request " + std::to_string(id));
  return requests_[id]->out;
}

}  // namespace replayssm
