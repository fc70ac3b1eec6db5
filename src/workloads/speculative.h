// Speculative decoding pieces: where drafts come from, and how a target's
// verify pass accepts them (Leviathan et al. 2023; greedy as the special
// case where every distribution is one-hot).
//
// The generation loop (generate.cpp) feeds [last, d_1 .. d_k] to the target
// as uncommitted drafts in one step, accepts on the k+1 rows (greedy: their
// argmaxes; sampling: the rows themselves), then commits the accepted
// prefix and truncates the rest — under replay a rollback is a cursor move.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "workloads/generate.h"
#include "workloads/sampler.h"
#include "workloads/session.h"

namespace replayssm {

struct Draft {
  std::vector<int32_t> tokens;
  // Per token, the distribution it was drawn from; empty = a point mass
  // (deterministic proposals such as n-gram lookup).
  std::vector<std::vector<double>> probs;
};

class DraftSource {
 public:
  virtual ~DraftSource() = default;
  // Up to max_tokens tokens continuing `context` (the prompt and every
  // token generated so far, the last one included).
  virtual Result<Draft> propose(std::span<const int32_t> context, int64_t max_tokens) = 0;
};

// Prompt lookup: the continuation of the most recent earlier occurrence of
// the context's last n tokens (n = max_n down to 1). No model.
class NgramDraft final : public DraftSource {
 public:
  explicit NgramDraft(int64_t max_n = 3) : max_n_(max_n) {}
  Result<Draft> propose(std::span<const int32_t> context, int64_t max_tokens) override;

 private:
  int64_t max_n_;
};

// A smaller model of any supported architecture with the same vocabulary,
// decoding on its own backend (of the target's kind): one sequence of the
// draft session, which the drafts of every prompt share (one session per
// backend). The sequence follows the context: each call rolls it back to
// the longest common prefix and catches up. Greedy drafts are the
// backend's argmaxes (a point mass each); sampled ones carry the rows'
// distributions. The session must outlive the draft, which releases its
// sequence when destroyed.
class ModelDraft final : public DraftSource {
 public:
  static Result<std::unique_ptr<ModelDraft>> create(Session& draft, const ModelConfig& target,
                                                    const SamplingParams& sampling);
  ~ModelDraft() override;
  Result<Draft> propose(std::span<const int32_t> context, int64_t max_tokens) override;

 private:
  ModelDraft(Session& s, const SamplingParams& p) : session_(s), sampler_(p) {}
  Session& session_;
  Sampler sampler_;
  int64_t seq_ = -1;
};

// The draft source spec asks for, for prompt i of a batch (nullptr for
// kNone): kDraft decodes on `draft`, the session over spec.draft.
Result<std::unique_ptr<DraftSource>> make_draft_source(const ModelConfig& target, const SpecOptions& spec,
                                                       Session* draft, const SamplingParams& sampling, int64_t i);

struct AcceptResult {
  int64_t accepted = 0;  // drafts kept, a prefix of the draft
  int32_t next = 0;      // the token after them: a correction, or the bonus token
};

// rows: (k+1, V) target logits; row i scores the token after d_1..d_i.
// Greedy when the sampler's temperature is 0 (draft kept while it is the
// argmax); otherwise each d_i is kept with probability min(1, p(d_i)/q(d_i))
// and a rejection draws from norm(max(0, p − q)), so the emitted tokens are
// distributed exactly as the target samples them.
AcceptResult accept_drafts(std::span<const float> rows, int64_t V, const Draft& d, Sampler& sampler);
// Greedy acceptance from the k+1 rows' argmaxes alone: drafts kept while
// each equals the argmax before it; next is the argmax after the last kept.
AcceptResult accept_greedy(std::span<const int32_t> argmaxes, const Draft& d);

}  // namespace replayssm
