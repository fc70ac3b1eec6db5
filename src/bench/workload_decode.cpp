// The ar and spec workloads: `batch` independent prompts decoded together
// by generate_batch — plain steps, or T drafts verified per step. Output
// tokens exclude each prompt's first new token, which comes from the
// prefill's logits (the prefill is not timed).
#include <algorithm>

#include "bench/oracle_draft.h"
#include "bench/workloads.h"

namespace replayssm::bench {

Result<Measurement> run_decode(BenchContext& ctx, const Config& c) {
  const SweepOptions& opt = ctx.options();
  GenerateOptions g;
  g.max_new_tokens = opt.new_tokens;
  g.stop_at_eos = false;  // random weights: every run decodes the same number of tokens
  g.state = ctx.state_options(c);
  if (c.workload == Workload::kSpec) {
    g.spec.tokens = c.spec_t;
    if (opt.draft == DraftKind::kNgram) {
      g.spec.kind = SpecOptions::kNgram;
    } else {
      RSSM_RETURN_IF_ERROR(ctx.prepare_references(c.batch, opt.prompt_tokens + opt.new_tokens + c.spec_t));
      g.spec.kind = SpecOptions::kCustom;
      const int64_t V = ctx.config().vocab_size;
      g.spec.make_source = [&ctx, &c, &opt, V](int64_t i) -> Result<std::unique_ptr<DraftSource>> {
        const uint64_t seed = opt.seed * 0x2545f4914f6cdd1dull + static_cast<uint64_t>(i);
        return std::unique_ptr<DraftSource>(
            std::make_unique<OracleDraft>(&ctx.reference(i), c.draft_accuracy, V, seed));
      };
    }
  }
  RSSM_ASSIGN_OR_RETURN(BatchResult r, generate_batch(ctx.backend(), ctx.prompts(c.batch), g));
  Measurement m;
  m.decode_s = r.decode_s;
  for (const auto& t : r.tokens) m.emitted += std::max<int64_t>(static_cast<int64_t>(t.size()) - 1, 0);
  m.state = r.state;
  m.spec = r.spec;
  return m;
}

}  // namespace replayssm::bench
