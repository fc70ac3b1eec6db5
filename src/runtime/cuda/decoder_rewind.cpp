// Decoder::rewind (see decoder.h): restore(p) by log replay (recompute:
// decoder_recompute.cpp re-runs from its sparse checkpoint). Under the
// replay layout a sequence's state at any position from its checkpoint on
// is the checkpoint plus a prefix of its log, so going back moves the
// log's cursor; what a step reads besides is the conv window, which is
// the checkpoint's window rolled over the kept entries' pre-conv rows
// (options.rewind keeps both). The replay itself happens in the next step,
// whose kernel reads the checkpoint and the kept entries like any other.
#include "runtime/cuda/decoder_impl.h"

namespace replayssm::cuda {

int64_t Decoder::rewind_floor(int64_t b) const {
  const Impl& I = *impl_;
  const int64_t pos = pos_[size_t(b)];
  if (verify_T_ != 0) return pos;
  if (I.recompute) return std::max<int64_t>(I.ck_pos[size_t(b)], 0);  // none since a fork: from the empty state
  if (!opt_.rewind) return pos;
  int64_t floor = 0;  // attention alone: the K/V rows hold every position
  if (I.has_mamba) floor = std::max(floor, pos - I.m_count[size_t(b)]);
  if (I.has_gdn) floor = std::max(floor, pos - I.g_count[size_t(b)]);
  return floor;
}

Status Decoder::rewind(std::span<const int64_t> length) {
  Impl& I = *impl_;
  const int64_t B = opt_.batch;
  if (!opt_.rewind && !I.recompute)
    return invalid_argument("cuda decode: rewind needs the recompute layout, or the replay layout created with rewind");
  RSSM_RETURN_IF_ERROR(check_ready());
  if (int64_t(length.size()) != B)
    return invalid_argument("cuda decode: rewind takes a length per sequence (" + std::to_string(B) + "), got " +
                            std::to_string(length.size()));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t p = length[size_t(b)], floor = rewind_floor(b);
    if (p > pos_[size_t(b)] || p < floor)
      return invalid_argument("cuda decode: sequence " + std::to_string(b) + " cannot rewind to " + std::to_string(p) +
                              " tokens: it holds " + std::to_string(pos_[size_t(b)]) + " and its checkpoint is at " +
                              std::to_string(floor) + " (an earlier position needs a re-prefill)");
  }
  bool any = false;
  for (int64_t b = 0; b < B; ++b) any |= length[size_t(b)] != pos_[size_t(b)];
  if (!any) return {};
  if (I.recompute) {  // back to the sparse checkpoint, then the tokens since
    std::vector<int64_t> target(size_t(B), -1);
    for (int64_t b = 0; b < B; ++b)
      if (length[size_t(b)] != pos_[size_t(b)]) target[size_t(b)] = length[size_t(b)];
    return rebuild(target);
  }
  for (int64_t b = 0; b < B; ++b) {
    const int back = int(pos_[size_t(b)] - length[size_t(b)]);
    pos_[size_t(b)] = length[size_t(b)];
    if (!I.toks.empty()) I.toks[size_t(b)].resize(size_t(length[size_t(b)]));
    if (I.has_mamba) I.m_count[size_t(b)] -= back;
    if (I.has_gdn) I.g_count[size_t(b)] -= back;
    I.host_field(kRewindM)[b] = I.m_count[size_t(b)], I.host_field(kRewindG)[b] = I.g_count[size_t(b)];
  }
  // Every sequence's windows are rebuilt — unchanged where it did not move,
  // and with an accepted verify's rows already in (they are log entries),
  // so no commit roll is left pending.
  poisoned_ = true;
  RSSM_CU(cudaMemcpyAsync(I.plan, I.plan_host, sizeof(int32_t) * kPlanFields * I.field_len(), cudaMemcpyHostToDevice,
                          I.stream),
          "rewind plan");
  const ModelConfig& c = I.m.config();
  for (const DeviceBlock& blk : I.m.blocks()) {
    if (blk.kind != BlockKind::kMamba2 && blk.kind != BlockKind::kGatedDeltaNet) continue;
    const bool mamba = blk.kind == BlockKind::kMamba2;
    LayerState& L = I.layers[size_t(blk.cache_layer)];
    if (L.window_seq_bytes == 0) continue;  // conv width 1: no window
    RSSM_CU(cudaMemcpyAsync(L.window, L.ck_window, size_t(B * L.window_seq_bytes), cudaMemcpyDeviceToDevice, I.stream),
            "rewind conv windows");
    oc::Conv1dArgs cv;
    cv.batch = int(B), cv.C = int(mamba ? c.mamba.conv_channels() : c.gdn.conv_channels());
    cv.K = int(mamba ? c.mamba.conv_width : c.gdn.conv_width);
    cv.window = L.window, cv.slot = I.field(kWinSlot), cv.x = L.conv_log, cv.ldx = cv.C;
    cv.cu_rows = I.field(kLogBase), cv.n_rows = I.field(mamba ? kRewindM : kRewindG);
    RSSM_CU(oc::conv1d_window_cuda(cv, I.stream), "rewind conv windows");
  }
  RSSM_CU(cudaStreamSynchronize(I.stream), "rewind");
  poisoned_ = false;
  I.commit_pending = false;
  I.last_rows = 0;  // the last step's logits are of positions gone
  state_written_ += B * I.window_w;
  return {};
}

}  // namespace replayssm::cuda
