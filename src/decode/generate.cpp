// generate (see generate.h). The first new token comes from the prefill's
// last row, so decode_s covers exactly the max_new_tokens-1 decode steps.
#include "decode/generate.h"

#include <algorithm>
#include <chrono>

#include "decode/session.h"

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
  RSSM_ASSIGN_OR_RETURN(auto session, Session::create(model, opt.store));
  const int64_t seq = session->store().add_sequence();
  Sampler sampler(opt.sampling);
  GenerateResult res;
  std::vector<float> logits;
  if (opt.max_new_tokens > 0) {
    double t0 = now_s();
    const StepInput first{seq, prompt};
    RSSM_RETURN_IF_ERROR(session->step({&first, 1}, &logits));
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
      const StepInput in{seq, {&tok, 1}};
      RSSM_RETURN_IF_ERROR(session->step({&in, 1}, &logits));
      tok = sampler.sample(logits);
    }
    res.decode_s = now_s() - t0;
  }
  res.store = session->store().stats();
  return res;
}

}  // namespace replayssm
