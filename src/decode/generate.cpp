// generate (see generate.h). The first new token comes from the prefill's
// last row, so decode_s covers exactly the max_new_tokens-1 decode steps.
#include "decode/generate.h"

#include <algorithm>
#include <chrono>

#include "store/dense_cache.h"

namespace replayssm {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Result<GenerateResult> generate(const Model& model, std::span<const int32_t> prompt,
                                const GenerateOptions& opt,
                                const std::function<void(int32_t)>& on_token) {
  const ModelConfig& cfg = model.config();
  if (prompt.empty()) return invalid_argument("generate: the prompt is empty");
  if (opt.max_new_tokens < 0) return invalid_argument("generate: max_new_tokens must be >= 0");
  DenseCache cache(cache_spec(cfg));
  const int64_t seq = cache.add_sequence();
  Sampler sampler(opt.sampling);
  GenerateResult res;
  std::vector<float> logits(static_cast<size_t>(cfg.vocab_size));
  auto track = [&] {
    res.kv_bytes_peak = std::max<int64_t>(res.kv_bytes_peak, static_cast<int64_t>(cache.kv_bytes()));
    res.state_bytes_peak =
        std::max<int64_t>(res.state_bytes_peak, static_cast<int64_t>(cache.state_bytes()));
  };
  if (opt.max_new_tokens == 0) return res;

  double t0 = now_s();
  const int64_t n = static_cast<int64_t>(prompt.size());
  SeqSlice slice{seq, 0, n, 0};
  const int64_t last = n - 1;
  RSSM_RETURN_IF_ERROR(model.forward({&slice, 1}, prompt, cache, {&last, 1}, logits.data()));
  track();
  res.prefill_s = now_s() - t0;

  t0 = now_s();
  int32_t tok = sampler.sample(logits);
  for (;;) {
    res.tokens.push_back(tok);
    if (on_token) on_token(tok);
    const bool eos = std::find(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end(), tok) !=
                     cfg.eos_token_ids.end();
    if (static_cast<int64_t>(res.tokens.size()) >= opt.max_new_tokens || (opt.stop_at_eos && eos))
      break;
    SeqSlice s{seq, cache.length(seq), 1, 0};
    const int64_t row = 0;
    RSSM_RETURN_IF_ERROR(model.forward({&s, 1}, {&tok, 1}, cache, {&row, 1}, logits.data()));
    track();
    tok = sampler.sample(logits);
  }
  res.decode_s = now_s() - t0;
  return res;
}

}  // namespace replayssm
