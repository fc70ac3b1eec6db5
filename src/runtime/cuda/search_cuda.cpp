// beam_search_cuda and best_of_n_cuda (see search_cuda.h).
#include "runtime/cuda/search_cuda.h"

#include <algorithm>

#include "core/clock.h"
#include "workloads/sampler.h"

namespace replayssm::cuda {

namespace {

// Checks the decoder against the request, resets it, prefills the prompt
// in every sequence and points them all at sequence 0. *logits gets the
// last prompt row of every sequence (batch × vocab) when given.
Status start(Decoder& dec, std::span<const int32_t> prompt, int64_t batch, int64_t max_new_tokens, const char* who,
             std::vector<float>* logits) {
  const DecoderOptions& o = dec.options();
  const int64_t V = dec.model().config().vocab_size;
  if (prompt.empty()) return invalid_argument(std::string(who) + ": the prompt is empty");
  for (int32_t t : prompt)
    if (t < 0 || t >= V)
      return invalid_argument("token id " + std::to_string(t) + " is out of range [0, " + std::to_string(V) + ")");
  if (o.batch != batch || !o.forks)
    return invalid_argument(std::string(who) + ": needs a decoder of batch " + std::to_string(batch) +
                            " with forks (it has batch " + std::to_string(o.batch) + (o.forks ? ")" : ", no forks)"));
  if (o.max_context < int64_t(prompt.size()) + max_new_tokens)
    return invalid_argument(std::string(who) + ": the decoder's context (" + std::to_string(o.max_context) +
                            ") is under prompt + max_new_tokens (" +
                            std::to_string(int64_t(prompt.size()) + max_new_tokens) + ")");
  RSSM_RETURN_IF_ERROR(dec.reset());
  if (logits != nullptr) logits->resize(size_t(batch * V));
  std::vector<int32_t> tok, next(static_cast<size_t>(batch));
  for (size_t t = 0; t < prompt.size();) {
    const size_t T = std::min(size_t(dec.max_chunk()), prompt.size() - t);
    tok.clear();
    for (int64_t b = 0; b < batch; ++b) tok.insert(tok.end(), prompt.begin() + int64_t(t), prompt.begin() + int64_t(t + T));
    RSSM_RETURN_IF_ERROR(
        dec.step(tok, int(T), next, t + T == prompt.size() && logits != nullptr ? logits->data() : nullptr));
    t += T;
  }
  return dec.reorder(std::vector<int32_t>(size_t(batch), 0));
}

void fill_stats(const Decoder& dec, double t0, int64_t written0, SearchStats* stats) {
  if (stats == nullptr) return;
  stats->decode_s = now_seconds() - t0;
  stats->state = StateStats{};
  stats->state.state_bytes = stats->state.state_bytes_peak = dec.state_bytes_peak();
  stats->state.kv_bytes = stats->state.kv_bytes_peak = dec.memory().kv_bytes;
  stats->state.state_writes_bytes = dec.state_bytes_written() - written0;
}

DecoderOptions search_decoder(int64_t batch, size_t prompt, int64_t max_new_tokens, const CudaSearchOptions& c) {
  DecoderOptions o;
  o.strategy = c.strategy, o.window = c.window, o.graphs = c.graphs, o.batch = batch, o.forks = true;
  o.exact = c.exact;
  o.max_context = int64_t(prompt) + std::max<int64_t>(max_new_tokens, 1);
  return o;
}

}  // namespace

Result<std::vector<Hypothesis>> beam_search_cuda(Decoder& dec, std::span<const int32_t> prompt, const BeamOptions& opt,
                                                 SearchStats* stats) {
  const ModelConfig& cfg = dec.model().config();
  const int64_t V = cfg.vocab_size, w = opt.width;
  RSSM_RETURN_IF_ERROR(check_beam_options(opt, V));
  const int64_t written0 = dec.state_bytes_written();
  RSSM_RETURN_IF_ERROR(start(dec, prompt, w, opt.max_new_tokens, "beam search", nullptr));
  const double t0 = now_seconds();
  // Each beam's top 2w candidates come from the device (top_logprobs_cuda:
  // top_logprobs' ranking), so the rows never travel.
  const int k = int(std::min<int64_t>(2 * w, V));
  std::vector<int32_t> top_ids(size_t(w * k));
  std::vector<double> top_lp(size_t(w * k));
  std::vector<TokenLogprob> top(size_t(w * k));
  std::vector<Hypothesis> beams(1), finished;  // beam b lives in sequence b
  std::vector<int32_t> parent(static_cast<size_t>(w)), tok(static_cast<size_t>(w), 0), next(static_cast<size_t>(w));
  for (int64_t step = 0; step < opt.max_new_tokens && !beams.empty(); ++step) {
    RSSM_RETURN_IF_ERROR(dec.top_logprobs(k, top_ids, top_lp));
    for (size_t i = 0; i < top.size(); ++i) top[i] = {top_ids[i], top_lp[i]};
    const std::vector<BeamChoice> choice =
        rank_beams(std::span<const TokenLogprob>(top).first(beams.size() * size_t(k)), k, beams, cfg, opt, &finished);
    std::vector<Hypothesis> nb;
    for (size_t j = 0; j < size_t(w); ++j) parent[j] = int32_t(j);  // no beam: the sequence idles
    for (size_t j = 0; j < choice.size(); ++j) {
      const BeamChoice& c = choice[j];
      parent[j] = int32_t(c.parent), tok[j] = c.token;
      nb.push_back({beams[c.parent].tokens, c.logprob, 0.0});
      nb.back().tokens.push_back(c.token);
    }
    beams = std::move(nb);
    if (beams.empty() || step + 1 == opt.max_new_tokens) break;
    if (opt.on_step) {
      std::vector<std::vector<int32_t>> live;
      for (const Hypothesis& b : beams) live.push_back(b.tokens);
      opt.on_step(live);
    }
    RSSM_RETURN_IF_ERROR(dec.reorder(parent));
    RSSM_RETURN_IF_ERROR(dec.step(tok, next));
  }
  fill_stats(dec, t0, written0, stats);
  return beam_results(std::move(finished), beams, opt);
}

Result<std::vector<Hypothesis>> best_of_n_cuda(Decoder& dec, std::span<const int32_t> prompt,
                                               const BestOfNOptions& opt, SearchStats* stats) {
  const ModelConfig& cfg = dec.model().config();
  const int64_t n = opt.n;
  RSSM_RETURN_IF_ERROR(check_best_of_n_options(opt, cfg.vocab_size));
  const int64_t written0 = dec.state_bytes_written();
  RSSM_RETURN_IF_ERROR(start(dec, prompt, n, opt.max_new_tokens, "best-of-n", nullptr));
  const double t0 = now_seconds();
  // Samples are drawn on the device (Decoder::sample, decode/sampler.h
  // sample_at) with the uniforms of each sample's own Sampler, so the
  // tokens are the host samplers' own; no logits row comes back. Every
  // sample starts from the prompt's last row (sequence 0's).
  std::vector<int32_t> rows(static_cast<size_t>(n), 0);
  std::vector<double> r(static_cast<size_t>(n)), lp(static_cast<size_t>(n));
  std::vector<Sampler> samplers;
  for (int64_t i = 0; i < n; ++i) {
    SamplingParams p = opt.sampling;
    p.seed = opt.sampling.seed + static_cast<uint64_t>(i);
    samplers.emplace_back(p);
  }
  std::vector<Hypothesis> out(static_cast<size_t>(n));
  std::vector<bool> done(static_cast<size_t>(n), false);
  std::vector<int32_t> tok(static_cast<size_t>(n), 0), next(static_cast<size_t>(n));
  const bool greedy = opt.sampling.temperature <= 0.0f;  // the argmax: no uniform drawn, as Sampler::sample
  for (int64_t step = 0; step < opt.max_new_tokens; ++step) {
    for (size_t i = 0; i < size_t(n); ++i) r[i] = done[i] || greedy ? 0.0 : samplers[i].uniform();
    RSSM_RETURN_IF_ERROR(dec.sample(opt.sampling.temperature, opt.sampling.top_p, rows, r, next, lp));
    bool any = false;
    for (size_t i = 0; i < size_t(n); ++i) {
      if (done[i]) continue;  // a finished sample idles on its last token
      const int32_t t = next[i];
      out[i].tokens.push_back(t);
      out[i].logprob += lp[i];
      tok[i] = t;
      done[i] = (opt.stop_at_eos && cfg.is_eos(t)) || step + 1 == opt.max_new_tokens;
      any = any || !done[i];
    }
    if (!any) break;
    RSSM_RETURN_IF_ERROR(dec.step(tok, next));
    for (size_t i = 0; i < size_t(n); ++i) rows[i] = int32_t(i);
  }
  for (Hypothesis& h : out) h.score = h.logprob / static_cast<double>(std::max<size_t>(h.tokens.size(), 1));
  fill_stats(dec, t0, written0, stats);
  return out;
}

namespace {
// A decoder of `batch` sequences with forks for one search, whose options
// the caller checked (check_beam_options, check_best_of_n_options).
Result<std::unique_ptr<Decoder>> decoder_for(const DeviceModel& model, int64_t batch, size_t prompt,
                                             int64_t max_new_tokens, const CudaSearchOptions& cuda) {
  return Decoder::create(model, search_decoder(batch, prompt, max_new_tokens, cuda));
}
}  // namespace

Result<std::vector<Hypothesis>> beam_search_cuda(const DeviceModel& model, std::span<const int32_t> prompt,
                                                 const BeamOptions& opt, const CudaSearchOptions& cuda,
                                                 SearchStats* stats) {
  RSSM_RETURN_IF_ERROR(check_beam_options(opt, model.config().vocab_size));  // before a decoder of that width
  RSSM_ASSIGN_OR_RETURN(auto dec, decoder_for(model, opt.width, prompt.size(), opt.max_new_tokens, cuda));
  return beam_search_cuda(*dec, prompt, opt, stats);
}

Result<std::vector<Hypothesis>> best_of_n_cuda(const DeviceModel& model, std::span<const int32_t> prompt,
                                               const BestOfNOptions& opt, const CudaSearchOptions& cuda,
                                               SearchStats* stats) {
  RSSM_RETURN_IF_ERROR(check_best_of_n_options(opt, model.config().vocab_size));
  RSSM_ASSIGN_OR_RETURN(auto dec, decoder_for(model, opt.n, prompt.size(), opt.max_new_tokens, cuda));
  return best_of_n_cuda(*dec, prompt, opt, stats);
}

}  // namespace replayssm::cuda
