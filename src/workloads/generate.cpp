// generate and generate_batch (see generate.h). The first new token of each
// prompt comes from the prefill's last row, so decode_s covers exactly the
// decode steps. With speculation, each iteration feeds [last, d_1 .. d_k] as
// drafts, keeps the accepted prefix (commit) and drops the rest (truncate):
// greedy speculation emits exactly the tokens of greedy decoding. A batch
// mixes both kinds of input in one step: a sequence without drafts this
// iteration takes a plain committed token.
#include "workloads/generate.h"

#include <algorithm>

#include "core/clock.h"
#include "workloads/session.h"
#include "workloads/speculative.h"

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

Status check_spec_options(const SpecOptions& spec, const ModelConfig& target, const std::string& who) {
  if (spec.kind != SpecOptions::kNone && spec.kind != SpecOptions::kNgram && spec.kind != SpecOptions::kDraft &&
      spec.kind != SpecOptions::kCustom)
    return invalid_argument(who + ": spec.kind " + std::to_string(int(spec.kind)) + " is not a SpecOptions kind");
  if (spec.kind == SpecOptions::kNone) return {};
  if (spec.tokens < 1) return invalid_argument(who + ": speculative draft length must be >= 1");
  if (spec.kind == SpecOptions::kDraft) {
    if (spec.draft == nullptr) return invalid_argument(who + ": draft speculation needs a draft model");
    if (spec.draft->config().vocab_size != target.vocab_size)
      return invalid_argument("draft model " + spec.draft->config().dir + " has vocabulary " +
                              std::to_string(spec.draft->config().vocab_size) + ", the target has " +
                              std::to_string(target.vocab_size));
  }
  if (spec.kind == SpecOptions::kCustom && !spec.make_source)
    return invalid_argument(who + ": custom speculation needs make_source");
  return {};
}

