// The branching workloads: beam search (width = batch), best-of-n (n =
// batch) and a best-first tree search (batch children per expansion), each
// on prompt 0. Output tokens are the tokens the decode steps append: one
// per live hypothesis per step for beam and best-of-n (their first token
// comes from the prefill), one per new node for the tree.
#include <algorithm>
#include <numeric>
#include <set>

#include "bench/best_first.h"
#include "bench/workloads.h"
#include "core/clock.h"
#include "workloads/beam_search.h"
#include "replayssm/tree_search.h"

namespace replayssm::bench {

namespace {

// Beam search and best-of-n keep `batch` hypotheses through every decode
// step without EOS (the vocabulary has > 2·batch ids), each appending one
// token a step after the prefill's first.
Measurement search_measurement(const SearchStats& st, int64_t batch, int64_t new_tokens) {
  Measurement m;
  m.decode_s = st.decode_s;
  m.emitted = batch * std::max<int64_t>(new_tokens - 1, 0);
  m.state = st.state;
  return m;
}

}  // namespace

Result<Measurement> run_beam(BenchContext& ctx, const Config& c) {
  const SweepOptions& opt = ctx.options();
  BeamOptions o;
  o.width = c.batch;
  o.max_new_tokens = opt.new_tokens;
  o.stop_at_eos = false;
  o.state = ctx.state_options(c);
  SearchStats st;
  RSSM_ASSIGN_OR_RETURN(auto hyps, beam_search(ctx.backend(), ctx.prompt(0), o, &st));
  return search_measurement(st, c.batch, opt.new_tokens);
}

Result<Measurement> run_best_of_n(BenchContext& ctx, const Config& c) {
  const SweepOptions& opt = ctx.options();
  BestOfNOptions o;
  o.n = c.batch;
  o.max_new_tokens = opt.new_tokens;
  o.sampling = {opt.bon_temperature, 1.0f, opt.seed};
  o.stop_at_eos = false;
  o.state = ctx.state_options(c);
  SearchStats st;
  RSSM_ASSIGN_OR_RETURN(auto hyps, best_of_n(ctx.backend(), ctx.prompt(0), o, &st));
  return search_measurement(st, c.batch, opt.new_tokens);
}

// Best-first (bench/best_first.h): `batch` children per expansion.
Result<Measurement> run_tree(BenchContext& ctx, const Config& c) {
  const SweepOptions& opt = ctx.options();
  RSSM_ASSIGN_OR_RETURN(auto tree, TreeSearch::create(ctx.backend(), ctx.state_options(c)));
  RSSM_ASSIGN_OR_RETURN(const TreeSearch::NodeId root, tree->root(ctx.prompt(0)));
  Measurement m;
  const double t0 = now_seconds();
  RSSM_ASSIGN_OR_RETURN(m.emitted, best_first(*tree, root, opt.prompt_tokens, ctx.config().vocab_size, c.batch,
                                              opt.new_tokens));
  m.decode_s = now_seconds() - t0;
  m.state = tree->state().stats();
  return m;
}

}  // namespace replayssm::bench
