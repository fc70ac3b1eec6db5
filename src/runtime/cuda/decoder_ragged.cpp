// Decoder::step_ragged (see decoder.h): a step in which each sequence takes
// its own number of tokens — a prompt chunk of hundreds beside decoding
// sequences' single tokens and idle slots' none. The rows are packed
// (kCuRows), so the GEMMs do the work of Σ count rows rather than of
// batch × the longest; every SSM layer runs the chunk scans over the ragged
// rows (a sequence with none is not touched), every conv and attention
// layer its prefill kernel, and the LM head reads each sequence's last row.
#include "runtime/cuda/decoder_impl.h"

namespace replayssm::cuda {

int64_t Decoder::max_step_tokens() const { return impl_->rows_cap; }

Status Decoder::step_ragged(std::span<const int32_t> tokens, std::span<const int32_t> count, std::span<int32_t> next,
                            float* logits) {
  Impl& I = *impl_;
  const int64_t B = opt_.batch, V = I.m.config().vocab_size;
  RSSM_RETURN_IF_ERROR(check_ready());
  if (int64_t(count.size()) != B || int64_t(next.size()) != B)
    return invalid_argument("cuda decode: a ragged step takes one count and returns one token per sequence (" +
                            std::to_string(B) + "), got " + std::to_string(count.size()) + " counts and room for " +
                            std::to_string(next.size()));
  int64_t R = 0;
  int T = 0;  // the most rows a sequence takes
  for (int64_t b = 0; b < B; ++b) {
    const int32_t n = count[size_t(b)];
    if (n < 0 || n > kMaxChunk)
      return invalid_argument("cuda decode: sequence " + std::to_string(b) + " takes " + std::to_string(n) +
                              " tokens in a ragged step (0.." + std::to_string(kMaxChunk) + ")");
    if (pos_[size_t(b)] + n > opt_.max_context)
      return out_of_budget("cuda decode: sequence " + std::to_string(b) + " (" + std::to_string(pos_[size_t(b)]) +
                           " tokens) would pass the context (" + std::to_string(opt_.max_context) + " positions) with " +
                           std::to_string(n) + " more");
    R += n, T = std::max(T, int(n));
  }
  if (R == 0) return invalid_argument("cuda decode: a ragged step in which no sequence takes a token");
  if (R > I.rows_cap)
    return out_of_budget("cuda decode: a ragged step of " + std::to_string(R) + " tokens; this decoder's steps hold " +
                         std::to_string(I.rows_cap) + " (batch × max(max_chunk, spec_tokens))");
  if (int64_t(tokens.size()) != R)
    return invalid_argument("cuda decode: a ragged step's counts add up to " + std::to_string(R) + " tokens, got " +
                            std::to_string(tokens.size()));
  for (int32_t t : tokens)
    if (t < 0 || t >= V)
      return invalid_argument("token id " + std::to_string(t) + " is out of range [0, " + std::to_string(V) + ")");
  const bool replay = opt_.strategy == DecodeStrategy::kReplay;
  const int S = I.slots_per_seq;
  // Replay: a sequence that takes tokens applies its log in the scans and
  // writes the state after its rows as its new checkpoint (a fresh slot
  // where others read the old one); one that takes none keeps both.
  std::vector<int32_t> m_target(size_t(B), -1), g_target(size_t(B), -1);
  int64_t r = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int n = count[size_t(b)];
    const int64_t pos = pos_[size_t(b)];
    const int32_t live = int32_t(b * S + I.cur[size_t(b)]);
    I.host_field(kCuRows)[b] = int32_t(r);
    I.host_field(kLastRow)[b] = int32_t(n > 0 ? r + n - 1 : 0);
    I.host_field(kSeqPos)[b] = int32_t(pos);
    I.host_field(kSeqLen)[b] = int32_t(pos + n);
    for (int t = 0; t < n; ++t, ++r) {
      I.host_field(kTokens)[r] = tokens[size_t(r)];
      I.host_field(kRowPos)[r] = int32_t(pos + t);
      I.host_field(kRowSeq)[r] = int32_t(b);
      I.host_field(kOutSlot)[r] = live;
    }
    if (replay) {
      if (n > 0 && I.has_mamba) m_target[size_t(b)] = I.m_pool.fold_target(b);
      if (n > 0 && I.has_gdn) g_target[size_t(b)] = I.g_pool.fold_target(b);
      I.host_field(kMSlot)[b] = I.m_pool.slot(b), I.host_field(kGSlot)[b] = I.g_pool.slot(b);
      I.host_field(kMFoldSlot)[b] = m_target[size_t(b)] >= 0 ? m_target[size_t(b)] : I.m_pool.slot(b);
      I.host_field(kGFoldSlot)[b] = g_target[size_t(b)] >= 0 ? g_target[size_t(b)] : I.g_pool.slot(b);
      I.host_field(kMLog)[b] = n > 0 ? I.m_count[size_t(b)] : 0;
      I.host_field(kGLog)[b] = n > 0 ? I.g_count[size_t(b)] : 0;
    } else {
      I.host_field(kMSlot)[b] = I.host_field(kGSlot)[b] = I.host_field(kMFoldSlot)[b] = I.host_field(kGFoldSlot)[b] = live;
      I.host_field(kMLog)[b] = I.host_field(kGLog)[b] = 0;
    }
  }
  I.host_field(kCuRows)[B] = int32_t(R);
  I.step_rows = R, I.ragged = true, I.m_groups = 0;
  const Status st = launch_or_poison(T, false, false, true, logits);
  I.ragged = false;
  RSSM_RETURN_IF_ERROR(st);
  if (replay) {
    ++folds_;
    for (int64_t b = 0; b < B; ++b) {
      if (m_target[size_t(b)] >= 0) I.m_pool.folded(b, m_target[size_t(b)]), I.m_count[size_t(b)] = 0;
      if (g_target[size_t(b)] >= 0) I.g_pool.folded(b, g_target[size_t(b)]), I.g_count[size_t(b)] = 0;
    }
  }
  note_state_peak(0);
  const int32_t* cu = I.host_field(kCuRows);
  for (int64_t b = 0; b < B; ++b) {
    const int n = count[size_t(b)];
    if (n == 0) {
      next[size_t(b)] = -1;
      if (logits != nullptr && !opt_.all_logits) std::fill(logits + b * V, logits + (b + 1) * V, 0.0f);
      continue;
    }
    // Its conv windows, and its state (standard) or new checkpoint (replay; with options.rewind its window too).
    state_written_ += I.window_w + I.mamba_state_w + I.gdn_state_w + (opt_.rewind ? I.window_w : 0);
    next[size_t(b)] = I.next_host[opt_.all_logits ? cu[b] + n - 1 : b];
    pos_[size_t(b)] += n;
    if (!I.toks.empty())
      I.toks[size_t(b)].insert(I.toks[size_t(b)].end(), tokens.begin() + cu[b], tokens.begin() + cu[b] + n);
  }
  return note_checkpoints();
}

}  // namespace replayssm::cuda
