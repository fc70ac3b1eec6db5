// Engine (see include/replayssm/engine.h).
#include "replayssm/engine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/clock.h"
#include "ops/cpu/sampling.h"
#include "workloads/beam_search.h"
#include "workloads/engine_request.h"
#include "workloads/prefix_cache.h"
#include "workloads/sampler.h"
#include "workloads/session.h"
#include "workloads/speculative.h"

namespace replayssm {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "?";
}

namespace {

bool ends_with_stop(const std::vector<int32_t>& t, const std::vector<std::vector<int32_t>>& stop) {
  for (const std::vector<int32_t>& s : stop)
    if (!s.empty() && s.size() <= t.size() && std::equal(s.begin(), s.end(), t.end() - static_cast<long>(s.size())))
      return true;
  return false;
}

double mean_logprob(const Completion& c) {
  return c.tokens.empty() ? 0.0 : std::accumulate(c.logprobs.begin(), c.logprobs.end(), 0.0) / c.tokens.size();
}

}  // namespace

Status EngineOptions::validate() const {
  RSSM_RETURN_IF_ERROR(state.validate());
  if (max_batch_tokens < 1) return invalid_argument("engine: max_batch_tokens must be >= 1");
  if (prefill_chunk < 1) return invalid_argument("engine: prefill_chunk must be >= 1");
  if (max_running < 1) return invalid_argument("engine: max_running must be >= 1");
  if (prefix_cache.max_bytes < 0)
    return invalid_argument("engine: prefix_cache.max_bytes must be >= 0 (0: no cap of its own)");
  if (prefix_cache.align < 1)
    return invalid_argument("engine: prefix_cache.align must be >= 1, got " + std::to_string(prefix_cache.align));
  if (prefix_cache.replay_limit < 1)
    return invalid_argument("engine: prefix_cache.replay_limit must be >= 1, got " +
                            std::to_string(prefix_cache.replay_limit));
  return {};
}

Engine::Engine(Backend& backend, const EngineOptions& opt, std::unique_ptr<Session> s, std::unique_ptr<Session> draft)
    : backend_(backend), opt_(opt), session_(std::move(s)), draft_(std::move(draft)) {
  if (opt_.prefix_cache.enabled) cache_ = std::make_unique<PrefixCache>(*session_, opt_.prefix_cache);
}

Engine::~Engine() {
  // Draft sources release their sequences in the draft session: before it goes.
  for (auto& r : requests_)
    for (Lane& l : r->lanes) l.drafts.reset();
}

Result<std::unique_ptr<Engine>> Engine::create(Backend& backend, const EngineOptions& opt) {
  RSSM_RETURN_IF_ERROR(opt.validate());
  if (opt.max_batch_tokens > backend.max_step_rows())
    return invalid_argument("engine: max_batch_tokens " + std::to_string(opt.max_batch_tokens) + " is over the " +
                            backend.name() + " backend's " + std::to_string(backend.max_step_rows()) +
                            " rows a step");
  if (opt.draft != nullptr && opt.draft->config().vocab_size != backend.config().vocab_size)
    return invalid_argument("engine: the draft model's vocabulary (" + std::to_string(opt.draft->config().vocab_size) +
                            ") is not the target's (" + std::to_string(backend.config().vocab_size) + ")");
  RSSM_ASSIGN_OR_RETURN(auto session, Session::create(backend, opt.state));
  std::unique_ptr<Session> draft;
  if (opt.draft != nullptr) {
    RSSM_ASSIGN_OR_RETURN(draft, Session::create(*opt.draft, opt.state));
  }
  return std::unique_ptr<Engine>(new Engine(backend, opt, std::move(session), std::move(draft)));
}

const StateManager& Engine::state() const { return session_->state(); }

