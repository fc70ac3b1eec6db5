// The branching workloads: beam search (width = batch), best-of-n (n =
// batch) and a best-first tree search (batch children per expansion), each
// on prompt 0. Output tokens are the tokens the decode steps append: one
// per live hypothesis per step for beam and best-of-n (their first token
// comes from the prefill), one per new node for the tree.
#include <algorithm>
#include <numeric>
#include <set>

#include "bench/workloads.h"
#include "core/clock.h"
#include "decode/beam_search.h"
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
  m.store = st.store;
  return m;
}

}  // namespace

Result<Measurement> run_beam(BenchContext& ctx, const Config& c) {
  const SweepOptions& opt = ctx.options();
  BeamOptions o;
  o.width = c.batch;
  o.max_new_tokens = opt.new_tokens;
  o.stop_at_eos = false;
  o.store = ctx.store_options(c);
  SearchStats st;
  RSSM_ASSIGN_OR_RETURN(auto hyps, beam_search(ctx.model(), ctx.prompt(0), o, &st));
  return search_measurement(st, c.batch, opt.new_tokens);
}

Result<Measurement> run_best_of_n(BenchContext& ctx, const Config& c) {
  const SweepOptions& opt = ctx.options();
  BestOfNOptions o;
  o.n = c.batch;
  o.max_new_tokens = opt.new_tokens;
  o.sampling = {opt.bon_temperature, 1.0f, opt.seed};
  o.stop_at_eos = false;
  o.store = ctx.store_options(c);
  SearchStats st;
  RSSM_ASSIGN_OR_RETURN(auto hyps, best_of_n(ctx.model(), ctx.prompt(0), o, &st));
  return search_measurement(st, c.batch, opt.new_tokens);
}

// Best-first: `new_tokens` times, take the leaf with the best mean
// log-probability per token and expand it into its `batch` most likely
// next tokens, one TreeSearch::expand (a fork and a one-token step) each.
// The search jumps between branches, so most expansions fork a node that
// is not the one just stepped — the access pattern the store's forks and
// restores exist for.
Result<Measurement> run_tree(BenchContext& ctx, const Config& c) {
  const SweepOptions& opt = ctx.options();
  const int64_t V = ctx.model().config().vocab_size, P = opt.prompt_tokens;
  RSSM_ASSIGN_OR_RETURN(auto tree, TreeSearch::create(ctx.model(), ctx.store_options(c)));
  RSSM_ASSIGN_OR_RETURN(const TreeSearch::NodeId root, tree->root(ctx.prompt(0)));
  // Leaves ordered by (−mean log-probability, id): begin() is the best.
  std::set<std::pair<double, TreeSearch::NodeId>> leaves{{0.0, root}};
  const int64_t k = std::min<int64_t>(c.batch, V);
  std::vector<int32_t> ids(static_cast<size_t>(V));
  Measurement m;
  const double t0 = now_seconds();
  for (int64_t e = 0; e < opt.new_tokens && !leaves.empty(); ++e) {
    const TreeSearch::NodeId node = leaves.begin()->second;
    leaves.erase(leaves.begin());
    RSSM_ASSIGN_OR_RETURN(std::span<const float> logits, tree->logits(node));
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
    });
    const std::vector<int32_t> top(ids.begin(), ids.begin() + k);  // logits dies with the next expand
    for (int32_t t : top) {
      RSSM_ASSIGN_OR_RETURN(const TreeSearch::NodeId child, tree->expand(node, {&t, 1}));
      RSSM_ASSIGN_OR_RETURN(const double score, tree->score(child));
      RSSM_ASSIGN_OR_RETURN(auto path, tree->tokens(child));
      const double depth = static_cast<double>(static_cast<int64_t>(path.size()) - P);
      leaves.insert({-score / depth, child});
      m.emitted++;
    }
  }
  m.decode_s = now_seconds() - t0;
  m.store = tree->store().stats();
  return m;
}

}  // namespace replayssm::bench
