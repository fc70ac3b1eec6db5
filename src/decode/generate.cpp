// generate and generate_batch (see generate.h). The first new token of each
// prompt comes from the prefill's last row, so decode_s covers exactly the
// decode steps. With speculation, each iteration feeds [last, d_1 .. d_k] as
// drafts, keeps the accepted prefix (commit) and drops the rest (truncate):
// greedy speculation emits exactly the tokens of greedy decoding. A batch
// mixes both kinds of input in one step: a sequence without drafts this
// iteration takes a plain committed token.
#include "decode/generate.h"

#include <algorithm>

#include "core/clock.h"
#include "decode/session.h"
#include "decode/speculative.h"

namespace replayssm {

namespace {

// One prompt's progress. emit() appends `t` unless the generation is over;
// returns false once it is.
struct Lane {
  Lane(int64_t i, int64_t s, const SamplingParams& p) : index(i), seq(s), sampler(p) {}
  int64_t index = 0;  // into the prompts
  int64_t seq = -1;
  Sampler sampler;
  std::unique_ptr<DraftSource> drafts;
  std::vector<int32_t> context;  // prompt + tokens so far
  std::vector<int32_t> out;
  int32_t tok = 0;               // chosen, not yet fed
  bool done = false;
  // This iteration's input.
  Draft d;
  std::vector<int32_t> feed;

