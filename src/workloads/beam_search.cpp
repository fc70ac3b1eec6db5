// beam_search and best_of_n (see beam_search.h).
#include "workloads/beam_search.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/clock.h"
#include "workloads/session.h"

namespace replayssm {

namespace {

double beam_score(double logprob, size_t len, const BeamOptions& opt) {
  return logprob / std::pow(static_cast<double>(std::max<size_t>(len, 1)), opt.length_penalty);
}

}  // namespace

std::vector<BeamChoice> rank_beams(std::span<const TokenLogprob> top, int64_t k, std::span<const Hypothesis> beams,
                                   const ModelConfig& cfg, const BeamOptions& opt, std::vector<Hypothesis>* finished) {
  const int64_t w = opt.width;
  // Candidates: each beam's top 2w continuations.
  std::vector<BeamChoice> cands;
  for (size_t b = 0; b < beams.size(); ++b)
    for (int64_t i = 0; i < k; ++i) {
      const TokenLogprob& t = top[b * size_t(k) + size_t(i)];
      cands.push_back({b, t.token, beams[b].logprob + t.logprob});
    }
  std::stable_sort(cands.begin(), cands.end(), [](const BeamChoice& a, const BeamChoice& c) {
    if (a.logprob != c.logprob) return a.logprob > c.logprob;
    return a.parent != c.parent ? a.parent < c.parent : a.token < c.token;
  });
  std::vector<BeamChoice> next;
  for (size_t rank = 0; rank < cands.size() && static_cast<int64_t>(next.size()) < w; ++rank) {
    const BeamChoice& c = cands[rank];
    if (opt.stop_at_eos && cfg.is_eos(c.token)) {
      if (static_cast<int64_t>(rank) >= w) continue;  // only top-ranked EOS candidates finish
      std::vector<int32_t> t = beams[c.parent].tokens;
      t.push_back(c.token);
      finished->push_back({t, c.logprob, beam_score(c.logprob, t.size(), opt)});
      continue;
    }
    next.push_back(c);
  }
  // Done when w hypotheses finished and no live beam can still beat the worst.
  std::sort(finished->begin(), finished->end(), [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  if (static_cast<int64_t>(finished->size()) >= w && !next.empty() &&
      (*finished)[size_t(w - 1)].score >= beam_score(next.front().logprob, beams[0].tokens.size() + 1, opt))
    next.clear();
  return next;
}

std::vector<Hypothesis> beam_results(std::vector<Hypothesis> finished, std::span<const Hypothesis> live,
                                     const BeamOptions& opt) {
  for (const Hypothesis& b : live) finished.push_back({b.tokens, b.logprob, beam_score(b.logprob, b.tokens.size(), opt)});
  std::stable_sort(finished.begin(), finished.end(), [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  if (static_cast<int64_t>(finished.size()) > opt.width) finished.resize(size_t(opt.width));
  return finished;
}

Status check_search_size(int64_t count, int64_t vocab_size, bool beam, const std::string& what) {
  if (count < 1 || count > kMaxSearchSequences)
    return invalid_argument(what + ": must be in [1, " + std::to_string(kMaxSearchSequences) + "], got " +
                            std::to_string(count));
  if (beam && count > vocab_size)
    return invalid_argument(what + ": " + std::to_string(count) + " beams are more than the vocabulary's " +
                            std::to_string(vocab_size) + " tokens");
  return {};
}

Status check_beam_options(const BeamOptions& opt, int64_t vocab_size) {
  RSSM_RETURN_IF_ERROR(check_search_size(opt.width, vocab_size, true, "beam search: width"));
  if (opt.max_new_tokens < 0) return invalid_argument("beam search: max_new_tokens must be >= 0");
  if (!std::isfinite(opt.length_penalty))  // scores sort by it: NaN would break the order
    return invalid_argument("beam search: length_penalty must be finite");
  return {};
}

Status check_best_of_n_options(const BestOfNOptions& opt, int64_t vocab_size) {
  RSSM_RETURN_IF_ERROR(check_search_size(opt.n, vocab_size, false, "best-of-n: n"));
  if (opt.max_new_tokens < 0) return invalid_argument("best-of-n: max_new_tokens must be >= 0");
  return check_sampling(opt.sampling, "best-of-n");
}

Result<std::vector<Hypothesis>> beam_search(Backend& backend, std::span<const int32_t> prompt, const BeamOptions& opt,
                                            SearchStats* stats) {
  const ModelConfig& cfg = backend.config();
  const int64_t V = cfg.vocab_size;
  RSSM_RETURN_IF_ERROR(check_beam_options(opt, V));
  if (prompt.empty()) return invalid_argument("beam search: the prompt is empty");
  RSSM_ASSIGN_OR_RETURN(auto session, Session::create(backend, opt.state));
  StateManager& st = session->state();
  std::vector<Hypothesis> beams(1);
  std::vector<int64_t> seqs{st.add_sequence()};  // seqs[b]: beams[b]'s sequence
  double t0 = now_seconds();
  const std::span<const int32_t> prompts[1] = {prompt};
  RSSM_RETURN_IF_ERROR(session->prefill(seqs, prompts, [](size_t, int64_t) { return Status(); }));
  if (stats) stats->prefill_s = now_seconds() - t0;
  std::vector<Hypothesis> finished;
  t0 = now_seconds();
  const int64_t k = std::min<int64_t>(2 * opt.width, V);
  std::vector<TokenLogprob> top;
  std::vector<int64_t> rows;
  for (int64_t step = 0; step < opt.max_new_tokens && !beams.empty(); ++step) {
    rows.resize(beams.size());
    for (size_t b = 0; b < beams.size(); ++b) rows[b] = static_cast<int64_t>(b);
    top.resize(beams.size() * static_cast<size_t>(k));
    RSSM_RETURN_IF_ERROR(backend.top_logprobs(rows, k, top.data()));
    const std::vector<BeamChoice> next = rank_beams(top, k, beams, cfg, opt, &finished);
    // Materialise: beams without children are released first (a strategy
    // that copies state on fork then never holds a pruned beam next to the
    // copies); the first child of a beam takes its sequence, others fork it.
    std::vector<int> children(beams.size(), 0);
    for (const BeamChoice& c : next) children[c.parent]++;
    for (size_t b = 0; b < beams.size(); ++b)
      if (children[b] == 0) RSSM_RETURN_IF_ERROR(st.release(seqs[b]));
    std::vector<Hypothesis> nb;
    std::vector<int64_t> ns;
    std::vector<int> taken(beams.size(), 0);
    for (const BeamChoice& c : next) {
      int64_t seq = seqs[c.parent];
      if (taken[c.parent]++ > 0) {
        RSSM_ASSIGN_OR_RETURN(seq, st.fork(seqs[c.parent]));
      }
      std::vector<int32_t> t = beams[c.parent].tokens;
      t.push_back(c.token);
      nb.push_back({std::move(t), c.logprob, 0.0});
      ns.push_back(seq);
    }
    beams = std::move(nb), seqs = std::move(ns);
    if (beams.empty() || step + 1 == opt.max_new_tokens) break;
    if (opt.on_step) {
      std::vector<std::vector<int32_t>> live;
      for (const Hypothesis& b : beams) live.push_back(b.tokens);
      opt.on_step(live);
    }
    std::vector<StepInput> in;
    for (size_t b = 0; b < beams.size(); ++b) in.push_back({seqs[b], {&beams[b].tokens.back(), 1}});
    RSSM_RETURN_IF_ERROR(session->step(in));
  }
  if (stats) {
    stats->decode_s = now_seconds() - t0;
    RSSM_RETURN_IF_ERROR(session->flush());
    stats->state = st.stats();
    stats->memory = backend.memory();
  }
  return beam_results(std::move(finished), beams, opt);
}

Result<std::vector<Hypothesis>> best_of_n(Backend& backend, std::span<const int32_t> prompt,
                                          const BestOfNOptions& opt, SearchStats* stats) {
  const ModelConfig& cfg = backend.config();
  const int64_t V = cfg.vocab_size;
  RSSM_RETURN_IF_ERROR(check_best_of_n_options(opt, V));
  if (prompt.empty()) return invalid_argument("best-of-n: the prompt is empty");
  RSSM_ASSIGN_OR_RETURN(auto session, Session::create(backend, opt.state));
  StateManager& st = session->state();
  const int64_t root = st.add_sequence();
  double t0 = now_seconds();
  const std::span<const int32_t> prompts[1] = {prompt};
  const int64_t one[1] = {root};
  RSSM_RETURN_IF_ERROR(session->prefill(one, prompts, [](size_t, int64_t) { return Status(); }));
  if (stats) stats->prefill_s = now_seconds() - t0;
  t0 = now_seconds();
  // Every sample starts from the prompt's logits (kept row 0) and a fork
  // of its state.
  struct Sample {
    int64_t seq;
    Sampler sampler;
    Hypothesis h;
    bool done = false;
  };
  std::vector<Sample> samples;
  for (int64_t i = 0; i < opt.n; ++i) {
    SamplingParams p = opt.sampling;
    p.seed = opt.sampling.seed + static_cast<uint64_t>(i);
    int64_t seq = root;
    if (i > 0) {
      RSSM_ASSIGN_OR_RETURN(seq, st.fork(root));
    }
    samples.push_back({seq, Sampler(p), {}, false});
  }
  std::vector<int64_t> row_of(samples.size(), 0);  // each live sample's kept row
  for (int64_t step = 0; step < opt.max_new_tokens; ++step) {
    std::vector<int64_t> rows;
    std::vector<Sampler*> samplers;
    std::vector<size_t> who;
    for (size_t i = 0; i < samples.size(); ++i) {
      if (samples[i].done) continue;
      rows.push_back(row_of[i]);
      samplers.push_back(&samples[i].sampler);
      who.push_back(i);
    }
    if (who.empty()) break;
    std::vector<int32_t> toks(who.size());
    std::vector<double> lps(who.size());
    RSSM_RETURN_IF_ERROR(choose_tokens(backend, rows, samplers, toks.data(), lps.data()));
    std::vector<StepInput> in;
    for (size_t j = 0; j < who.size(); ++j) {
      Sample& s = samples[who[j]];
      s.h.tokens.push_back(toks[j]);
      s.h.logprob += lps[j];
      s.done = (opt.stop_at_eos && cfg.is_eos(toks[j])) || step + 1 == opt.max_new_tokens;
      if (s.done) continue;
      row_of[who[j]] = static_cast<int64_t>(in.size());
      in.push_back({s.seq, {&s.h.tokens.back(), 1}});
    }
    if (in.empty()) break;
    RSSM_RETURN_IF_ERROR(session->step(in));
  }
  std::vector<Hypothesis> out;
  for (Sample& s : samples) {
    s.h.score = s.h.logprob / static_cast<double>(std::max<size_t>(s.h.tokens.size(), 1));
    out.push_back(std::move(s.h));
  }
  if (stats) {
    stats->decode_s = now_seconds() - t0;
    RSSM_RETURN_IF_ERROR(session->flush());
    stats->state = st.stats();
    stats->memory = backend.memory();
  }
  return out;
}

}  // namespace replayssm