Result<Engine::RequestId> Engine::submit(RequestParams p, Callback on_token) {
  const ModelConfig& cfg = backend_.config();
  const int64_t V = cfg.vocab_size;
  if (p.prompt.empty()) return invalid_argument("request: the prompt is empty");
  for (int32_t t : p.prompt)
    if (t < 0 || t >= V)
      return invalid_argument("request: token id " + std::to_string(t) + " out of range [0, " + std::to_string(V) + ")");
  if (p.max_new_tokens < 1) return invalid_argument("request: max_new_tokens must be >= 1");
  RSSM_RETURN_IF_ERROR(check_sampling(p.sampling, "request"));
  if (p.n < 1 || p.n > kMaxCompletions)
    return invalid_argument("request: n must be in [1, " + std::to_string(kMaxCompletions) + "], got " +
                            std::to_string(p.n));
  if (p.best_of != 0 && (p.best_of < p.n || p.best_of > kMaxCompletions))
    return invalid_argument("request: best_of must be in [n, " + std::to_string(kMaxCompletions) + "] (n = " +
                            std::to_string(p.n) + "), got " + std::to_string(p.best_of));
  if (p.beam_width != 0) {
    if (p.beam_width < p.n || p.beam_width > kMaxCompletions)
      return invalid_argument("request: the beam width must be in [n, " + std::to_string(kMaxCompletions) +
                              "] (n = " + std::to_string(p.n) + "), got " + std::to_string(p.beam_width));
    RSSM_RETURN_IF_ERROR(check_search_size(p.beam_width, V, true, "request: beam width"));
    if (p.best_of > p.n) return invalid_argument("request: best_of and beam search do not combine");
    if (p.spec != RequestParams::kNoSpec) return invalid_argument("request: speculation does not combine with beam search");
    if (!std::isfinite(p.length_penalty)) return invalid_argument("request: length_penalty must be finite");
  }
  if (p.top_logprobs < 0 || p.top_logprobs > std::min(kMaxTopLogprobs, V))
    return invalid_argument("request: top_logprobs must be in [0, " + std::to_string(std::min(kMaxTopLogprobs, V)) +
                            "], got " + std::to_string(p.top_logprobs));
  if (p.prompt_logprobs < -1 || p.prompt_logprobs > std::min(kMaxTopLogprobs, V))
    return invalid_argument("request: prompt_logprobs must be in [-1, " +
                            std::to_string(std::min(kMaxTopLogprobs, V)) + "], got " +
                            std::to_string(p.prompt_logprobs));
  if (p.spec != RequestParams::kNoSpec && p.spec != RequestParams::kNgram && p.spec != RequestParams::kDraft)
    return invalid_argument("request: spec " + std::to_string(int(p.spec)) + " is not a speculation kind");
  if (p.spec != RequestParams::kNoSpec && (p.spec_tokens < 1 || p.spec_tokens > 64))
    return invalid_argument("request: spec_tokens must be in [1, 64], got " + std::to_string(p.spec_tokens));
  if (p.spec == RequestParams::kNgram && p.ngram_max < 1)
    return invalid_argument("request: ngram_max must be >= 1, got " + std::to_string(p.ngram_max));
  if (p.spec == RequestParams::kDraft && draft_ == nullptr)
    return invalid_argument("request: draft-model speculation, but the engine has no draft model");
  for (const std::vector<int32_t>& s : p.stop) {
    if (s.empty()) return invalid_argument("request: a stop sequence is empty");
    for (int32_t t : s)
      if (t < 0 || t >= V)
        return invalid_argument("request: stop token id " + std::to_string(t) + " out of range [0, " +
                                std::to_string(V) + ")");
  }
  if (p.state_budget < 0)
    return invalid_argument("request: state_budget must be >= 0 (0: no cap), got " + std::to_string(p.state_budget));
  const RequestId id = static_cast<RequestId>(requests_.size());
  auto r = std::make_unique<Request>();
  r->id = id;
  r->p = std::move(p);
  r->cb = std::move(on_token);
  requests_.push_back(std::move(r));
  waiting_.push_back(id);
  stats_.max_waiting = std::max<int64_t>(stats_.max_waiting, static_cast<int64_t>(waiting_.size()));
  return id;
}

void Engine::release_lanes(Request& r) {
  for (Lane& l : r.lanes) {
    l.drafts.reset();
    if (l.seq >= 0) (void)session_->release(l.seq);
    l.seq = -1;
  }
  if (r.root >= 0) (void)session_->release(r.root);
  r.root = -1;
}

void Engine::end_request(Request& r, FinishReason reason, Status error) {
  if (r.done) return;
  r.done = true;
  stats_.finished++;
  release_lanes(r);
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), r.id), waiting_.end());
  running_.erase(std::remove(running_.begin(), running_.end(), r.id), running_.end());
  // Every completion not yet ended gets its end (a search: each of the n).
  const int64_t n = r.search() ? r.p.n : static_cast<int64_t>(std::max<size_t>(r.lanes.size(), size_t(r.p.n)));
  for (int64_t i = 0; i < n; ++i) {
    const bool open = r.search() ? r.results.empty() : (size_t(i) >= r.lanes.size() || !r.lanes[size_t(i)].done);
    if (!open) continue;
    if (size_t(i) < r.lanes.size() && !r.search()) {
      r.lanes[size_t(i)].done = true;
      r.lanes[size_t(i)].c.reason = reason;
    }
    if (r.cb) {
      TokenEvent e;
      e.request = r.id;
      e.cached_tokens = r.cached;
      e.index = i;
      e.finished = true;
      e.reason = reason;
      e.error = error;
      r.cb(e);
    }
  }
}

