// EngineCuda (see engine_cuda.h).
#include "runtime/cuda/engine_cuda.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/clock.h"

namespace replayssm::cuda {

Result<std::unique_ptr<EngineCuda>> EngineCuda::create(const DeviceModel& model, const EngineCudaOptions& opt) {
  if (opt.slots < 1) return invalid_argument("engine (cuda): slots must be >= 1, got " + std::to_string(opt.slots));
  if (opt.prefill_chunk < 1 || opt.prefill_chunk > kMaxChunk)
    return invalid_argument("engine (cuda): prefill_chunk " + std::to_string(opt.prefill_chunk) + " out of range [1, " +
                            std::to_string(kMaxChunk) + "]");
  const int64_t rows = opt.max_batch_tokens != 0 ? opt.max_batch_tokens : std::max<int64_t>(1024, opt.slots);
  if (rows < opt.slots || rows > opt.slots * kMaxChunk)
    return invalid_argument("engine (cuda): max_batch_tokens " + std::to_string(opt.max_batch_tokens) +
                            " out of range [" + std::to_string(opt.slots) + ", " + std::to_string(opt.slots * kMaxChunk) +
                            "] (at least a token for every slot)");
  DecoderOptions o;
  o.strategy = opt.strategy, o.batch = opt.slots, o.max_context = opt.max_context, o.window = opt.window;
  // Its steps are single tokens and ragged ones of up to max_batch_tokens
  // rows (the decoder's rows: slots × max_chunk); no verifies, so the
  // standard layout keeps no per-draft states.
  o.graphs = opt.graphs, o.draft_states = false;
  o.max_chunk = int((rows + opt.slots - 1) / opt.slots);
  RSSM_ASSIGN_OR_RETURN(std::unique_ptr<Decoder> dec, Decoder::create(model, o));
  std::unique_ptr<EngineCuda> e(new EngineCuda(std::move(dec)));
  e->opt_ = opt;
  e->opt_.max_batch_tokens = rows;
  e->slot_owner_.assign(size_t(opt.slots), -1);
  e->slot_dirty_.assign(size_t(opt.slots), 0);
  return e;
}

Result<EngineCuda::RequestId> EngineCuda::submit(RequestParams params, Callback on_token) {
  const ModelConfig& c = dec_->model().config();
  if (params.prompt.empty()) return invalid_argument("engine (cuda): the prompt is empty");
  for (int32_t t : params.prompt)
    if (t < 0 || t >= c.vocab_size)
      return invalid_argument("token id " + std::to_string(t) + " is out of range [0, " + std::to_string(c.vocab_size) +
                              ")");
  if (params.max_new_tokens < 1)
    return invalid_argument("engine (cuda): max_new_tokens must be >= 1, got " + std::to_string(params.max_new_tokens));
  if (!(params.sampling.temperature >= 0.0f) || !(params.sampling.top_p > 0.0f && params.sampling.top_p <= 1.0f))
    return invalid_argument("engine (cuda): temperature must be >= 0 and top_p in (0, 1]");
  const int64_t need = int64_t(params.prompt.size()) + params.max_new_tokens;
  if (need > opt_.max_context)
    return out_of_budget("engine (cuda): prompt (" + std::to_string(params.prompt.size()) + ") + max_new_tokens (" +
                         std::to_string(params.max_new_tokens) + ") = " + std::to_string(need) +
                         " is over the engine's max_context " + std::to_string(opt_.max_context));
  const int64_t slot_state = dec_->memory().state_bytes / opt_.slots;
  if (params.state_budget > 0 && params.state_budget < slot_state)
    return out_of_budget("engine (cuda): state_budget " + std::to_string(params.state_budget) +
                         " bytes is under one slot's state (" + std::to_string(slot_state) + " bytes)");
  SamplingParams sp = params.sampling;
  const RequestId id = RequestId(requests_.size());
  requests_.push_back(std::make_unique<Request>(Request{std::move(params), std::move(on_token), Sampler(sp)}));
  waiting_.push_back(id);
  stats_.max_waiting = std::max<int64_t>(stats_.max_waiting, int64_t(waiting_.size()));
  return id;
}

void EngineCuda::finish(RequestId id, int32_t token, Status error) {
  Request& r = *requests_[size_t(id)];
  r.done = true;
  if (r.slot >= 0) {
    slot_owner_[size_t(r.slot)] = -1, slot_dirty_[size_t(r.slot)] = 1;
    r.slot = -1;
    --running_;
  } else {
    waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), id), waiting_.end());
  }
  if (r.on_token) {
    TokenEvent e;
    e.request = id;
    e.token = token;
    e.finished = true;
    e.reason = !error.ok()                                                  ? FinishReason::kError
               : token < 0                                                  ? FinishReason::kCancelled
               : int64_t(r.out.size()) >= r.params.max_new_tokens          ? FinishReason::kLength
                                                                            : FinishReason::kStop;
    e.error = std::move(error);
    r.on_token(e);
  }
}

