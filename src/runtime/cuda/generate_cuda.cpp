// generate_batch_cuda (see generate_cuda.h).
#include "runtime/cuda/generate_cuda.h"

#include <algorithm>
#include <chrono>

#include "decode/sampler.h"

namespace replayssm::cuda {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Result<BatchResult> generate_batch_cuda(const DeviceModel& model, std::span<const std::vector<int32_t>> prompts,
                                        const CudaGenerateOptions& opt,
                                        const std::function<void(int64_t, int32_t)>& on_token) {
  const ModelConfig& c = model.config();
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
  BatchResult out;
  out.tokens.resize(size_t(B));
  if (opt.max_new_tokens == 0) return out;
  DecoderOptions dopt;
  dopt.strategy = opt.strategy, dopt.batch = B, dopt.window = opt.window, dopt.graphs = opt.graphs;
  dopt.max_context = int64_t(longest) + opt.max_new_tokens;
  RSSM_ASSIGN_OR_RETURN(std::unique_ptr<Decoder> dec, Decoder::create(model, dopt));

  const bool sample = opt.sampling.temperature > 0.0f;
  std::vector<Sampler> samplers;
  for (int64_t i = 0; i < B; ++i) {
    SamplingParams sp = opt.sampling;
    sp.seed = opt.sampling.seed + uint64_t(i);
    samplers.emplace_back(sp);
  }
  std::vector<float> logits(sample ? size_t(B * V) : 0);
  std::vector<int32_t> tok, next(static_cast<size_t>(B));
  std::vector<bool> done(static_cast<size_t>(B), false);
  const double start = now_s();
  double prefill_end = start;
  for (size_t t = 0;;) {
    // While every sequence is inside its prompt, whole chunks of it go in
    // one step; after that, one token per step.
    size_t T = size_t(dec->max_chunk());
    for (const auto& p : prompts) T = t < p.size() ? std::min(T, p.size() - t) : 1;
    tok.resize(size_t(B) * T);
    for (size_t b = 0; b < size_t(B); ++b)
      for (size_t i = 0; i < T; ++i)  // a done sequence idles on its last token
        tok[b * T + i] = t + i < prompts[b].size() ? prompts[b][t + i] : out.tokens[b].back();
    RSSM_RETURN_IF_ERROR(dec->step(tok, int(T), next, sample ? logits.data() : nullptr));
    t += T;
    bool all_done = true;
    for (size_t b = 0; b < size_t(B); ++b) {
      if (!done[b] && t >= prompts[b].size()) {
        const int32_t id = sample ? samplers[b].sample({logits.data() + b * size_t(V), size_t(V)}) : next[b];
        out.tokens[b].push_back(id);
        if (on_token) on_token(int64_t(b), id);
        const bool eos = opt.stop_at_eos && std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) !=
                                                c.eos_token_ids.end();
        done[b] = eos || int64_t(out.tokens[b].size()) >= opt.max_new_tokens;
      }
      all_done = all_done && done[b];
    }
    if (t == longest) prefill_end = now_s();
    if (all_done) break;
  }
  const double end = now_s();
  out.prefill_s = prefill_end - start;
  out.decode_s = end - prefill_end;
  out.store.state_bytes = out.store.state_bytes_peak = dec->memory().state_bytes;
  out.store.kv_bytes = out.store.kv_bytes_peak = dec->memory().kv_bytes;
  return out;
}

}  // namespace replayssm::cuda
