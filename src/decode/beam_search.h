// Beam search and best-of-n on the store: every hypothesis is a store
// sequence; children are forks of their parent (under replay they share its
// pages and checkpoints), pruned hypotheses are released, and all live
// hypotheses advance together in one batched step.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "decode/sampler.h"
#include "replayssm/model.h"
#include "replayssm/replay_store.h"

namespace replayssm {

struct Hypothesis {
  std::vector<int32_t> tokens;  // new tokens only
  double logprob = 0.0;         // Σ log p(token) under the model (temperature 1)
  double score = 0.0;           // beam: logprob / len^length_penalty; best-of-n: mean logprob
};

struct BeamOptions {
  int64_t width = 4;
  int64_t max_new_tokens = 16;
  double length_penalty = 1.0;  // score = logprob / (new tokens)^length_penalty
  bool stop_at_eos = true;      // a hypothesis ending in EOS is finished
  StoreOptions store;
  // Called before each decode step with every live beam's new tokens (the
  // beam tree the store holds; for analysis). Optional.
  std::function<void(const std::vector<std::vector<int32_t>>&)> on_step;
};

struct SearchStats {
  StoreStats store;
  double decode_s = 0.0;
};

// The `width` best hypotheses, by score, best first. Ties between
// candidates break by parent rank, then token id, so results are
// deterministic.
Result<std::vector<Hypothesis>> beam_search(const Model& model, std::span<const int32_t> prompt,
                                            const BeamOptions& opt, SearchStats* stats = nullptr);

struct BestOfNOptions {
  int64_t n = 4;
  int64_t max_new_tokens = 16;
  SamplingParams sampling;      // sample i uses seed + i
  bool stop_at_eos = true;
  StoreOptions store;
};

// n samples sharing the prompt's prefill (forks of one sequence), in the
// order of their seeds; score = mean log-probability per token.
Result<std::vector<Hypothesis>> best_of_n(const Model& model, std::span<const int32_t> prompt,
                                          const BestOfNOptions& opt, SearchStats* stats = nullptr);

}  // namespace replayssm
