// Autoregressive generation through a Session, on any backend: a prefill of
// the prompt(s), then one decode step per new token, every token committed
// on arrival (the state manager flushes, evicts and restores as its
// options say). generate_batch decodes several independent prompts
// together, one batched step per iteration; generate is its batch of one.
//
// Greedy tokens are the backend's argmax of each row; sampled ones its draw
// at the uniforms of the prompt's own Sampler, so a run is reproducible
// from its seed on every backend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "replayssm/backend.h"
#include "replayssm/state.h"
#include "workloads/sampler.h"

namespace replayssm {

class DraftSource;  // workloads/speculative.h

// Speculative decoding: T drafts per verify step from n-gram prompt lookup,
// a draft model sharing the vocabulary, or a caller's source.
struct SpecOptions {
  enum Kind { kNone, kNgram, kDraft, kCustom } kind = kNone;
  int64_t tokens = 4;              // T
  int64_t ngram_max = 3;           // longest n-gram looked up
  // kDraft: the draft model's backend, of the same kind as the target's
  // (it decodes on its own state manager, with the target's options).
  Backend* draft = nullptr;
  // kCustom: the draft source of prompt i of the batch (e.g. the benchmark's
  // drafts of controlled accuracy).
  std::function<Result<std::unique_ptr<DraftSource>>(int64_t)> make_source;
};

// What generate refuses before anything runs: a kind outside the enum, a
// draft length under 1, a draft model without a backend or with another
// vocabulary.
Status check_spec_options(const SpecOptions& spec, const ModelConfig& target, const std::string& who);

struct GenerateOptions {
  int64_t max_new_tokens = 16;
  SamplingParams sampling;
  bool stop_at_eos = true;  // stop after emitting one of the config's EOS ids
  StateOptions state;
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
  StateStats state;             // the state manager's counters at the end
  BackendMemory memory;         // what the backend held at the end
  SpecStats spec;
};

// on_token (optional) sees each new token as soon as it is chosen.
Result<GenerateResult> generate(Backend& backend, std::span<const int32_t> prompt, const GenerateOptions& opt,
                                const std::function<void(int32_t)>& on_token = {});

struct BatchResult {
  std::vector<std::vector<int32_t>> tokens;  // per prompt, new tokens only
  double prefill_s = 0.0;                    // the steps prefilling every prompt
  double decode_s = 0.0;                     // every step after them
  StateStats state;
  BackendMemory memory;
  SpecStats spec;                            // summed over the prompts
};

// Every prompt as its own sequence (and request) of one state manager,
// prefilled together (in steps of at most the backend's rows) and decoded
// in batched steps until each has max_new_tokens (or EOS). Prompt i
// samples with its own generator seeded seed + i, as generate() with that
// seed would. With speculation every sequence drafts and verifies in the
// same step. on_token(i, token) sees prompt i's tokens.
Result<BatchResult> generate_batch(Backend& backend, std::span<const std::vector<int32_t>> prompts,
                                   const GenerateOptions& opt,
                                   const std::function<void(int64_t, int32_t)>& on_token = {});

}  // namespace replayssm
