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

// Speculative decoding: T drafts per verify step from n-gram prompt lookup
// or a draft model sharing the vocabulary.
struct SpecOptions {
  enum Kind { kNone, kNgram, kDraft } kind = kNone;
  int64_t tokens = 4;              // T
  int64_t ngram_max = 3;           // longest n-gram looked up
  const Model* draft = nullptr;    // kDraft
};

struct GenerateOptions {
  int64_t max_new_tokens = 16;
  SamplingParams sampling;
  bool stop_at_eos = true;  // stop after emitting one of the config's EOS ids
  StoreOptions store;
  SpecOptions spec;
};

struct SpecStats {
  int64_t verify_steps = 0;  // target passes that checked drafts
  int64_t drafted = 0, accepted = 0;
  double rollback_s = 0.0;   // truncating rejected drafts + any re-prefill it caused
  double acceptance_rate() const { return drafted ? static_cast<double>(accepted) / drafted : 0.0; }
  // Tokens emitted per verify step: accepted drafts + the target's own token.
  double mean_accepted() const {
    return verify_steps ? static_cast<double>(accepted) / verify_steps : 0.0;
  }
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // new tokens only
  double prefill_s = 0.0;
  double decode_s = 0.0;        // time of the decode steps (tokens after the first)
  StoreStats store;             // the store's counters at the end
  SpecStats spec;
};

// on_token (optional) sees each new token as soon as it is chosen.
Result<GenerateResult> generate(const Model& model, std::span<const int32_t> prompt,
                                const GenerateOptions& opt,
                                const std::function<void(int32_t)>& on_token = {});

}  // namespace replayssm