void Engine::end_completion(Request& r, size_t li, int32_t token, FinishReason reason, Status error) {
  Lane& l = r.lanes[li];
  l.done = true;
  l.c.reason = reason;
  l.drafts.reset();
  // The first completion's prompt and tokens serve the next turn of a chat.
  if (li == 0 && !r.search() && (reason == FinishReason::kStop || reason == FinishReason::kLength))
    cache_insert(r, l.seq);
  if (l.seq >= 0) (void)session_->release(l.seq);
  l.seq = -1;
  if (r.cb && !r.search()) {
    TokenEvent e;
    e.request = r.id;
    e.cached_tokens = r.cached;
    e.index = static_cast<int64_t>(li);
    e.token = token;
    if (token >= 0) {
      e.logprob = l.c.logprobs.back();
      if (!l.c.top.empty()) e.top = l.c.top.back();
    }
    e.finished = true;
    e.reason = reason;
    e.error = std::move(error);
    r.cb(e);
  }
}

Status Engine::cancel(RequestId id) {
  if (id < 0 || id >= static_cast<RequestId>(requests_.size()) || requests_[size_t(id)]->done)
    return invalid_argument("cancel: no live request " + std::to_string(id));
  end_request(*requests_[size_t(id)], FinishReason::kCancelled, {});
  return {};
}

void Engine::cancel_async(RequestId id) {
  std::lock_guard<std::mutex> lock(cancel_mu_);
  cancel_queue_.push_back({id, -1});
  cancel_pending_.store(true, std::memory_order_release);
}

void Engine::stop_async(RequestId id, int64_t index) {
  std::lock_guard<std::mutex> lock(cancel_mu_);
  cancel_queue_.push_back({id, index});
  cancel_pending_.store(true, std::memory_order_release);
}

void Engine::drain_cancels() {
  if (!cancel_pending_.load(std::memory_order_acquire)) return;
  std::vector<std::pair<RequestId, int64_t>> queue;
  {
    std::lock_guard<std::mutex> lock(cancel_mu_);
    queue.swap(cancel_queue_);
    cancel_pending_.store(false, std::memory_order_release);
  }
  for (const auto& [id, index] : queue) {
    if (id < 0 || id >= static_cast<RequestId>(requests_.size()) || requests_[size_t(id)]->done) continue;
    Request& r = *requests_[size_t(id)];
    if (index < 0) {
      end_request(r, FinishReason::kCancelled, {});
      continue;
    }
    // One streamed completion ends; a search reports its winners at its
    // end, so only a whole-request cancel reaches it.
    if (r.search() || index >= static_cast<int64_t>(r.lanes.size()) || r.lanes[size_t(index)].done) continue;
    end_completion(r, size_t(index), -1, FinishReason::kStop, {});
    (void)settle(r);
  }
}

bool Engine::idle() const { return waiting_.empty() && running_.empty(); }
int64_t Engine::running() const { return static_cast<int64_t>(running_.size()); }
int64_t Engine::waiting() const { return static_cast<int64_t>(waiting_.size()); }

