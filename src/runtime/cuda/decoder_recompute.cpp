// The recompute layout's going back (see decoder.h): sparse checkpoints
// taken as sequences pass multiples of W, and the re-run from one when a
// sequence must return to an earlier position (a verify it did not keep
// whole, rewind()). The live state is the standard layout's, updated in
// place, so going back is a copy of the checkpoint and the tokens since
// fed again — the cost this layout trades for holding one extra state per
// sequence instead of a log or a state per draft.
#include "runtime/cuda/decoder_impl.h"

namespace replayssm::cuda {

Status Decoder::Impl::checkpoint_copies() {
  auto copy = [&](void* array, int64_t block, PlanField from, PlanField to, const char* what) -> Status {
    oc::SeqCopyArgs a;
    a.batch = int(opt.batch), a.array = array, a.block_bytes = block, a.row_bytes = block, a.max_rows = 1;
    a.src = field(from), a.dst = field(to), a.rows = field(kCkOne), a.direct = true;  // live and sparse never overlap
    RSSM_CU(oc::seq_copy_cuda(a, stream), what);
    return {};
  };
  for (LayerState& L : layers) {
    if (L.state == nullptr) continue;
    RSSM_RETURN_IF_ERROR(copy(L.state, L.slot_bytes, kCkFrom, kCkTo, "sparse checkpoint state"));
    if (L.window_seq_bytes > 0)
      RSSM_RETURN_IF_ERROR(copy(L.window, L.window_seq_bytes, kCkWinFrom, kCkWinTo, "sparse checkpoint window"));
  }
  return {};
}

Status Decoder::note_checkpoints() {
  Impl& I = *impl_;
  if (!I.recompute) return {};
  const int64_t B = opt_.batch, W = opt_.window;
  const int S = I.slots_per_seq;
  bool any = false;
  for (int64_t b = 0; b < B; ++b) {
    const bool pass = pos_[size_t(b)] / W > I.ck_mark[size_t(b)] / W;
    any |= pass;
    I.host_field(kCkOne)[b] = pass;
    I.host_field(kCkFrom)[b] = int32_t(b * S + I.cur[size_t(b)]), I.host_field(kCkTo)[b] = int32_t(I.sparse_base + b);
    I.host_field(kCkWinFrom)[b] = int32_t(b), I.host_field(kCkWinTo)[b] = int32_t(B + b);
  }
  if (!any) return {};
  poisoned_ = true;  // until the copies are done
  RSSM_CU(cudaMemcpyAsync(I.plan, I.plan_host, sizeof(int32_t) * kPlanFields * I.field_len(), cudaMemcpyHostToDevice,
                          I.stream),
          "checkpoint plan");
  if (I.commit_pending) {  // the window copied must hold an accepted verify's rows
    RSSM_RETURN_IF_ERROR(I.commit_windows());
    I.commit_pending = false;
  }
  RSSM_RETURN_IF_ERROR(I.checkpoint_copies());
  RSSM_CU(cudaStreamSynchronize(I.stream), "sparse checkpoints");
  poisoned_ = false;
  for (int64_t b = 0; b < B; ++b)
    if (I.host_field(kCkOne)[b]) {
      I.ck_pos[size_t(b)] = I.ck_mark[size_t(b)] = pos_[size_t(b)];
      state_written_ += I.mamba_state_w + I.gdn_state_w + I.window_w;
    }
  return {};
}

Status Decoder::rebuild(const std::vector<int64_t>& target) {
  Impl& I = *impl_;
  const int64_t B = opt_.batch;
  const int S = I.slots_per_seq;
  std::vector<std::vector<int32_t>> redo(static_cast<size_t>(B));
  bool any = false, from_zero = false;
  for (int64_t b = 0; b < B; ++b) {
    I.host_field(kCkOne)[b] = 0;
    const int64_t to = target[size_t(b)];
    if (to < 0) continue;
    any = true;
    const int64_t ck = I.ck_pos[size_t(b)], from = std::max<int64_t>(ck, 0);
    std::vector<int32_t>& t = I.toks[size_t(b)];
    redo[size_t(b)].assign(t.begin() + from, t.begin() + to);
    t.resize(size_t(from));
    pos_[size_t(b)] = from;
    if (ck < 0) {  // no checkpoint since a fork: from the empty state
      from_zero = true;
      continue;
    }
    I.host_field(kCkOne)[b] = 1;
    I.host_field(kCkFrom)[b] = int32_t(I.sparse_base + b), I.host_field(kCkTo)[b] = int32_t(b * S + I.cur[size_t(b)]);
    I.host_field(kCkWinFrom)[b] = int32_t(B + b), I.host_field(kCkWinTo)[b] = int32_t(b);
  }
  if (!any) return {};
  poisoned_ = true;
  RSSM_CU(cudaMemcpyAsync(I.plan, I.plan_host, sizeof(int32_t) * kPlanFields * I.field_len(), cudaMemcpyHostToDevice,
                          I.stream),
          "rebuild plan");
  if (I.commit_pending) {  // the sequences that stay keep their accepted rows
    RSSM_RETURN_IF_ERROR(I.commit_windows());
    I.commit_pending = false;
  }
  RSSM_RETURN_IF_ERROR(I.checkpoint_copies());
  if (from_zero)
    for (int64_t b = 0; b < B; ++b) {
      if (target[size_t(b)] < 0 || I.ck_pos[size_t(b)] >= 0) continue;
      for (LayerState& L : I.layers) {
        if (L.state == nullptr) continue;
        RSSM_CU(cudaMemsetAsync(reinterpret_cast<char*>(L.state) + (b * S + I.cur[size_t(b)]) * L.slot_bytes, 0,
                                size_t(L.slot_bytes), I.stream),
                "rebuild from empty");
        RSSM_CU(cudaMemsetAsync(reinterpret_cast<char*>(L.window) + b * L.window_seq_bytes, 0,
                                size_t(L.window_seq_bytes), I.stream),
                "rebuild from empty");
      }
    }
  RSSM_CU(cudaStreamSynchronize(I.stream), "rebuild");
  poisoned_ = false;
  for (int64_t b = 0; b < B; ++b)
    if (I.host_field(kCkOne)[b]) state_written_ += I.mamba_state_w + I.gdn_state_w + I.window_w;
  // The tokens again, as feeds in which every other sequence takes none.
  std::vector<int32_t> tok, count(static_cast<size_t>(B)), argmax;
  for (size_t done = 0;; ) {
    size_t most = 0;
    for (const auto& r : redo) most = std::max(most, r.size() > done ? r.size() - done : 0);
    if (most == 0) break;
    const int T = int(std::clamp<size_t>(most, 2, size_t(opt_.spec_tokens)));
    tok.assign(size_t(B * T), 0);
    argmax.resize(size_t(B * T));
    for (int64_t b = 0; b < B; ++b) {
      const std::vector<int32_t>& r = redo[size_t(b)];
      const size_t n = r.size() > done ? std::min(r.size() - done, size_t(T)) : 0;
      count[size_t(b)] = int32_t(n);
      if (n > 0) std::copy(r.begin() + long(done), r.begin() + long(done + n), tok.begin() + b * T);
    }
    RSSM_RETURN_IF_ERROR(feed(tok, T, count, argmax));
    done += size_t(T);
  }
  return {};
}

}  // namespace replayssm::cuda