Result<BatchResult> generate_batch(Backend& backend, std::span<const std::vector<int32_t>> prompts,
                                   const GenerateOptions& opt,
                                   const std::function<void(int64_t, int32_t)>& on_token) {
  const ModelConfig& cfg = backend.config();
  const int64_t V = cfg.vocab_size;
  if (prompts.empty()) return invalid_argument("generate: no prompts");
  for (const auto& p : prompts)
    if (p.empty()) return invalid_argument("generate: the prompt is empty");
  if (opt.max_new_tokens < 0) return invalid_argument("generate: max_new_tokens must be >= 0");
  RSSM_RETURN_IF_ERROR(check_sampling(opt.sampling, "generate"));
  RSSM_RETURN_IF_ERROR(check_spec_options(opt.spec, cfg, "generate"));
  RSSM_ASSIGN_OR_RETURN(auto session, Session::create(backend, opt.state));
  StateManager& state = session->state();
  std::unique_ptr<Session> draft;  // shared by every prompt's drafts
  if (opt.spec.kind == SpecOptions::kDraft) {
    RSSM_ASSIGN_OR_RETURN(draft, Session::create(*opt.spec.draft, opt.state));
  }
  std::vector<Lane> lanes;
  lanes.reserve(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams sp = opt.sampling;
    sp.seed = opt.sampling.seed + static_cast<uint64_t>(i);
    Lane l(static_cast<int64_t>(i), state.add_sequence(), sp);
    RSSM_ASSIGN_OR_RETURN(l.drafts, make_draft_source(cfg, opt.spec, draft.get(), opt.sampling, static_cast<int64_t>(i)));
    l.context.assign(prompts[i].begin(), prompts[i].end());
    lanes.push_back(std::move(l));
  }
  BatchResult res;
  res.tokens.resize(prompts.size());
  if (opt.max_new_tokens == 0) return res;

  double t0 = now_seconds();
  {
    std::vector<int64_t> seqs;
    std::vector<std::span<const int32_t>> ps;
    for (const Lane& l : lanes) {
      seqs.push_back(l.seq);
      ps.push_back(l.context);
    }
    RSSM_RETURN_IF_ERROR(session->prefill(seqs, ps, [&](size_t i, int64_t row) {
      Sampler* s = &lanes[i].sampler;
      return choose_tokens(backend, {&row, 1}, {&s, 1}, &lanes[i].tok);
    }));
  }
  res.prefill_s = now_seconds() - t0;
  t0 = now_seconds();
  std::vector<StepInput> in;
  std::vector<float> rows;
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
    RSSM_RETURN_IF_ERROR(session->step(in));
    if (verifying) res.spec.rollback_s += session->rebuild_seconds() - rb0;  // re-prefills after a rollback
    // Plain lanes' tokens in one read; each verifying lane's rows by argmax
    // (greedy) or whole (rejection sampling needs the distributions).
    std::vector<int64_t> plain_rows, verify_rows;
    std::vector<Sampler*> plain_samplers;
    int64_t r = 0;  // kept row
    for (Lane* l : live) {
      if (l->d.tokens.empty()) {
        plain_rows.push_back(r++);
        plain_samplers.push_back(&l->sampler);
        continue;
      }
      for (size_t j = 0; j <= l->d.tokens.size(); ++j) verify_rows.push_back(r++);
    }
    std::vector<int32_t> plain_tok(plain_rows.size()), verify_max;
    RSSM_RETURN_IF_ERROR(choose_tokens(backend, plain_rows, plain_samplers, plain_tok.data()));
    if (opt.sampling.temperature <= 0.0f && !verify_rows.empty()) {
      verify_max.resize(verify_rows.size());
      RSSM_RETURN_IF_ERROR(backend.argmax(verify_rows, verify_max.data()));
    }
    size_t pi = 0, vi = 0;
    r = 0;
    for (Lane* l : live) {
      if (l->d.tokens.empty()) {
        l->tok = plain_tok[pi++];
        ++r;
        continue;
      }
      const size_t k = l->d.tokens.size();
      AcceptResult a;
      if (opt.sampling.temperature <= 0.0f) {
        a = accept_greedy(std::span<const int32_t>(verify_max).subspan(vi, k + 1), l->d);
      } else {
        std::vector<int64_t> mine(k + 1);
        for (size_t j = 0; j <= k; ++j) mine[j] = r + static_cast<int64_t>(j);
        rows.resize((k + 1) * static_cast<size_t>(V));
        RSSM_RETURN_IF_ERROR(backend.logits(mine, rows.data()));
        a = accept_drafts(rows, V, l->d, l->sampler);
      }
      vi += k + 1;
      r += static_cast<int64_t>(k + 1);
      res.spec.verify_steps++;
      res.spec.drafted += static_cast<int64_t>(k);
      res.spec.accepted += a.accepted;
      res.spec.rejections += a.accepted < static_cast<int64_t>(k);
      const double r0 = now_seconds();
      RSSM_RETURN_IF_ERROR(state.commit(l->seq, 1 + a.accepted));
      RSSM_RETURN_IF_ERROR(state.truncate(l->seq, state.committed(l->seq)));
      res.spec.rollback_s += now_seconds() - r0;
      for (int64_t j = 0; j < a.accepted && l->emit(l->d.tokens[j], opt, cfg, on_token); ++j)
        l->context.push_back(l->d.tokens[j]);
      l->tok = a.next;
    }
  }
  res.decode_s = now_seconds() - t0;
  RSSM_RETURN_IF_ERROR(session->flush());
  res.state = state.stats();
  res.memory = backend.memory();
  for (Lane& l : lanes) res.tokens[l.index] = std::move(l.out);
  return res;
}

Result<GenerateResult> generate(Backend& backend, std::span<const int32_t> prompt, const GenerateOptions& opt,
                                const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) return invalid_argument("generate: the prompt is empty");
  const std::vector<std::vector<int32_t>> one{std::vector<int32_t>(prompt.begin(), prompt.end())};
  std::function<void(int64_t, int32_t)> cb;
  if (on_token) cb = [&](int64_t, int32_t t) { on_token(t); };
  RSSM_ASSIGN_OR_RETURN(BatchResult b, generate_batch(backend, one, opt, cb));
  GenerateResult res;
  res.tokens = std::move(b.tokens[0]);
  res.prefill_s = b.prefill_s;
  res.decode_s = b.decode_s;
  res.state = b.state;
  res.memory = b.memory;
  res.spec = b.spec;
  return res;
}

}  // namespace replayssm