bool Engine::admit_one(int64_t* reserved) {
  if (waiting_.empty() || static_cast<int64_t>(running_.size()) >= opt_.max_running) return false;
  const RequestId id = waiting_.front();
  Request& r = *requests_[size_t(id)];
  const StateManager& st = session_->state();
  const StateOptions& so = opt_.state;
  int64_t estimate = 0;
  if (!r.parked) {
    // What its first step needs: a checkpoint and the log pages of one
    // prompt chunk (+1 for a page boundary).
    const int64_t chunk = std::min<int64_t>(opt_.prefill_chunk, static_cast<int64_t>(r.p.prompt.size()));
    const int64_t pages = (chunk + so.page_size - 1) / so.page_size + 1;
    estimate = st.checkpoint_bytes() + pages * st.page_log_bytes();
  } else {
    // Its lanes' checkpoints, rebuilt if they were evicted.
    estimate = static_cast<int64_t>(std::max<size_t>(r.lanes.size(), 1)) * st.checkpoint_bytes();
  }
  if (so.state_budget > 0 && cache_ != nullptr) {
    // The cache gives way to requests: its entries go before one waits.
    const int64_t over = st.stats().state_bytes + *reserved + estimate - so.state_budget;
    if (over > 0) {
      const int64_t before = cache_->entries();
      (void)cache_->free_bytes(over);
      note_cache(before);
    }
  }
  if (so.state_budget > 0 && st.stats().state_bytes + *reserved + estimate > so.state_budget && !running_.empty())
    return false;  // wait: running requests free memory as they finish
  *reserved += estimate;
  waiting_.erase(waiting_.begin());
  if (!r.parked) {
    StateManager& sm = session_->state();
    PrefixCache::Hit hit;
    // A request that scores its prompt needs every position's logits.
    if (cache_ != nullptr && r.p.prompt_logprobs < 0) {
      hit = cache_->lookup(r.p.cache_key, r.p.prompt);
      stats_.prefix_lookups++;
      stats_.prefix_lookup_tokens += static_cast<int64_t>(r.p.prompt.size());
    }
    r.root = -1;
    if (hit.seq >= 0) {
      auto root = sm.fork_request(hit.seq, hit.length, r.p.state_budget, cache_->retention());
      if (root.ok()) {
        r.root = *root;
        r.fed = r.cached = hit.length;
        stats_.prefix_hits++;
        stats_.prefix_hit_tokens += hit.length;
        if (auto rp = sm.resume_plan(r.root); rp.ok()) {
          if (rp->path == RestorePath::kLogReplay) {
            stats_.prefix_replay_tokens += rp->to - rp->from;
            // The replay computes the state at the divergence anyway: kept,
            // later hits there start from it.
            (void)sm.keep_checkpoint_at(r.root, hit.length);
          }
          if (rp->path == RestorePath::kReprefill) stats_.prefix_rerun_tokens += rp->to - rp->from;
        }
      }
    }
    if (r.root < 0)
      r.root = cache_ != nullptr ? sm.add_sequence(r.p.state_budget, cache_->retention())
                                 : sm.add_sequence(r.p.state_budget);
  }
  r.parked = false;
  r.admitted = ++admissions_;
  running_.push_back(id);
  stats_.max_running = std::max<int64_t>(stats_.max_running, static_cast<int64_t>(running_.size()));
  return true;
}

void Engine::note_cache(int64_t entries_before) {
  if (cache_ == nullptr) return;
  stats_.prefix_evictions += std::max<int64_t>(0, entries_before - cache_->entries());
  stats_.prefix_entries = cache_->entries();
  stats_.prefix_state_bytes = cache_->bytes().state;
  stats_.prefix_kv_bytes = cache_->bytes().kv;
}

void Engine::cache_insert(const Request& r, int64_t seq) {
  if (cache_ == nullptr || seq < 0) return;
  const int64_t before = cache_->entries() + 1;  // an insert that releases nothing adds one
  const StateManager& sm = session_->state();
  // Not caching is always correct: a failure here only costs later hits.
  (void)cache_->insert(r.p.cache_key, seq, sm.length(seq));
  (void)session_->flush();
  note_cache(before);
}

void Engine::park(Request& r) {
  r.parked = true;
  for (Lane& l : r.lanes) l.feed.clear();
  running_.erase(std::remove(running_.begin(), running_.end(), r.id), running_.end());
  waiting_.insert(waiting_.begin(), r.id);
  stats_.preemptions++;
}

bool Engine::emit(Request& r, size_t li, int32_t t, double lp, std::vector<TokenLogprob> top) {
  const ModelConfig& cfg = backend_.config();
  Lane& l = r.lanes[li];
  l.c.tokens.push_back(t);
  l.c.logprobs.push_back(lp);
  l.logprob += lp;
  if (r.p.top_logprobs > 0) l.c.top.push_back(top);
  FinishReason end = FinishReason::kNone;
  if (r.p.stop_at_eos && cfg.is_eos(t)) end = FinishReason::kStop;
  else if (ends_with_stop(l.c.tokens, r.p.stop)) end = FinishReason::kStop;
  else if (static_cast<int64_t>(l.c.tokens.size()) >= r.p.max_new_tokens) end = FinishReason::kLength;
  if (end != FinishReason::kNone) {
    end_completion(r, li, t, end, {});
    return false;
  }
  l.pending = t;
  if (r.cb && !r.search()) {
    TokenEvent e;
    e.request = r.id;
    e.cached_tokens = r.cached;
    e.index = static_cast<int64_t>(li);
    e.token = t;
    e.logprob = lp;
    e.top = std::move(top);
    r.cb(e);
  }
  return true;
}

Status Engine::settle(Request& r) {
  if (r.done || !r.started) return {};
  if (!std::all_of(r.lanes.begin(), r.lanes.end(), [](const Lane& l) { return l.done; })) return {};
  if (r.search()) return finish_search(r);
  r.done = true;
  stats_.finished++;
  release_lanes(r);
  running_.erase(std::remove(running_.begin(), running_.end(), r.id), running_.end());
  return {};
}

