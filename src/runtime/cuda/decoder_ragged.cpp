// Decoder::step_ragged (see decoder.h): a step in which each sequence takes
// its own number of tokens — a prompt chunk of hundreds beside decoding
// sequences' single tokens and idle slots' none. The rows are packed
// (kCuRows), so the GEMMs do the work of Σ count rows rather than of
// batch × the longest; every conv and attention layer runs its prefill
// kernel over them, and the LM head reads each sequence's last row. In the
// SSM layers a sequence taking one token takes the decode kernels, as in a
// plain step (kDecRow: its row among the packed ones) — replay's
// output-only kernels, its token appended to its log, the log folded where
// it fills, as a plain step folds it — and every other sequence with
// tokens the chunk scans (kScanRows; under replay they fold its log with
// its chunk into a new checkpoint). A sequence with none is not touched.
// So a one-token sequence has the bits of a plain step in either layout,
// exact replay's the standard layout's.
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
  const int S = I.slots_per_seq, W = opt_.window;
  // Replay: a sequence whose chunk takes the scans applies its log there
  // and writes the state after its rows as its new checkpoint (a fresh slot
  // where others read the old one); one that takes the decode kernels
  // appends its token to its log and, where that leaves no room for the
  // next step, folds as a plain step does (Mamba2 the whole log, GDN the
  // entries before the token, which moves to the front); one that takes
  // none keeps everything. The fold fields of the others stay 0.
  std::vector<int32_t> m_target(size_t(B), -1), g_target(size_t(B), -1), m_after(size_t(B), 0), g_after(size_t(B), 0);
  std::vector<char> decode(size_t(B), 0);
  bool any_scan = false, any_decode = false, fold = false;
  int64_t r = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int n = count[size_t(b)];
    const int64_t pos = pos_[size_t(b)];
    const int32_t live = int32_t(b * S + I.cur[size_t(b)]);
    const int m = I.m_count[size_t(b)], g = I.g_count[size_t(b)];
    const bool dec = n == 1;
    decode[size_t(b)] = dec;
    any_decode |= dec, any_scan |= n > 0 && !dec;
    I.host_field(kCuRows)[b] = int32_t(r);
    I.host_field(kLastRow)[b] = int32_t(n > 0 ? r + n - 1 : 0);
    I.host_field(kSeqPos)[b] = int32_t(pos);
    I.host_field(kSeqLen)[b] = int32_t(pos + n);
    I.host_field(kDecRow)[b] = dec ? int32_t(r) : -1;
    I.host_field(kScanRows)[b] = dec ? 0 : n;
    for (int t = 0; t < n; ++t, ++r) {
      I.host_field(kTokens)[r] = tokens[size_t(r)];
      I.host_field(kRowPos)[r] = int32_t(pos + t);
      I.host_field(kRowSeq)[r] = int32_t(b);
      I.host_field(kOutSlot)[r] = live;
      // The decode kernels' rows: replay, the log's next entry; standard,
      // the compact row (the row itself). The scans' rows are appended by none.
      I.host_field(kMEntry)[r] = !dec ? -1 : replay ? int32_t(b * W + m) : int32_t(r);
      I.host_field(kGEntry)[r] = dec ? int32_t(b * W + g) : -1;
    }
    // What the decode kernels fold of this sequence's logs (0: nothing).
    const bool m_fold = replay && dec && I.has_mamba && I.log_fills(m, 1);
    const bool g_fold = replay && dec && I.has_gdn && I.log_fills(g, 1);
    fold |= m_fold || g_fold;
    I.host_field(kMFold)[b] = I.host_field(kMRoll)[b] = m_fold ? m + 1 : 0;
    I.host_field(kMMoveFrom)[b] = m, I.host_field(kMMoveCount)[b] = 0;
    I.host_field(kGFold)[b] = I.host_field(kGRoll)[b] = g_fold ? g : 0;
    I.host_field(kGMoveFrom)[b] = g, I.host_field(kGMoveCount)[b] = g_fold ? 1 : 0;
    m_after[size_t(b)] = m_fold ? 0 : m + dec, g_after[size_t(b)] = g_fold ? 1 : g + dec;
    if (replay) {
      if (n > 0 && (!dec || m_fold) && I.has_mamba) m_target[size_t(b)] = I.m_pool.fold_target(b);
      if (n > 0 && (!dec || g_fold) && I.has_gdn) g_target[size_t(b)] = I.g_pool.fold_target(b);
      I.host_field(kMSlot)[b] = I.m_pool.slot(b), I.host_field(kGSlot)[b] = I.g_pool.slot(b);
      I.host_field(kMFoldSlot)[b] = m_target[size_t(b)] >= 0 ? m_target[size_t(b)] : I.m_pool.slot(b);
      I.host_field(kGFoldSlot)[b] = g_target[size_t(b)] >= 0 ? g_target[size_t(b)] : I.g_pool.slot(b);
      // The entries each kernel reads: the scans, the log before the chunk;
      // the decode kernels, the log and the new token.
      I.host_field(kMLog)[b] = n == 0 ? 0 : m + dec;
      I.host_field(kGLog)[b] = n == 0 ? 0 : g + dec;
    } else {
      I.host_field(kMSlot)[b] = I.host_field(kGSlot)[b] = I.host_field(kMFoldSlot)[b] = I.host_field(kGFoldSlot)[b] = live;
      I.host_field(kMLog)[b] = I.host_field(kGLog)[b] = 0;
    }
  }
  I.host_field(kCuRows)[B] = int32_t(R);
  I.step_rows = R, I.ragged = true, I.m_groups = I.g_groups = 0, I.m_step = false, I.g_step = 0;
  I.ragged_scan = any_scan, I.ragged_decode = any_decode;
  const Status st = launch_or_poison(T, fold, false, true, logits);
  I.ragged = false;
  RSSM_RETURN_IF_ERROR(st);
  if (replay) {
    folds_ += any_scan || fold;
    for (int64_t b = 0; b < B; ++b) {
      if (m_target[size_t(b)] >= 0) I.m_pool.folded(b, m_target[size_t(b)]);
      if (g_target[size_t(b)] >= 0) I.g_pool.folded(b, g_target[size_t(b)]);
      if (count[size_t(b)] == 0) continue;
      I.m_count[size_t(b)] = decode[size_t(b)] ? m_after[size_t(b)] : 0;
      I.g_count[size_t(b)] = decode[size_t(b)] ? g_after[size_t(b)] : 0;
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
    // Its conv windows, and its state (standard) or each new checkpoint
    // (replay: the scans' or a decode kernel's fold; with options.rewind
    // its window too).
    const bool mt = m_target[size_t(b)] >= 0, gt = g_target[size_t(b)] >= 0;
    state_written_ += I.window_w + (replay ? mt * I.mamba_state_w + gt * I.gdn_state_w + (opt_.rewind && (mt || gt)) * I.window_w
                                           : I.mamba_state_w + I.gdn_state_w);
    next[size_t(b)] = I.next_host[opt_.all_logits ? cu[b] + n - 1 : b];
    pos_[size_t(b)] += n;
    if (!I.toks.empty())
      I.toks[size_t(b)].insert(I.toks[size_t(b)].end(), tokens.begin() + cu[b], tokens.begin() + cu[b] + n);
  }
  return note_checkpoints();
}

}  // namespace replayssm::cuda