Status EngineCuda::cancel(RequestId id) {
  if (id < 0 || id >= RequestId(requests_.size()))
    return invalid_argument("engine (cuda): no request " + std::to_string(id));
  if (requests_[size_t(id)]->done) return invalid_argument("engine (cuda): request " + std::to_string(id) + " has ended");
  finish(id, -1, {});
  return {};
}

Result<std::vector<int32_t>> EngineCuda::output(RequestId id) const {
  if (id < 0 || id >= RequestId(requests_.size()))
    return invalid_argument("engine (cuda): no request " + std::to_string(id));
  return requests_[size_t(id)]->out;
}

Status EngineCuda::admit() {
  for (int64_t s = 0; s < opt_.slots && !waiting_.empty(); ++s) {
    if (slot_owner_[size_t(s)] >= 0) continue;
    if (slot_dirty_[size_t(s)] || dec_->length(s) > 0) RSSM_RETURN_IF_ERROR(dec_->clear(s));
    slot_dirty_[size_t(s)] = 0;
    const RequestId id = waiting_.front();
    waiting_.pop_front();
    Request& r = *requests_[size_t(id)];
    r.slot = s, r.fed = 0;
    slot_owner_[size_t(s)] = id;
    ++running_;
  }
  stats_.max_running = std::max(stats_.max_running, running_);
  return {};
}