  bool emit(int32_t t, const GenerateOptions& opt, const ModelConfig& cfg,
            const std::function<void(int64_t, int32_t)>& on_token) {
    if (done) return false;
    out.push_back(t);
    if (on_token) on_token(index, t);
    done = static_cast<int64_t>(out.size()) >= opt.max_new_tokens || (opt.stop_at_eos && cfg.is_eos(t));
    return !done;
  }
};

}  // namespace

Result<BatchResult> generate_batch(const Model& model, std::span<const std::vector<int32_t>> prompts,
                                   const GenerateOptions& opt,
                                   const std::function<void(int64_t, int32_t)>& on_token) {
  const ModelConfig& cfg = model.config();
  const int64_t V = cfg.vocab_size;
  if (prompts.empty()) return invalid_argument("generate: no prompts");
  for (const auto& p : prompts)
    if (p.empty()) return invalid_argument("generate: the prompt is empty");
  if (opt.max_new_tokens < 0) return invalid_argument("generate: max_new_tokens must be >= 0");
  RSSM_RETURN_IF_ERROR(check_sampling(opt.sampling, "generate"));
  if (opt.spec.kind != SpecOptions::kNone && opt.spec.kind != SpecOptions::kNgram &&
      opt.spec.kind != SpecOptions::kDraft && opt.spec.kind != SpecOptions::kCustom)
    return invalid_argument("generate: spec.kind " + std::to_string(int(opt.spec.kind)) + " is not a SpecOptions kind");
  if (opt.spec.kind != SpecOptions::kNone && opt.spec.tokens < 1)
    return invalid_argument("generate: speculative draft length must be >= 1");
  RSSM_ASSIGN_OR_RETURN(auto session, Session::create(model, opt.store));
  ReplayStore& store = session->store();
  std::vector<Lane> lanes;
  lanes.reserve(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams sp = opt.sampling;
    sp.seed = opt.sampling.seed + static_cast<uint64_t>(i);
    Lane l(static_cast<int64_t>(i), store.add_sequence(), sp);
    RSSM_ASSIGN_OR_RETURN(l.drafts, make_draft_source(model.config(), opt.spec, opt.store, opt.sampling, static_cast<int64_t>(i)));
    l.context.assign(prompts[i].begin(), prompts[i].end());
    lanes.push_back(std::move(l));
  }
  BatchResult res;
  res.tokens.resize(prompts.size());
  if (opt.max_new_tokens == 0) return res;

  std::vector<float> logits;
  std::vector<StepInput> in;
  for (const Lane& l : lanes) in.push_back({l.seq, l.context});
  double t0 = now_seconds();
  RSSM_RETURN_IF_ERROR(session->step(in, &logits));
  res.prefill_s = now_seconds() - t0;
  t0 = now_seconds();
  auto row = [&](size_t r) { return std::span<const float>(logits).subspan(r * V, V); };
  for (size_t i = 0; i < lanes.size(); ++i) lanes[i].tok = lanes[i].sampler.sample(row(i));
  for (;;) {
    in.clear();
    std::vector<Lane*> live;
    bool verifying = false;
    for (Lane& l : lanes) {
      if (!l.emit(l.tok, opt, cfg, on_token)) continue;
      l.context.push_back(l.tok);
      l.d = Draft{};
      if (l.drafts) {
        const int64_t room = opt.max_new_tokens - static_cast<int64_t>(l.out.size());
        RSSM_ASSIGN_OR_RETURN(l.d, l.drafts->propose(l.context, std::min(opt.spec.tokens, room)));
        // Acceptance reads probs[i][token]: a row per token, V entries each.
        bool shaped = l.d.probs.empty() || l.d.probs.size() == l.d.tokens.size();
        for (const std::vector<double>& p : l.d.probs) shaped &= static_cast<int64_t>(p.size()) == V;
        if (!shaped)
          return invalid_argument("generate: a draft of " + std::to_string(l.d.tokens.size()) + " tokens came with " +
                                  std::to_string(l.d.probs.size()) + " probability rows (one of " + std::to_string(V) +
                                  " per token, or none)");
      }
      if (l.d.tokens.empty()) {  // plain AR step
        in.push_back({l.seq, {&l.tok, 1}});
      } else {  // verify [tok, d_1 .. d_k] in one target pass, as uncommitted drafts
        l.feed.assign(1, l.tok);
        l.feed.insert(l.feed.end(), l.d.tokens.begin(), l.d.tokens.end());
        in.push_back({l.seq, l.feed, /*commit=*/false, StepInput::kAll});
        verifying = true;
      }
      live.push_back(&l);
    }
    if (live.empty()) break;
    const double rb0 = session->rebuild_seconds();
    RSSM_RETURN_IF_ERROR(session->step(in, &logits));
    if (verifying) res.spec.rollback_s += session->rebuild_seconds() - rb0;  // re-prefills after a rollback
    size_t r = 0;  // logits row
    for (Lane* l : live) {
      if (l->d.tokens.empty()) {
        l->tok = l->sampler.sample(row(r++));
        continue;
      }
      const size_t k = l->d.tokens.size();
      const auto rows = std::span<const float>(logits).subspan(r * V, (k + 1) * V);
      r += k + 1;
      const AcceptResult a = accept_drafts(rows, V, l->d, l->sampler);
      res.spec.verify_steps++;
      res.spec.drafted += static_cast<int64_t>(k);
      res.spec.accepted += a.accepted;
      res.spec.rejections += a.accepted < static_cast<int64_t>(k);
      const double r0 = now_seconds();
      RSSM_RETURN_IF_ERROR(store.commit(l->seq, 1 + a.accepted));
      RSSM_RETURN_IF_ERROR(store.truncate(l->seq, store.committed(l->seq)));
      res.spec.rollback_s += now_seconds() - r0;
      for (int64_t j = 0; j < a.accepted && l->emit(l->d.tokens[j], opt, cfg, on_token); ++j)
        l->context.push_back(l->d.tokens[j]);
      l->tok = a.next;
    }
  }
  res.decode_s = now_seconds() - t0;
  res.store = store.stats();
  for (Lane& l : lanes) res.tokens[l.index] = std::move(l.out);
  return res;
}

Result<GenerateResult> generate(const Model& model, std::span<const int32_t> prompt,
                                const GenerateOptions& opt,
                                const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) return invalid_argument("generate: the prompt is empty");
  const std::vector<std::vector<int32_t>> one{std::vector<int32_t>(prompt.begin(), prompt.end())};
  std::function<void(int64_t, int32_t)> cb;
  if (on_token) cb = [&](int64_t, int32_t t) { on_token(t); };
  RSSM_ASSIGN_OR_RETURN(BatchResult b, generate_batch(model, one, opt, cb));
  GenerateResult res;
  res.tokens = std::move(b.tokens[0]);
  res.prefill_s = b.prefill_s;
  res.decode_s = b.decode_s;
  res.store = b.store;
  res.spec = b.spec;
  return res;
}

}  // namespace replayssm
