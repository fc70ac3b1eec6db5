// generate_batch_cuda (see generate_cuda.h).
#include "runtime/cuda/generate_cuda.h"

#include <algorithm>
#include <chrono>

#include "workloads/sampler.h"
#include "workloads/speculative.h"

namespace replayssm::cuda {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The prompts' longest length, once every prompt and option is checked.
Result<size_t> check_request(const ModelConfig& c, std::span<const std::vector<int32_t>> prompts,
                             const CudaGenerateOptions& opt) {
  const int64_t B = int64_t(prompts.size()), V = c.vocab_size;
  if (B == 0) return invalid_argument("generate: no prompts");
  if (opt.max_new_tokens < 0) return invalid_argument("generate: max_new_tokens must be >= 0");
  size_t longest = 0;
  for (const auto& p : prompts) {
    if (p.empty()) return invalid_argument("generate: an empty prompt");
    for (int32_t t : p)
      if (t < 0 || t >= V)
        return invalid_argument("token id " + std::to_string(t) + " is out of range [0, " + std::to_string(V) + ")");
    longest = std::max(longest, p.size());
  }
  if (opt.spec.kind != SpecOptions::kNone && (opt.spec.tokens < 1 || opt.spec.tokens > 7))
    return invalid_argument("generate: " + std::to_string(opt.spec.tokens) +
                            " drafts per verify; the CUDA decoder verifies 1..7");
  return longest;
}
}  // namespace

Result<BatchResult> generate_batch_cuda(const DeviceModel& model, std::span<const std::vector<int32_t>> prompts,
                                        const CudaGenerateOptions& opt,
                                        const std::function<void(int64_t, int32_t)>& on_token) {
  RSSM_ASSIGN_OR_RETURN(const size_t longest, check_request(model.config(), prompts, opt));
  if (opt.max_new_tokens == 0) return BatchResult{std::vector<std::vector<int32_t>>(prompts.size())};
  DecoderOptions dopt;
  dopt.strategy = opt.strategy, dopt.batch = int64_t(prompts.size()), dopt.window = opt.window, dopt.graphs = opt.graphs;
  dopt.exact = opt.exact;
  dopt.spec_tokens = opt.spec.kind != SpecOptions::kNone ? int(opt.spec.tokens) + 1 : 0;
  dopt.max_context = decoder_context(longest, opt);
  RSSM_ASSIGN_OR_RETURN(std::unique_ptr<Decoder> dec, Decoder::create(model, dopt));
  return generate_batch_cuda(*dec, prompts, opt, on_token);
}

int64_t decoder_context(size_t longest_prompt, const CudaGenerateOptions& opt) {
  // A finished sequence idles a position per plain step (it accepts
  // nothing of a verify), and a verify reaches spec.tokens + 1 past the
  // last committed token. Without speculation every live sequence takes a
  // token per step, so the idle ones stay within max_new_tokens; with it, a
  // sequence can finish max_new_tokens / (spec.tokens + 1) steps in and
  // then idle through as many plain steps as the others need.
  const bool spec = opt.spec.kind != SpecOptions::kNone;
  return int64_t(longest_prompt) + opt.max_new_tokens + (spec ? opt.max_new_tokens + opt.spec.tokens + 1 : 0);
}