Status EngineCuda::step() {
  RSSM_RETURN_IF_ERROR(admit());
  if (running_ == 0) return {};
  const int64_t B = opt_.slots;
  // Who takes what: a decoding request its last token first, then the
  // prefilling ones their next chunks in admission order (the earliest is
  // never starved by later ones), within the step's rows.
  std::vector<int32_t> count(static_cast<size_t>(B), 0);
  // Ids grow at submit and the queue admits first come first, so
  // admission order is id order.
  std::vector<int64_t> order;  // slots, by their requests' admission
  for (int64_t s = 0; s < B; ++s)
    if (slot_owner_[size_t(s)] >= 0) order.push_back(s);
  std::sort(order.begin(), order.end(),
            [&](int64_t x, int64_t y) { return slot_owner_[size_t(x)] < slot_owner_[size_t(y)]; });
  bool prefilling = false;
  int64_t budget = opt_.max_batch_tokens;
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t s : order) {
      const Request& r = *requests_[size_t(slot_owner_[size_t(s)])];
      const int64_t left = int64_t(r.params.prompt.size()) - r.fed;
      if ((left > 0) != (pass == 1)) continue;
      prefilling |= left > 0;
      count[size_t(s)] = int32_t(left > 0 ? std::min({left, int64_t(opt_.prefill_chunk), budget}) : 1);
      budget -= count[size_t(s)];
    }
  std::vector<int32_t> tok, next(static_cast<size_t>(B));
  for (int64_t s = 0; s < B; ++s) {
    const RequestId id = slot_owner_[size_t(s)];
    if (id < 0) {
      if (!prefilling) tok.push_back(0);  // a plain step's filler token
      continue;
    }
    const Request& r = *requests_[size_t(id)];
    for (int i = 0; i < count[size_t(s)]; ++i)
      tok.push_back(r.fed < int64_t(r.params.prompt.size()) ? r.params.prompt[size_t(r.fed + i)] : r.last);
  }
  const double t0 = now_seconds();
  if (prefilling) {
    RSSM_RETURN_IF_ERROR(dec_->step_ragged(tok, count, next));
  } else {
    // A free slot steps a filler token: cleared before it would pass the context.
    for (int64_t s = 0; s < B; ++s)
      if (slot_owner_[size_t(s)] < 0) {
        if (dec_->length(s) + 1 > opt_.max_context) RSSM_RETURN_IF_ERROR(dec_->clear(s));
        slot_dirty_[size_t(s)] = 1;
      }
    RSSM_RETURN_IF_ERROR(dec_->step(tok, 1, next));
  }
  ++stats_.steps;
  stats_.prefill_steps += prefilling;
  (prefilling ? stats_.prefill_step_s : stats_.decode_step_s) += now_seconds() - t0;
  stats_.max_batch_rows = std::max(stats_.max_batch_rows, int64_t(tok.size()));
  // The requests with a new row to choose from (their prompt all in), by
  // sampling parameters for the device draws.
  std::vector<std::pair<int64_t, int32_t>> picks;  // slot, row
  std::map<std::pair<float, float>, std::vector<size_t>> draws;
  for (int64_t s = 0; s < B; ++s) {
    const RequestId id = slot_owner_[size_t(s)];
    if (id < 0) continue;
    Request& r = *requests_[size_t(id)];
    const int64_t prompt = int64_t(r.params.prompt.size());
    if (r.fed < prompt) {
      r.fed += count[size_t(s)];
      stats_.prefill_tokens += count[size_t(s)];
      if (r.fed < prompt) continue;
    } else {
      ++stats_.decode_tokens;
    }
    const int32_t row = int32_t(s);  // either step leaves a row per slot: its last token's
    r.last = next[size_t(row)];
    picks.emplace_back(s, row);
    if (r.params.sampling.temperature > 0.0f) draws[{r.params.sampling.temperature, r.params.sampling.top_p}].push_back(picks.size() - 1);
  }
  for (const auto& [p, which] : draws) {
    std::vector<int32_t> rows, ids(which.size());
    std::vector<double> u, lp(which.size());
    for (size_t i : which) {
      Request& r = *requests_[size_t(slot_owner_[size_t(picks[i].first)])];
      rows.push_back(picks[i].second), u.push_back(r.sampler.uniform());
    }
    RSSM_RETURN_IF_ERROR(dec_->sample(p.first, p.second, rows, u, ids, lp));
    for (size_t k = 0; k < which.size(); ++k) requests_[size_t(slot_owner_[size_t(picks[which[k]].first)])]->last = ids[k];
  }
  const ModelConfig& c = dec_->model().config();
  for (const auto& [s, row] : picks) {
    const RequestId id = slot_owner_[size_t(s)];
    Request& r = *requests_[size_t(id)];
    r.out.push_back(r.last);
    const bool end = (r.params.stop_at_eos && c.is_eos(r.last)) || int64_t(r.out.size()) >= r.params.max_new_tokens;
    if (end) {
      finish(id, r.last, {});
    } else if (r.on_token) {
      TokenEvent e;
      e.request = id;
      e.token = r.last;
      r.on_token(e);
    }
  }
  return {};
}

Status EngineCuda::run() {
  while (!idle()) RSSM_RETURN_IF_ERROR(step());
  return {};
}

}  // namespace replayssm::cuda
