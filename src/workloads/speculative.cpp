// Draft sources and acceptance (see speculative.h).
#include "workloads/speculative.h"

#include <algorithm>

namespace replayssm {

Result<Draft> NgramDraft::propose(std::span<const int32_t> ctx, int64_t max_tokens) {
  Draft d;
  const int64_t L = static_cast<int64_t>(ctx.size());
  for (int64_t n = std::min(max_n_, L - 1); n >= 1 && d.tokens.empty(); --n) {
    // The most recent earlier occurrence of the last n tokens.
    for (int64_t start = L - n - 1; start >= 0; --start) {
      if (!std::equal(ctx.begin() + start, ctx.begin() + start + n, ctx.end() - n)) continue;
      for (int64_t j = start + n; j < L && static_cast<int64_t>(d.tokens.size()) < max_tokens; ++j)
        d.tokens.push_back(ctx[j]);
      break;
    }
  }
  return d;
}

Result<std::unique_ptr<ModelDraft>> ModelDraft::create(Session& draft, const ModelConfig& target,
                                                       const SamplingParams& sampling) {
  if (draft.config().vocab_size != target.vocab_size)
    return invalid_argument("draft model " + draft.config().dir + " has vocabulary " +
                            std::to_string(draft.config().vocab_size) + ", the target has " +
                            std::to_string(target.vocab_size));
  SamplingParams p = sampling;
  p.seed = sampling.seed ^ 0x9e3779b97f4a7c15ull;  // its own stream, still reproducible
  std::unique_ptr<ModelDraft> d(new ModelDraft(draft, p));
  d->seq_ = draft.state().add_sequence();
  return d;
}

ModelDraft::~ModelDraft() { (void)session_.release(seq_); }

Result<Draft> ModelDraft::propose(std::span<const int32_t> ctx, int64_t max_tokens) {
  Draft d;
  if (max_tokens <= 0) return d;
  StateManager& st = session_.state();
  Backend& backend = session_.backend();
  // Roll back to the longest common prefix (always keep one token to feed).
  const auto have = st.tokens(seq_);
  int64_t common = 0;
  while (common < static_cast<int64_t>(have.size()) && common < static_cast<int64_t>(ctx.size()) &&
         have[common] == ctx[common])
    ++common;
  common = std::min<int64_t>(common, static_cast<int64_t>(ctx.size()) - 1);
  RSSM_RETURN_IF_ERROR(st.truncate(seq_, common));
  // The catch-up in steps of at most the backend's rows, the last one's
  // logits kept.
  const std::span<const int32_t> rest = ctx.subspan(static_cast<size_t>(common));
  const int64_t budget = std::max<int64_t>(backend.max_step_rows(), 1);
  for (size_t at = 0; at < rest.size();) {
    const size_t n = std::min(rest.size() - at, static_cast<size_t>(budget));
    const StepInput catch_up{seq_, rest.subspan(at, n), true, at + n == rest.size() ? StepInput::kLast : StepInput::kNone};
    RSSM_RETURN_IF_ERROR(session_.step({&catch_up, 1}));
    at += n;
  }
  const bool greedy = sampler_.params().temperature <= 0.0f;
  std::vector<float> logits;
  const int64_t row0 = 0;
  for (int64_t j = 0; j < max_tokens; ++j) {
    int32_t t = 0;
    if (greedy) {
      RSSM_RETURN_IF_ERROR(backend.argmax({&row0, 1}, &t));
    } else {
      logits.resize(static_cast<size_t>(backend.config().vocab_size));
      RSSM_RETURN_IF_ERROR(backend.logits({&row0, 1}, logits.data()));
      std::vector<double> q = ops::cpu::sampling_probs(logits, sampler_.params());
      t = sampler_.draw(q);
      d.probs.push_back(std::move(q));
    }
    d.tokens.push_back(t);
    if (j + 1 == max_tokens) break;
    const StepInput next{seq_, {&d.tokens.back(), 1}, /*commit=*/false};
    RSSM_RETURN_IF_ERROR(session_.step({&next, 1}));
  }
  return d;
}

Result<std::unique_ptr<DraftSource>> make_draft_source(const ModelConfig& target, const SpecOptions& spec,
                                                       Session* draft, const SamplingParams& sampling, int64_t i) {
  switch (spec.kind) {
    case SpecOptions::kNone:
      return std::unique_ptr<DraftSource>();
    case SpecOptions::kNgram:
      return std::unique_ptr<DraftSource>(std::make_unique<NgramDraft>(spec.ngram_max));
    case SpecOptions::kDraft: {
      if (draft == nullptr) return invalid_argument("generate: draft speculation needs a draft model");
      RSSM_ASSIGN_OR_RETURN(auto d, ModelDraft::create(*draft, target, sampling));
      return std::unique_ptr<DraftSource>(std::move(d));
    }
    case SpecOptions::kCustom:
      if (!spec.make_source) return invalid_argument("generate: custom speculation needs make_source");
      return spec.make_source(i);
  }
  return std::unique_ptr<DraftSource>();
}


AcceptResult accept_greedy(std::span<const int32_t> argmaxes, const Draft& d) {
  const int64_t k = static_cast<int64_t>(d.tokens.size());
  AcceptResult r;
  while (r.accepted < k && argmaxes[size_t(r.accepted)] == d.tokens[size_t(r.accepted)]) ++r.accepted;
  r.next = argmaxes[size_t(r.accepted)];
  return r;
}

AcceptResult accept_drafts(std::span<const float> rows, int64_t V, const Draft& d, Sampler& sampler) {
  const int64_t k = static_cast<int64_t>(d.tokens.size());
  auto row = [&](int64_t i) { return rows.subspan(static_cast<size_t>(i * V), static_cast<size_t>(V)); };
  AcceptResult r;
  if (sampler.params().temperature <= 0.0f) {
    while (r.accepted < k && ops::cpu::argmax(row(r.accepted)) == d.tokens[r.accepted]) ++r.accepted;
    r.next = ops::cpu::argmax(row(r.accepted));
    return r;
  }
  for (; r.accepted < k; ++r.accepted) {
    const int32_t t = d.tokens[r.accepted];
    std::vector<double> p = ops::cpu::sampling_probs(row(r.accepted), sampler.params());
    const double q_t = d.probs.empty() ? 1.0 : d.probs[r.accepted][t];
    if (q_t > 0.0 && sampler.uniform() * q_t < p[t]) continue;  // kept with prob min(1, p/q)
    // Rejected: draw from the residual max(0, p − q), renormalised.
    double mass = 0.0;
    for (int64_t v = 0; v < V; ++v) {
      const double q = d.probs.empty() ? (v == t ? 1.0 : 0.0) : d.probs[r.accepted][v];
      p[v] = std::max(0.0, p[v] - q);
      mass += p[v];
    }
    if (mass > 0.0) {
      for (double& x : p) x /= mass;
      r.next = sampler.draw(p);
    } else {  // p == q: any rejection is a rounding artefact; sample p itself
      r.next = sampler.draw(ops::cpu::sampling_probs(row(r.accepted), sampler.params()));
    }
    return r;
  }
  r.next = sampler.draw(ops::cpu::sampling_probs(row(k), sampler.params()));
  return r;
}

}  // namespace replayssm
