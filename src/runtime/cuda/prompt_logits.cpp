// prompt_logits_cuda (see prompt_logits.h).
#include "runtime/cuda/prompt_logits.h"

#include <algorithm>

namespace replayssm::cuda {

Result<std::vector<std::vector<float>>> prompt_logits_cuda(const DeviceModel& model,
                                                           std::span<const std::vector<int32_t>> prompts,
                                                           DecodeStrategy strategy, int window, bool exact) {
  const int64_t B = int64_t(prompts.size()), V = model.config().vocab_size;
  if (B == 0) return std::vector<std::vector<float>>{};
  size_t longest = 0;
  for (const auto& p : prompts) {
    if (p.empty()) return invalid_argument("logits: an empty prompt");
    longest = std::max(longest, p.size());
  }
  DecoderOptions o;
  o.strategy = strategy, o.batch = B, o.window = window, o.max_context = int64_t(longest), o.all_logits = true;
  o.exact = exact;
  RSSM_ASSIGN_OR_RETURN(std::unique_ptr<Decoder> dec, Decoder::create(model, o));
  std::vector<std::vector<float>> out(static_cast<size_t>(B));
  for (size_t b = 0; b < size_t(B); ++b) out[b].reserve(prompts[b].size() * size_t(V));
  std::vector<int32_t> tok, next(static_cast<size_t>(B));
  std::vector<float> step_logits(static_cast<size_t>(B * dec->options().max_chunk * V));
  for (size_t t = 0; t < longest;) {
    // Chunks as long as the shortest unfinished prompt allows: no sequence
    // feeds on its own output here, so one that has ended just idles on its
    // last token (its rows are not kept).
    size_t T = size_t(dec->max_chunk());
    for (const auto& p : prompts)
      if (t < p.size()) T = std::min(T, p.size() - t);
    tok.resize(size_t(B) * T);
    for (size_t b = 0; b < size_t(B); ++b)
      for (size_t i = 0; i < T; ++i) tok[b * T + i] = prompts[b][std::min(t + i, prompts[b].size() - 1)];
    RSSM_RETURN_IF_ERROR(dec->step(tok, int(T), next, step_logits.data()));
    for (size_t b = 0; b < size_t(B); ++b)
      for (size_t i = 0; i < T && t + i < prompts[b].size(); ++i) {
        const auto row = step_logits.begin() + int64_t(b * T + i) * V;
        out[b].insert(out[b].end(), row, row + V);
      }
    t += T;
  }
  return out;
}

}  // namespace replayssm::cuda