// The prompt is in: its last row (kept row `row`) gives every completion's
// first token. Plain and best_of requests fork the prompt into one lane per
// sample (lane 0 takes over the prompt's sequence); a beam search ranks
// the row's candidates into its first beams as every later beam step does.
Status Engine::start_completions(Request& r, int64_t row) {
  r.started = true;
  const ModelConfig& cfg = backend_.config();
  StateManager& st = session_->state();
  if (r.p.beam_width > 0) {
    Lane root(r.p.sampling);
    root.seq = r.root;
    r.root = -1;
    r.lanes.push_back(std::move(root));
    return step_beams(r, {&row, 1});
  }
  const int64_t width = r.width();
  for (int64_t i = 0; i < width; ++i) {
    SamplingParams sp = r.p.sampling;
    sp.seed = r.p.sampling.seed + static_cast<uint64_t>(i);
    Lane l(sp);
    if (i == 0) {
      l.seq = r.root;
    } else {
      RSSM_ASSIGN_OR_RETURN(l.seq, st.fork(r.root));
    }
    if (r.p.spec == RequestParams::kNgram) l.drafts = std::make_unique<NgramDraft>(r.p.ngram_max);
    if (r.p.spec == RequestParams::kDraft) {
      RSSM_ASSIGN_OR_RETURN(auto d, ModelDraft::create(*draft_, cfg, sp));
      l.drafts = std::move(d);
    }
    r.lanes.push_back(std::move(l));
  }
  r.root = -1;  // lane 0's now
  std::vector<int64_t> rows(static_cast<size_t>(width), row);
  std::vector<Sampler*> samplers;
  for (Lane& l : r.lanes) samplers.push_back(&l.sampler);
  std::vector<int32_t> toks(static_cast<size_t>(width));
  std::vector<double> lps(static_cast<size_t>(width));
  RSSM_RETURN_IF_ERROR(choose_tokens(backend_, rows, samplers, toks.data(), lps.data()));
  std::vector<TokenLogprob> top;
  if (r.p.top_logprobs > 0) {
    top.resize(static_cast<size_t>(r.p.top_logprobs));
    RSSM_RETURN_IF_ERROR(backend_.top_logprobs({&row, 1}, r.p.top_logprobs, top.data()));
  }
  for (size_t i = 0; i < r.lanes.size() && !r.done; ++i) emit(r, i, toks[i], lps[i], top);
  return settle(r);
}

Status Engine::score_prompt(Request& r, int64_t row0, int64_t n) {
  const size_t P = r.p.prompt.size();
  if (r.prompt_lp.empty()) {
    r.prompt_lp.assign(P, std::numeric_limits<double>::quiet_NaN());  // the first token has no context
    r.prompt_top.assign(P, {});
  }
  // Row j of the chunk holds the logits after prompt token fed + j: it
  // scores token fed + j + 1.
  std::vector<int64_t> rows;
  std::vector<int32_t> next;
  for (int64_t j = 0; j < n && static_cast<size_t>(r.fed + j + 1) < P; ++j) {
    rows.push_back(row0 + j);
    next.push_back(r.p.prompt[size_t(r.fed + j + 1)]);
  }
  if (rows.empty()) return {};
  std::vector<double> lp(rows.size());
  RSSM_RETURN_IF_ERROR(backend_.logprobs_of(rows, next, lp.data()));
  const int64_t k = r.p.prompt_logprobs;
  std::vector<TokenLogprob> top(rows.size() * static_cast<size_t>(k));
  if (k > 0) RSSM_RETURN_IF_ERROR(backend_.top_logprobs(rows, k, top.data()));
  for (size_t j = 0; j < rows.size(); ++j) {
    const size_t at = static_cast<size_t>(r.fed) + j + 1;
    r.prompt_lp[at] = lp[j];
    if (k > 0) r.prompt_top[at].assign(top.begin() + static_cast<long>(j * size_t(k)),
                                       top.begin() + static_cast<long>((j + 1) * size_t(k)));
  }
  return {};
}

