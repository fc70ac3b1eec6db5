// Engine: one step of a beam-search request (see include/replayssm/engine.h):
// the beams' candidates ranked (workloads/beam_search.h), finished
// hypotheses kept, and each surviving beam's lane re-forked from its parent.
#include <algorithm>
#include <vector>

#include "replayssm/engine.h"
#include "workloads/beam_search.h"
#include "workloads/engine_request.h"
#include "workloads/session.h"

namespace replayssm {

Status Engine::step_beams(Request& r, std::span<const int64_t> rows) {
  const ModelConfig& cfg = backend_.config();
  const int64_t V = cfg.vocab_size;
  const int64_t w = r.p.beam_width, kk = std::min<int64_t>(2 * w, V);
  const int64_t k = std::max(kk, r.p.top_logprobs);
  std::vector<TokenLogprob> top(rows.size() * static_cast<size_t>(k));
  RSSM_RETURN_IF_ERROR(backend_.top_logprobs(rows, k, top.data()));
  // rank_beams reads each beam's 2w candidates: the first 2w of its k.
  std::vector<TokenLogprob> cand;
  std::vector<Hypothesis> beams;
  for (size_t b = 0; b < r.lanes.size(); ++b) {
    cand.insert(cand.end(), top.begin() + static_cast<long>(b * size_t(k)),
                top.begin() + static_cast<long>(b * size_t(k) + size_t(kk)));
    beams.push_back({r.lanes[b].c.tokens, r.lanes[b].logprob, 0.0});
  }
  BeamOptions bo;
  bo.width = w;
  bo.max_new_tokens = r.p.max_new_tokens;
  bo.length_penalty = r.p.length_penalty;
  bo.stop_at_eos = r.p.stop_at_eos;
  const std::vector<BeamChoice> next = rank_beams(cand, kk, beams, cfg, bo, &r.finished_h);
  auto top_k = [&](size_t parent) {
    return std::vector<TokenLogprob>(top.begin() + static_cast<long>(parent * size_t(k)),
                                     top.begin() + static_cast<long>(parent * size_t(k) + size_t(r.p.top_logprobs)));
  };
  // The hypotheses that ended at EOS this step (rank_beams keeps the whole
  // list, sorted): each extends a live beam.
  for (const Hypothesis& h : r.finished_h) {
    bool known = false;
    for (const Completion& c : r.finished_beams) known |= c.tokens == h.tokens;
    if (known) continue;
    Completion c;
    c.tokens = h.tokens;
    c.score = h.score;
    c.reason = FinishReason::kStop;
    for (size_t b = 0; b < r.lanes.size(); ++b) {
      const Lane& l = r.lanes[b];
      if (l.c.tokens.size() + 1 != h.tokens.size() || !std::equal(l.c.tokens.begin(), l.c.tokens.end(), h.tokens.begin()))
        continue;
      c.logprobs = l.c.logprobs;
      c.logprobs.push_back(h.logprob - l.logprob);
      c.top = l.c.top;
      if (r.p.top_logprobs > 0) c.top.push_back(top_k(b));
      break;
    }
    r.finished_beams.push_back(std::move(c));
  }
  // Beams without children go first; the first child of a beam takes its
  // sequence, the others fork it.
  std::vector<int> children(r.lanes.size(), 0);
  for (const BeamChoice& c : next) children[c.parent]++;
  for (size_t b = 0; b < r.lanes.size(); ++b)
    if (children[b] == 0) {
      RSSM_RETURN_IF_ERROR(session_->release(r.lanes[b].seq));
      r.lanes[b].seq = -1;
    }
  std::vector<Lane> lanes;
  std::vector<int> taken(r.lanes.size(), 0);
  for (const BeamChoice& c : next) {
    const Lane& parent = r.lanes[c.parent];
    Lane l(r.p.sampling);
    if (taken[c.parent]++ == 0) {
      l.seq = parent.seq;
    } else {
      RSSM_ASSIGN_OR_RETURN(l.seq, session_->state().fork(parent.seq));
    }
    l.c = parent.c;
    l.c.tokens.push_back(c.token);
    l.c.logprobs.push_back(c.logprob - parent.logprob);
    if (r.p.top_logprobs > 0) l.c.top.push_back(top_k(c.parent));
    l.logprob = c.logprob;
    l.pending = c.token;
    lanes.push_back(std::move(l));
  }
  r.lanes = std::move(lanes);
  r.beam_steps++;
  if (r.lanes.empty() || r.beam_steps >= r.p.max_new_tokens) return finish_search(r);
  return {};
}

}  // namespace replayssm
