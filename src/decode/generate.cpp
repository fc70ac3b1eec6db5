// generate (see generate.h). The first new token comes from the prefill's
// last row, so decode_s covers exactly the decode steps. With speculation,
// each iteration feeds [last, d_1 .. d_k] as drafts, keeps the accepted
// prefix (commit) and drops the rest (truncate): greedy speculation emits
// exactly the tokens of greedy decoding.
#include "decode/generate.h"

#include <algorithm>

#include "core/clock.h"
#include "decode/session.h"
#include "decode/speculative.h"

namespace replayssm {

namespace {

// Appends `t` unless the generation is over; returns false once it is.
struct Emitter {
  const GenerateOptions& opt;
  const ModelConfig& cfg;
  const std::function<void(int32_t)>& on_token;
  GenerateResult& res;
  bool done = false;
  bool emit(int32_t t) {
    if (done) return false;
    res.tokens.push_back(t);
    if (on_token) on_token(t);
    done = static_cast<int64_t>(res.tokens.size()) >= opt.max_new_tokens || (opt.stop_at_eos && cfg.is_eos(t));
    return !done;
  }
};

}  // namespace

Result<GenerateResult> generate(const Model& model, std::span<const int32_t> prompt,
                                const GenerateOptions& opt,
                                const std::function<void(int32_t)>& on_token) {
  const ModelConfig& cfg = model.config();
  const int64_t V = cfg.vocab_size;
  if (prompt.empty()) return invalid_argument("generate: the prompt is empty");
  if (opt.max_new_tokens < 0) return invalid_argument("generate: max_new_tokens must be >= 0");
  if (opt.spec.kind != SpecOptions::kNone && opt.spec.tokens < 1)
    return invalid_argument("generate: speculative draft length must be >= 1");
  RSSM_ASSIGN_OR_RETURN(auto session, Session::create(model, opt.store));
  std::unique_ptr<DraftSource> drafts;
  if (opt.spec.kind == SpecOptions::kNgram) drafts = std::make_unique<NgramDraft>(opt.spec.ngram_max);
  if (opt.spec.kind == SpecOptions::kDraft) {
    if (opt.spec.draft == nullptr) return invalid_argument("generate: draft speculation needs a draft model");
    RSSM_ASSIGN_OR_RETURN(drafts, ModelDraft::create(*opt.spec.draft, model, opt.store, opt.sampling));
  }
  ReplayStore& store = session->store();
  const int64_t seq = store.add_sequence();
  Sampler sampler(opt.sampling);
  GenerateResult res;
  Emitter out{opt, cfg, on_token, res};
  std::vector<float> logits;
  if (opt.max_new_tokens == 0) return res;

  double t0 = now_seconds();
  const StepInput first{seq, prompt};
  RSSM_RETURN_IF_ERROR(session->step({&first, 1}, &logits));
  res.prefill_s = now_seconds() - t0;
  t0 = now_seconds();
  int32_t tok = sampler.sample(logits);
  std::vector<int32_t> context(prompt.begin(), prompt.end());
  while (out.emit(tok)) {
    context.push_back(tok);
    Draft d;
    if (drafts) {
      const int64_t room = opt.max_new_tokens - static_cast<int64_t>(res.tokens.size());
      RSSM_ASSIGN_OR_RETURN(d, drafts->propose(context, std::min(opt.spec.tokens, room)));
    }
    if (d.tokens.empty()) {  // plain AR step
      const StepInput in{seq, {&tok, 1}};
      RSSM_RETURN_IF_ERROR(session->step({&in, 1}, &logits));
      tok = sampler.sample(logits);
      continue;
    }
    // Verify [tok, d_1 .. d_k] in one target pass, as uncommitted drafts.
    std::vector<int32_t> feed{tok};
    feed.insert(feed.end(), d.tokens.begin(), d.tokens.end());
    const double rb0 = session->rebuild_seconds();
    const StepInput in{seq, feed, /*commit=*/false, StepInput::kAll};
    RSSM_RETURN_IF_ERROR(session->step({&in, 1}, &logits));
    res.spec.rollback_s += session->rebuild_seconds() - rb0;  // re-prefills after a rollback
    const AcceptResult a = accept_drafts(logits, V, d, sampler);
    res.spec.verify_steps++;
    res.spec.drafted += static_cast<int64_t>(d.tokens.size());
    res.spec.accepted += a.accepted;
    const double r0 = now_seconds();
    RSSM_RETURN_IF_ERROR(store.commit(seq, 1 + a.accepted));
    RSSM_RETURN_IF_ERROR(store.truncate(seq, store.committed(seq)));
    res.spec.rollback_s += now_seconds() - r0;
    for (int64_t i = 0; i < a.accepted && out.emit(d.tokens[i]); ++i) context.push_back(d.tokens[i]);
    tok = a.next;
  }
  res.decode_s = now_seconds() - t0;
  res.store = store.stats();
  return res;
}

}  // namespace replayssm