// A search ended: its n best completions are the request's, reported now.
Status Engine::finish_search(Request& r) {
  std::vector<Completion> all;
  if (r.p.beam_width > 0) {
    all = std::move(r.finished_beams);
    for (Lane& l : r.lanes) {
      Completion c = l.c;
      c.score = l.logprob / std::pow(static_cast<double>(std::max<size_t>(c.tokens.size(), 1)), r.p.length_penalty);
      c.reason = static_cast<int64_t>(c.tokens.size()) >= r.p.max_new_tokens ? FinishReason::kLength : FinishReason::kStop;
      all.push_back(std::move(c));
    }
  } else {
    for (Lane& l : r.lanes) {
      Completion c = l.c;
      c.score = mean_logprob(c);
      all.push_back(std::move(c));
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Completion& a, const Completion& b) { return a.score > b.score; });
  if (static_cast<int64_t>(all.size()) > r.p.n) all.resize(size_t(r.p.n));
  // Stop sequences end a beam at their first occurrence.
  if (r.p.beam_width > 0)
    for (Completion& c : all)
      for (size_t j = 1; j <= c.tokens.size(); ++j) {
        const std::vector<int32_t> head(c.tokens.begin(), c.tokens.begin() + static_cast<long>(j));
        if (!ends_with_stop(head, r.p.stop)) continue;
        c.tokens.resize(j);
        if (c.logprobs.size() > j) c.logprobs.resize(j);
        if (c.top.size() > j) c.top.resize(j);
        c.reason = FinishReason::kStop;
        break;
      }
  r.results = all;
  r.done = true;
  stats_.finished++;
  release_lanes(r);
  running_.erase(std::remove(running_.begin(), running_.end(), r.id), running_.end());
  if (!r.cb) return {};
  for (size_t i = 0; i < all.size(); ++i) {
    const Completion& c = all[i];
    for (size_t j = 0; j < c.tokens.size(); ++j) {
      TokenEvent e;
      e.request = r.id;
      e.cached_tokens = r.cached;
      e.index = static_cast<int64_t>(i);
      e.token = c.tokens[j];
      e.logprob = j < c.logprobs.size() ? c.logprobs[j] : 0.0;
      if (j < c.top.size()) e.top = c.top[j];
      e.finished = j + 1 == c.tokens.size();
      e.reason = e.finished ? c.reason : FinishReason::kNone;
      r.cb(e);
    }
    if (c.tokens.empty()) {
      TokenEvent e;
      e.request = r.id;
      e.cached_tokens = r.cached;
      e.index = static_cast<int64_t>(i);
      e.finished = true;
      e.reason = c.reason;
      r.cb(e);
    }
  }
  return {};
}