Result<BatchResult> generate_batch_cuda(Decoder& decoder, std::span<const std::vector<int32_t>> prompts,
                                        const CudaGenerateOptions& opt,
                                        const std::function<void(int64_t, int32_t)>& on_token) {
  const ModelConfig& c = decoder.model().config();
  const int64_t B = int64_t(prompts.size()), V = c.vocab_size;
  RSSM_ASSIGN_OR_RETURN(const size_t longest, check_request(c, prompts, opt));
  const bool speculate = opt.spec.kind != SpecOptions::kNone;
  const DecoderOptions& dopt = decoder.options();
  if (dopt.batch != B)
    return invalid_argument("generate: " + std::to_string(B) + " prompts for a decoder of batch " +
                            std::to_string(dopt.batch));
  if (speculate && dopt.spec_tokens < opt.spec.tokens + 1)
    return invalid_argument("generate: " + std::to_string(opt.spec.tokens) + " drafts need a decoder with spec_tokens >= " +
                            std::to_string(opt.spec.tokens + 1) + " (it has " + std::to_string(dopt.spec_tokens) + ")");
  if (dopt.max_context < decoder_context(longest, opt))
    return invalid_argument("generate: the decoder's context (" + std::to_string(dopt.max_context) +
                            ") is under the " + std::to_string(decoder_context(longest, opt)) + " this request can reach");
  BatchResult out;
  out.tokens.resize(size_t(B));
  if (opt.max_new_tokens == 0) return out;
  RSSM_RETURN_IF_ERROR(decoder.reset());
  Decoder* dec = &decoder;

  const bool sample = opt.sampling.temperature > 0.0f;
  std::unique_ptr<Session> draft;  // the draft model's session (its backend: opt.spec.draft)
  if (opt.spec.kind == SpecOptions::kDraft) {
    if (opt.spec.draft == nullptr) return invalid_argument("generate: draft speculation needs a draft model");
    RSSM_ASSIGN_OR_RETURN(draft, Session::create(*opt.spec.draft, StateOptions{}));
  }
  std::vector<Sampler> samplers;
  std::vector<std::unique_ptr<DraftSource>> sources(static_cast<size_t>(B));
  std::vector<std::vector<int32_t>> context(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) {
    SamplingParams sp = opt.sampling;
    sp.seed = opt.sampling.seed + uint64_t(i);
    samplers.emplace_back(sp);
    RSSM_ASSIGN_OR_RETURN(sources[size_t(i)], make_draft_source(c, opt.spec, draft.get(), sp, i));
    context[size_t(i)] = prompts[size_t(i)];
  }
  std::vector<float> logits(sample && dopt.spec_tokens > 0 ? size_t(B * V) * size_t(dopt.spec_tokens) : 0);  // sampled verifies
  std::vector<int32_t> tok, next(static_cast<size_t>(B)), last(static_cast<size_t>(B));
  std::vector<bool> done(static_cast<size_t>(B), false);
  auto is_eos = [&](int32_t id) {
    return opt.stop_at_eos && std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) != c.eos_token_ids.end();
  };
  // Appends a new token to sequence b; false once the sequence is done.
  auto emit = [&](size_t b, int32_t id) {
    if (done[b]) return false;
    out.tokens[b].push_back(id);
    context[b].push_back(id);
    if (on_token) on_token(int64_t(b), id);
    done[b] = is_eos(id) || int64_t(out.tokens[b].size()) >= opt.max_new_tokens;
    return !done[b];
  };
  auto all_done = [&] { return std::all_of(done.begin(), done.end(), [](bool d) { return d; }); };
  // Sampled tokens for the sequences `bs` from the last step's rows, drawn
  // on the device (Decoder::sample) with each sequence's own Sampler's
  // uniform — the draw Sampler::sample makes, without copying rows back.
  std::vector<int32_t> rows, drawn;
  std::vector<double> uniforms, lps;
  auto draw = [&](const std::vector<size_t>& bs) -> Status {
    rows.clear(), uniforms.clear();
    for (size_t b : bs) rows.push_back(int32_t(b)), uniforms.push_back(samplers[b].uniform());
    drawn.resize(bs.size()), lps.resize(bs.size());
    RSSM_RETURN_IF_ERROR(dec->sample(opt.sampling.temperature, opt.sampling.top_p, rows, uniforms, drawn, lps));
    for (size_t i = 0; i < bs.size(); ++i) last[bs[i]] = drawn[i];
    return {};
  };
  std::vector<size_t> every(static_cast<size_t>(B)), ready;
  for (size_t b = 0; b < size_t(B); ++b) every[b] = b;
  const double start = now_s();
  // The prompts: while every sequence is inside its prompt, whole chunks of
  // it go in one step (as long as the shortest allows). After that, ragged
  // steps: each unfinished prompt takes its next chunk (up to max_chunk)
  // while the sequences past theirs feed what they have chosen, one token
  // each, and finished ones nothing — a short prompt does not hold a long
  // one to a token a step. The last token of each prompt's step picks its
  // first new token.
  std::vector<size_t> fed(static_cast<size_t>(B), 0);  // prompt tokens in
  std::vector<int32_t> count(static_cast<size_t>(B));
  for (;;) {
    size_t T = size_t(dec->max_chunk());
    bool any = false, all = true;
    for (size_t b = 0; b < size_t(B); ++b) {
      const bool in = fed[b] < prompts[b].size();
      any |= in, all &= in;
      if (in) T = std::min(T, prompts[b].size() - fed[b]);
    }
    if (!any) break;
    tok.clear();
    for (size_t b = 0; b < size_t(B); ++b) {
      const size_t left = prompts[b].size() - fed[b];  // fed never passes the prompt
      count[b] = int32_t(all ? T : left > 0 ? std::min(left, size_t(dec->max_chunk())) : done[b] ? 0 : 1);
      if (left == 0) {
        if (count[b] == 1) tok.push_back(last[b]);
        continue;
      }
      tok.insert(tok.end(), prompts[b].begin() + int64_t(fed[b]), prompts[b].begin() + int64_t(fed[b]) + count[b]);
    }
    RSSM_RETURN_IF_ERROR(all ? dec->step(tok, int(T), next) : dec->step_ragged(tok, count, next));
    ready.clear();
    for (size_t b = 0; b < size_t(B); ++b) {
      if (count[b] == 0) continue;
      if (fed[b] < prompts[b].size()) {
        fed[b] += size_t(count[b]);
        if (fed[b] < prompts[b].size()) continue;
      } else {
        emit(b, last[b]);  // a shorter prompt's choice, fed this step
      }
      last[b] = next[b];
      ready.push_back(b);
    }
    if (sample && !ready.empty()) RSSM_RETURN_IF_ERROR(draw(ready));
  }
  const double prefill_end = now_s();
  // Decoding: last[b] is chosen and not yet fed. Emit it, draft after it,
  // then one step (or verify) feeds it with the drafts.
  std::vector<Draft> drafts(static_cast<size_t>(B));
  std::vector<int32_t> argmax, accepted(static_cast<size_t>(B));
  for (;;) {
    int T = 1;
    for (size_t b = 0; b < size_t(B); ++b) {
      drafts[b] = Draft{};
      if (!emit(b, last[b]) || !speculate) continue;
      const int64_t room = opt.max_new_tokens - int64_t(out.tokens[b].size());
      RSSM_ASSIGN_OR_RETURN(drafts[b], sources[b]->propose(context[b], std::min(opt.spec.tokens, room)));
      if (int64_t(drafts[b].tokens.size()) > opt.spec.tokens)
        return invalid_argument("generate: a draft source proposed " + std::to_string(drafts[b].tokens.size()) +
                                " tokens, over the " + std::to_string(opt.spec.tokens) + " asked for");
      T = std::max(T, 1 + int(drafts[b].tokens.size()));
    }
    if (all_done()) break;
    tok.assign(size_t(B) * T, 0);
    for (size_t b = 0; b < size_t(B); ++b)
      for (int i = 0; i < T; ++i) {  // padding repeats the last real token; it is never accepted
        const int64_t k = int64_t(drafts[b].tokens.size());
        tok[b * T + i] = i == 0 || k == 0 ? last[b] : drafts[b].tokens[size_t(std::min<int64_t>(i, k) - 1)];
      }
    if (T == 1) {
      RSSM_RETURN_IF_ERROR(dec->step(tok, 1, next));
      for (size_t b = 0; b < size_t(B); ++b) last[b] = next[b];
      if (sample) RSSM_RETURN_IF_ERROR(draw(every));
      continue;
    }
    argmax.resize(size_t(B) * T);
    RSSM_RETURN_IF_ERROR(dec->verify(tok, T, argmax, sample ? logits.data() : nullptr));
    for (size_t b = 0; b < size_t(B); ++b) {
      const Draft& d = drafts[b];
      const int64_t k = int64_t(d.tokens.size());
      AcceptResult a;
      if (sample) {
        a = accept_drafts({logits.data() + b * size_t(T) * size_t(V), size_t(k + 1) * size_t(V)}, V, d, samplers[b]);
      } else {
        while (a.accepted < k && argmax[b * size_t(T) + size_t(a.accepted)] == d.tokens[size_t(a.accepted)])
          ++a.accepted;
        a.next = argmax[b * size_t(T) + size_t(a.accepted)];
      }
      accepted[b] = done[b] ? 0 : int32_t(1 + a.accepted);  // a finished sequence keeps its place
      if (done[b]) continue;
      if (k > 0) {
        out.spec.verify_steps++;
        out.spec.drafted += k;
        out.spec.accepted += a.accepted;
        out.spec.rejections += a.accepted < k;
      }
      for (int64_t j = 0; j < a.accepted && emit(b, d.tokens[size_t(j)]); ++j) {}
      last[b] = a.next;
    }
    const double r0 = now_s();
    RSSM_RETURN_IF_ERROR(dec->accept(accepted));
    out.spec.rollback_s += now_s() - r0;
  }
  const double end = now_s();
  out.prefill_s = prefill_end - start;
  out.decode_s = end - prefill_end;
  out.state.state_bytes = out.state.state_bytes_peak = dec->memory().state_bytes;
  out.state.kv_bytes = out.state.kv_bytes_peak = dec->memory().kv_bytes;
  return out;
}

}  // namespace replayssm::cuda
