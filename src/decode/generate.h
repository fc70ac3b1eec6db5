// Autoregressive generation of one sequence through a Session: a prefill of
// the prompt, then one decode step per new token, every token committed on
// arrival (the store flushes, evicts and restores as its options say).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "decode/sampler.h"
#include "replayssm/model.h"
#include "replayssm/replay_store.h"

namespace replayssm {

struct GenerateOptions {
  int64_t max_new_tokens = 16;
  SamplingParams sampling;
  bool stop_at_eos = true;  // stop after emitting one of the config's EOS ids
  StoreOptions store;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // new tokens only
  double prefill_s = 0.0;
  double decode_s = 0.0;        // time of the decode steps (tokens after the first)
  StoreStats store;             // the store's counters at the end
};

// on_token (optional) sees each new token as soon as it is chosen.
Result<GenerateResult> generate(const Model& model, std::span<const int32_t> prompt,
                                const GenerateOptions& opt,
                                const std::function<void(int32_t)>& on_token = {});

}  // namespace replayssm
