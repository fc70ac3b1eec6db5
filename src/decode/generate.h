// Autoregressive generation through a Session: a prefill of the prompt(s),
// then one decode step per new token, every token committed on arrival (the
// store flushes, evicts and restores as its options say). generate_batch
// decodes several independent prompts together, one batched step per
// iteration; generate is its batch of one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "decode/sampler.h"
#include "replayssm/model.h"
#include "replayssm/replay_store.h"

namespace replayssm {

class DraftSource;  // decode/speculative.h

// Speculative decoding: T drafts per verify step from n-gram prompt lookup,
// a draft model sharing the vocabulary, or a caller's source.
struct SpecOptions {
  enum Kind { kNone, kNgram, kDraft, kCustom } kind = kNone;
  int64_t tokens = 4;              // T
  int64_t ngram_max = 3;           // longest n-gram looked up
  const Model* draft = nullptr;    // kDraft
  // kCustom: the draft source of prompt i of the batch (e.g. the benchmark's
  // drafts of controlled accuracy).
  std::function<Result<std::unique_ptr<DraftSource>>(int64_t)> make_source;
};

struct GenerateOptions {
  int64_t max_new_tokens = 16;
  SamplingParams sampling;
  bool stop_at_eos = true;  // stop after emitting one of the config's EOS ids
  StoreOptions store;
  SpecOptions spec;
};

struct SpecStats {
  int64_t verify_steps = 0;  // target passes that checked drafts (per sequence)
  int64_t drafted = 0, accepted = 0;
  int64_t rejections = 0;    // verify steps that dropped at least one draft
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

struct BatchResult {
  std::vector<std::vector<int32_t>> tokens;  // per prompt, new tokens only
  double prefill_s = 0.0;                    // the one step prefilling every prompt
  double decode_s = 0.0;                     // every step after it
  StoreStats store;
  SpecStats spec;                            // summed over the prompts
};

// Every prompt as its own sequence (and request) in one store, prefilled in
// one step and decoded in batched steps until each has max_new_tokens (or
// EOS). Prompt i samples with its own generator seeded seed + i, as
// generate() with that seed would. With speculation every sequence drafts
// and verifies in the same step. on_token(i, token) sees prompt i's tokens.
Result<BatchResult> generate_batch(const Model& model, std::span<const std::vector<int32_t>> prompts,
                                   const GenerateOptions& opt,
                                   const std::function<void(int64_t, int32_t)>& on_token = {});

}  // namespace replayssm