Status Engine::step() {
  drain_cancels();
  int64_t reserved = 0;  // estimates of requests admitted in this step
  while (admit_one(&reserved)) {
  }
  if (running_.empty()) return {};
  const int64_t V = backend_.config().vocab_size;

  // What each input of the step is for.
  struct Input {
    RequestId req;
    int64_t lane;       // -1: a prompt chunk
    int64_t rows;       // logits rows it keeps
    bool last = false;  // a prompt chunk that ends its prompt
  };
  std::vector<StepInput> in;
  std::vector<Input> who;
  for (;;) {
    in.clear();
    who.clear();
    int64_t budget = opt_.max_batch_tokens;
    // Decoding completions first (latency), drafts where they fit.
    for (RequestId id : running_) {
      Request& r = *requests_[size_t(id)];
      if (!r.started) continue;
      for (size_t li = 0; li < r.lanes.size(); ++li) {
        Lane& l = r.lanes[li];
        if (l.done || budget == 0) continue;
        l.d = Draft{};
        if (l.drafts && budget > 1) {
          const int64_t room = std::min({r.p.max_new_tokens - static_cast<int64_t>(l.c.tokens.size()),
                                         r.p.spec_tokens, budget - 1});
          if (room > 0) {
            const std::span<const int32_t> mine = session_->state().tokens(l.seq);
            std::vector<int32_t> ctx(mine.begin(), mine.end());
            ctx.push_back(l.pending);
            RSSM_ASSIGN_OR_RETURN(l.d, l.drafts->propose(ctx, room));
          }
        }
        if (l.d.tokens.empty()) {
          in.push_back({l.seq, {&l.pending, 1}});
          who.push_back({id, static_cast<int64_t>(li), 1});
          --budget;
        } else {
          l.feed.assign(1, l.pending);
          l.feed.insert(l.feed.end(), l.d.tokens.begin(), l.d.tokens.end());
          in.push_back({l.seq, l.feed, /*commit=*/false, StepInput::kAll});
          who.push_back({id, static_cast<int64_t>(li), static_cast<int64_t>(l.feed.size())});
          budget -= static_cast<int64_t>(l.feed.size());
        }
      }
    }
    const size_t n_decode = in.size();
    // Then prompt chunks, in admission order.
    for (RequestId id : running_) {
      Request& r = *requests_[size_t(id)];
      if (r.started || budget == 0) continue;
      const int64_t left = static_cast<int64_t>(r.p.prompt.size()) - r.fed;
      const int64_t n = std::min({left, opt_.prefill_chunk, budget});
      const bool last = n == left, scored = r.p.prompt_logprobs >= 0;
      in.push_back({r.root, std::span<const int32_t>(r.p.prompt).subspan(size_t(r.fed), size_t(n)), true,
                    scored ? StepInput::kAll : last ? StepInput::kLast : StepInput::kNone});
      who.push_back({id, -1, scored ? n : last ? 1 : 0, last});
      budget -= n;
    }
    if (in.empty()) return {};
    const double t0 = now_seconds();
    const Status st = session_->step(in);
    if (st.ok()) {
      stats_.steps++;
      const bool prefill = in.size() > n_decode;
      stats_.prefill_steps += prefill;
      (prefill ? stats_.prefill_step_s : stats_.decode_step_s) += now_seconds() - t0;
      break;
    }
    if (st.code() != StatusCode::kOutOfBudget) return st;
    // Preemption: park the latest admitted request of the batch and try
    // again without it; a request that cannot fit alone fails.
    std::vector<RequestId> in_batch;
    for (const Input& w : who)
      if (std::find(in_batch.begin(), in_batch.end(), w.req) == in_batch.end()) in_batch.push_back(w.req);
    if (in_batch.size() <= 1) {
      end_request(*requests_[size_t(in_batch.at(0))], FinishReason::kError, st);
      return {};
    }
    RequestId latest = in_batch[0];
    for (RequestId id : in_batch)
      if (requests_[size_t(id)]->admitted > requests_[size_t(latest)]->admitted) latest = id;
    Request& victim = *requests_[size_t(latest)];
    if (!victim.started && victim.fed == 0) {
      // Nothing of it is in yet: back to waiting as new.
      (void)session_->release(victim.root);
      victim.root = -1;
      running_.erase(std::remove(running_.begin(), running_.end(), latest), running_.end());
      waiting_.insert(waiting_.begin(), latest);
      stats_.preemptions++;
    } else {
      park(victim);
    }
  }

  // The rows each input kept, and what the plain ones chose (one read for
  // all of them, one for their top log-probabilities).
  std::vector<int64_t> first_row(who.size());
  int64_t rows = 0, kept = 0, top_k = 0;
  std::vector<int64_t> plain_rows;
  std::vector<Sampler*> plain_samplers;
  std::vector<int64_t> plain_of(who.size(), -1);
  for (size_t i = 0; i < who.size(); ++i) {
    rows += static_cast<int64_t>(in[i].tokens.size());
    first_row[i] = kept;
    kept += who[i].rows;
    Request& r = *requests_[size_t(who[i].req)];
    if (who[i].lane < 0) {
      stats_.prefill_tokens += static_cast<int64_t>(in[i].tokens.size());
      continue;
    }
    stats_.decode_tokens++;
    if (who[i].rows == 1 && r.p.beam_width == 0) {
      plain_of[i] = static_cast<int64_t>(plain_rows.size());
      plain_rows.push_back(first_row[i]);
      plain_samplers.push_back(&r.lanes[size_t(who[i].lane)].sampler);
      top_k = std::max(top_k, r.p.top_logprobs);
    }
  }
  stats_.max_batch_rows = std::max(stats_.max_batch_rows, rows);
  std::vector<int32_t> plain_tok(plain_rows.size());
  std::vector<double> plain_lp(plain_rows.size());
  RSSM_RETURN_IF_ERROR(choose_tokens(backend_, plain_rows, plain_samplers, plain_tok.data(), plain_lp.data()));
  std::vector<TokenLogprob> plain_top;
  if (top_k > 0 && !plain_rows.empty()) {
    plain_top.resize(plain_rows.size() * static_cast<size_t>(top_k));
    RSSM_RETURN_IF_ERROR(backend_.top_logprobs(plain_rows, top_k, plain_top.data()));
  }
  auto top_at = [&](const Request& r, int64_t plain) {
    const auto b = plain_top.begin() + static_cast<long>(plain * top_k);
    return std::vector<TokenLogprob>(b, b + r.p.top_logprobs);
  };
  auto top_of = [&](const Request& r, int64_t row) -> Result<std::vector<TokenLogprob>> {
    std::vector<TokenLogprob> top(static_cast<size_t>(r.p.top_logprobs));
    if (!top.empty()) RSSM_RETURN_IF_ERROR(backend_.top_logprobs({&row, 1}, r.p.top_logprobs, top.data()));
    return top;
  };

  std::vector<RequestId> beam_reqs;
  std::vector<float> vrows;
  for (size_t i = 0; i < who.size(); ++i) {
    const Input& w = who[i];
    Request& r = *requests_[size_t(w.req)];
    // An earlier request's callback may have cancelled this one during
    // this loop: its finished events were its last.
    if (r.done) continue;
    if (w.lane < 0) {
      const int64_t n = static_cast<int64_t>(in[i].tokens.size());
      if (r.p.prompt_logprobs >= 0) RSSM_RETURN_IF_ERROR(score_prompt(r, first_row[i], n));
      r.fed += n;
      if (!w.last) continue;
      if (r.p.prompt_logprobs >= 0 && r.cb) {
        TokenEvent e;
        e.request = r.id;
        e.cached_tokens = r.cached;
        e.index = -1;
        e.prompt_logprobs = r.prompt_lp;
        e.prompt_top = r.prompt_top;
        r.cb(e);
        if (r.done) continue;
      }
      cache_insert(r, r.root);
      RSSM_RETURN_IF_ERROR(start_completions(r, first_row[i] + w.rows - 1));
      continue;
    }
    if (r.p.beam_width > 0) {
      if (std::find(beam_reqs.begin(), beam_reqs.end(), r.id) == beam_reqs.end()) beam_reqs.push_back(r.id);
      continue;
    }
    Lane& l = r.lanes[size_t(w.lane)];
    if (l.done) continue;
    if (w.rows == 1) {
      const int64_t j = plain_of[i];
      emit(r, size_t(w.lane), plain_tok[size_t(j)], plain_lp[size_t(j)],
           r.p.top_logprobs > 0 ? top_at(r, j) : std::vector<TokenLogprob>{});
    } else {
      // A verify: [pending, d_1 .. d_k] kept rows first_row .. first_row + k.
      const size_t k = l.d.tokens.size();
      std::vector<int64_t> mine(k + 1);
      for (size_t j = 0; j <= k; ++j) mine[j] = first_row[i] + static_cast<int64_t>(j);
      AcceptResult a;
      std::vector<double> lp(k + 1);
      if (l.sampler.params().temperature <= 0.0f) {
        // Every row's argmax with its log-probability (a draw at
        // temperature 0 is the argmax).
        std::vector<SampleRequest> q;
        for (int64_t m : mine) q.push_back({m, l.sampler.params(), 0.0});
        std::vector<int32_t> mx(k + 1);
        RSSM_RETURN_IF_ERROR(backend_.sample(q, mx.data(), lp.data()));
        a = accept_greedy(mx, l.d);
      } else {
        vrows.resize((k + 1) * static_cast<size_t>(V));
        RSSM_RETURN_IF_ERROR(backend_.logits(mine, vrows.data()));
        a = accept_drafts(vrows, V, l.d, l.sampler);
        for (size_t j = 0; j <= k && j <= size_t(a.accepted); ++j) {
          const std::span<const float> rr = std::span<const float>(vrows).subspan(j * size_t(V), size_t(V));
          lp[j] = ops::cpu::log_prob(rr, j < size_t(a.accepted) ? l.d.tokens[j] : a.next);
        }
      }
      stats_.spec_drafted += static_cast<int64_t>(k);
      stats_.spec_accepted += a.accepted;
      StateManager& st = session_->state();
      RSSM_RETURN_IF_ERROR(st.commit(l.seq, 1 + a.accepted));
      RSSM_RETURN_IF_ERROR(st.truncate(l.seq, st.committed(l.seq)));
      bool live = true;
      for (int64_t j = 0; j <= a.accepted && live && !r.done; ++j) {
        RSSM_ASSIGN_OR_RETURN(std::vector<TokenLogprob> top, top_of(r, mine[size_t(j)]));
        live = emit(r, size_t(w.lane), j < a.accepted ? l.d.tokens[size_t(j)] : a.next, lp[size_t(j)], std::move(top));
      }
    }
    RSSM_RETURN_IF_ERROR(settle(r));
  }
  for (RequestId id : beam_reqs) {
    Request& r = *requests_[size_t(id)];
    if (r.done) continue;
    std::vector<int64_t> beam_rows;
    for (size_t i = 0; i < who.size(); ++i)
      if (who[i].req == id && who[i].lane >= 0) beam_rows.push_back(first_row[i]);
    RSSM_RETURN_IF_ERROR(step_beams(r, beam_rows));
  }
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

Result<std::vector<Completion>> Engine::completions(RequestId id) const {
  if (id < 0 || id >= static_cast<RequestId>(requests_.size()))
    return invalid_argument("no request " + std::to_string(id));
  const Request& r = *requests_[size_t(id)];
  if (!r.results.empty()) return r.results;
  std::vector<Completion> out;
  for (const Lane& l : r.lanes) out.push_back(l.c);
  return out;
}

Result<std::vector<int32_t>> Engine::output(RequestId id) const {
  RSSM_ASSIGN_OR_RETURN(std::vector<Completion> c, completions(id));
  if (c.empty()) return std::vector<int32_t>{};
  return c[0].tokens;
}

}  // namespace replayssm
