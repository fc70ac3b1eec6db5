// Engine's private records (src/workloads/engine*.cpp): a request in
// flight and its lanes. Not part of the public API.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "replayssm/engine.h"
#include "workloads/beam_search.h"
#include "workloads/sampler.h"
#include "workloads/speculative.h"

namespace replayssm {

// One completion in progress: a sample, or a live beam.
struct Engine::Lane {
  explicit Lane(const SamplingParams& p) : sampler(p) {}
  int64_t seq = -1;
  Sampler sampler;
  Completion c;
  double logprob = 0.0;  // Σ of c.logprobs
  int32_t pending = -1;  // chosen, not yet fed
  bool done = false;
  std::unique_ptr<DraftSource> drafts;
  Draft d;                     // this step's drafts
  std::vector<int32_t> feed;   // [pending, drafts...]
};

struct Engine::Request {
  RequestId id = 0;
  RequestParams p;
  Callback cb;
  int64_t root = -1;      // the prompt's sequence, until a lane takes it over
  int64_t fed = 0;        // prompt tokens fed
  bool started = false;   // the prompt is in; lanes exist
  bool parked = false;    // preempted: sequences kept, out of the batch
  int64_t cached = 0;     // prompt tokens taken from the prefix cache
  bool done = false;
  uint64_t admitted = 0;  // admission order (the latest is parked first)
  std::vector<Lane> lanes;
  std::vector<Hypothesis> finished_h;      // beam search: ended hypotheses, as rank_beams keeps them
  std::vector<Completion> finished_beams;  // the same with their per-token log-probabilities
  std::vector<Completion> results;         // best_of / beam: the n returned
  int64_t beam_steps = 0;
  // prompt_logprobs: each prompt token's, given those before it.
  std::vector<double> prompt_lp;
  std::vector<std::vector<TokenLogprob>> prompt_top;
  bool search() const { return p.beam_width > 0 || p.best_of > p.n; }
  int64_t width() const { return p.beam_width > 0 ? p.beam_width : std::max(p.n, p.best_of); }
};

}  // namespace replayssm
