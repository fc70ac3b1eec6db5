// Beam search and best-of-n over the state manager, on any backend: every
// hypothesis is a sequence; children are forks of their parent (under
// replay they share its pages and checkpoints), pruned hypotheses are
// released, and all live hypotheses advance together in one batched step.
// Beams are ranked from each row's top log-probabilities, computed by the
// backend (Backend::top_logprobs); best-of-n draws on the backend with each
// sample's own Sampler's uniforms.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "replayssm/backend.h"
#include "replayssm/state.h"
#include "workloads/sampler.h"

namespace replayssm {

// Most hypotheses one search holds at once (beams, or best-of-n samples):
// each is a sequence stepped every token, so a mistyped width is refused
// up front rather than run until memory gives out.
inline constexpr int64_t kMaxSearchSequences = 4096;

// OK where `count` hypotheses fit: 1 ≤ count ≤ kMaxSearchSequences, and a
// beam (`beam`) no wider than the vocabulary (its first step ranks that
// many distinct tokens). The message names `what` (e.g. "--beam").
Status check_search_size(int64_t count, int64_t vocab_size, bool beam, const std::string& what);

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
  StateOptions state;
  // Called before each decode step with every live beam's new tokens (the
  // beam tree the store holds; for analysis). Optional.
  std::function<void(const std::vector<std::vector<int32_t>>&)> on_step;
};

struct SearchStats {
  StateStats state;
  BackendMemory memory;
  double prefill_s = 0.0;
  double decode_s = 0.0;
};

// The `width` best hypotheses, by score, best first. Ties between
// candidates break by parent rank, then token id, so results are
// deterministic.
Result<std::vector<Hypothesis>> beam_search(Backend& backend, std::span<const int32_t> prompt, const BeamOptions& opt,
                                            SearchStats* stats = nullptr);

// The bookkeeping of one beam-search step (the engine's beam requests
// share it). From each live beam's candidates — top[b·k + i] is beams[b]'s
// i-th largest log-probability, k = min(2·width, V) per beam — every
// beam's top 2w continuations ranked by cumulative log-probability (ties:
// beam rank, then token id); EOS candidates within the top w ranks finish
// (appended to *finished, kept sorted best first); the best w others are
// the next beams, best first. Empty once the search is over (nothing left,
// or w finished and no live beam can beat the worst of them).
struct BeamChoice {
  size_t parent;  // index into beams
  int32_t token;
  double logprob;
};
std::vector<BeamChoice> rank_beams(std::span<const TokenLogprob> top, int64_t k, std::span<const Hypothesis> beams,
                                   const ModelConfig& cfg, const BeamOptions& opt, std::vector<Hypothesis>* finished);
// The search's answer: the finished hypotheses and the live beams, the best
// `width` by score (logprob / len^length_penalty), best first.
std::vector<Hypothesis> beam_results(std::vector<Hypothesis> finished, std::span<const Hypothesis> live,
                                     const BeamOptions& opt);

struct BestOfNOptions {
  int64_t n = 4;
  int64_t max_new_tokens = 16;
  SamplingParams sampling;      // sample i uses seed + i
  bool stop_at_eos = true;
  StateOptions state;
};

// What beam_search and best_of_n refuse before anything runs: a size outside check_search_size, a negative
// max_new_tokens, a NaN length penalty, sampling outside check_sampling.
Status check_beam_options(const BeamOptions& opt, int64_t vocab_size);
Status check_best_of_n_options(const BestOfNOptions& opt, int64_t vocab_size);

// n samples sharing the prompt's prefill (forks of one sequence), in the
// order of their seeds; score = mean log-probability per token.
Result<std::vector<Hypothesis>> best_of_n(Backend& backend, std::span<const int32_t> prompt,
                                          const BestOfNOptions& opt, SearchStats* stats = nullptr);

}  // namespace replayssm
