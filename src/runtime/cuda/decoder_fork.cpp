// Decoder::reorder (see decoder.h): forks — the plan of what each moved
// sequence copies, the copies, and the slots' and counters' bookkeeping;
// and after them the fork groups a plain step decodes together.
#include "runtime/cuda/decoder_impl.h"

namespace replayssm::cuda {

Status Decoder::reorder(std::span<const int32_t> parent) {
  Impl& I = *impl_;
  const int64_t B = opt_.batch;
  if (!opt_.forks) return invalid_argument("cuda decode: reorder needs a decoder created with forks");
  RSSM_RETURN_IF_ERROR(check_ready());
  if (int64_t(parent.size()) != B)
    return invalid_argument("cuda decode: reorder takes a parent per sequence (" + std::to_string(B) + "), got " +
                            std::to_string(parent.size()));
  for (int64_t b = 0; b < B; ++b)
    if (parent[size_t(b)] < 0 || parent[size_t(b)] >= B)
      return invalid_argument("cuda decode: sequence " + std::to_string(b) + "'s parent " +
                              std::to_string(parent[size_t(b)]) + " is out of range [0, " + std::to_string(B) + ")");
  const bool replay = opt_.strategy == DecodeStrategy::kReplay;
  const int S = I.slots_per_seq;
  int64_t moved = 0, max_kv = 0, max_m = 0, max_g = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int32_t p = parent[size_t(b)];
    const bool mv = p != b;
    moved += mv;
    I.host_field(kForkSrc)[b] = p, I.host_field(kForkDst)[b] = int32_t(b), I.host_field(kForkOne)[b] = mv;
    I.host_field(kForkKv)[b] = mv ? int32_t(pos_[size_t(p)]) : 0;
    I.host_field(kForkMLog)[b] = mv ? I.m_count[size_t(p)] : 0;
    I.host_field(kForkGLog)[b] = mv ? I.g_count[size_t(p)] : 0;
    I.host_field(kForkStFrom)[b] = int32_t(p * S + I.cur[size_t(p)]);
    I.host_field(kForkStTo)[b] = int32_t(b * S + (I.cur[size_t(b)] + 1) % S);
    if (mv) max_kv = std::max(max_kv, pos_[size_t(p)]), max_m = std::max<int64_t>(max_m, I.m_count[size_t(p)]),
            max_g = std::max<int64_t>(max_g, I.g_count[size_t(p)]);
  }
  if (moved == 0) return {};
  // A failure from here on leaves sequences part-copied.
  poisoned_ = true;
  RSSM_CU(cudaMemcpyAsync(I.plan, I.plan_host, sizeof(int32_t) * kPlanFields * I.field_len(), cudaMemcpyHostToDevice,
                          I.stream),
          "fork plan");
  if (I.commit_pending) {  // the windows take an accepted verify's rows before they are copied
    RSSM_RETURN_IF_ERROR(I.commit_windows());
    I.commit_pending = false;
  }
  auto copy = [&](void* array, int64_t block, int64_t row, PlanField rows, int64_t max_rows, const char* what,
                  PlanField src = kForkSrc, PlanField dst = kForkDst, bool direct = false) -> Status {
    if (array == nullptr || max_rows == 0) return {};
    oc::SeqCopyArgs a;
    a.batch = int(B), a.array = array, a.block_bytes = block, a.row_bytes = row, a.max_rows = int(max_rows);
    a.src = I.field(src), a.dst = I.field(dst), a.rows = I.field(rows), a.temp = I.fork_temp, a.direct = direct;
    RSSM_CU(oc::seq_copy_cuda(a, I.stream), what);
    return {};
  };
  const int64_t W = opt_.window;
  for (LayerState& L : I.layers) {
    if (L.kv_rows != nullptr) {
      RSSM_RETURN_IF_ERROR(copy(L.kv_rows, L.kv_block * L.kv.row_stride * 2, L.kv.row_stride * 2, kForkKv, max_kv,
                                "fork K/V"));
      continue;
    }
    if (L.window_seq_bytes > 0)
      RSSM_RETURN_IF_ERROR(copy(L.window, L.window_seq_bytes, L.window_seq_bytes, kForkOne, 1, "fork conv window"));
    if (!replay) {  // a full copy of the state into the child's spare slot
      RSSM_RETURN_IF_ERROR(
          copy(L.state, L.slot_bytes, L.slot_bytes, kForkOne, 1, "fork state", kForkStFrom, kForkStTo, true));
      continue;
    }
    const bool m = L.log_x != nullptr;  // the checkpoint is shared by slot; the log entries are copied
    void* logs[3] = {m ? static_cast<void*>(L.log_x) : L.log_k, m ? static_cast<void*>(L.log_B) : L.log_u,
                     m ? static_cast<void*>(L.log_dt) : L.log_g};
    for (int i = 0; i < 3; ++i)
      RSSM_RETURN_IF_ERROR(copy(logs[i], W * L.log_row[i], L.log_row[i], m ? kForkMLog : kForkGLog, m ? max_m : max_g,
                                "fork log"));
    if (L.conv_log != nullptr) {  // options.rewind: the entries' pre-conv rows and the checkpoint's window
      RSSM_RETURN_IF_ERROR(copy(L.conv_log, W * L.conv_row, L.conv_row, m ? kForkMLog : kForkGLog, m ? max_m : max_g,
                                "fork log pre-conv rows"));
      RSSM_RETURN_IF_ERROR(
          copy(L.ck_window, L.window_seq_bytes, L.window_seq_bytes, kForkOne, 1, "fork checkpoint conv window"));
    }
  }
  RSSM_CU(cudaStreamSynchronize(I.stream), "fork");
  poisoned_ = false;
  const std::vector<int64_t> pos = pos_;
  const std::vector<int> mc = I.m_count, gc = I.g_count;
  for (int64_t b = 0; b < B; ++b) {
    const int32_t p = parent[size_t(b)];
    pos_[size_t(b)] = pos[size_t(p)], I.m_count[size_t(b)] = mc[size_t(p)], I.g_count[size_t(b)] = gc[size_t(p)];
    if (!replay && p != b) I.cur[size_t(b)] = (I.cur[size_t(b)] + 1) % S;
  }
  if (!I.toks.empty()) {  // recompute: a child takes its parent's tokens, not its sparse checkpoint (none until
                         // its next multiple of W)
    const std::vector<std::vector<int32_t>> toks = I.toks;
    for (int64_t b = 0; b < B; ++b)
      if (parent[size_t(b)] != b)
        I.toks[size_t(b)] = toks[size_t(parent[size_t(b)])], I.ck_pos[size_t(b)] = -1, I.ck_mark[size_t(b)] = pos_[size_t(b)];
  }
  if (replay) I.m_pool.share(parent), I.g_pool.share(parent);
  // What the fork wrote: windows, and full states (standard) or the log
  // entries (replay; per entry: a W-th of a sequence's log).
  for (int64_t b = 0; b < B; ++b)
    if (parent[size_t(b)] != b)
      state_written_ += I.window_w * (opt_.rewind ? 2 : 1) +
                        (replay ? (I.host_field(kForkMLog)[b] * I.mamba_log_w + I.host_field(kForkGLog)[b] * I.gdn_log_w) /
                                      opt_.window
                                : I.mamba_state_w + I.gdn_state_w);
  note_state_peak(replay ? 0 : moved);
  return {};
}

// Sequences that read one checkpoint (the children of one parent since
// its last fold, a family that folded together) decode as a group: each
// Mamba2 or GDN block reads the checkpoint once for all of them
// (Mamba2DecodeArgs::group_start, on tensor cores where it fits: 8
// outputs a block at T = 1; GdnDecodeArgs::group_start). A sequence that
// folds this step writes a checkpoint of its own and goes alone. Where the
// batch has too few blocks for that to pay (options.fork_groups = -1),
// none. The launch's grid is the count of groups rounded up to a multiple
// of 8, the groups past it empty, so that steps whose counts differ a
// little share one captured graph.
int Decoder::Impl::plan_fork_groups(const SlotPool& pool, const std::vector<int>& fold_n, bool gdn, int64_t heads,
                                    PlanField seq_field, PlanField group_field, int64_t* saved) {
  const int64_t B = opt.batch;
  *saved = 0;
  // H200 (replayssm_ssm_bench, beamN against beamN-alone). Mamba2 at
  // Nemotron-H-8B's 128 heads: groups of 8 at batch 8 11.2 against 13.0
  // µs, beams of 4 at 64 48.2 against 62.2; but a group of 4 at batch 4
  // 9.8 against 9.6, of 2 at 2 9.2 against 8.7 — too few blocks for the
  // grouped kernels. GDN at Qwen3-Next's 32 value heads: beams of 8 at 64
  // 32.0 against 34.7 µs, at 256 100.1 against 125.0, of 4 at 64 33.8
  // against 36.3; but of 2 at 64 45.1 against 40.5, and at batch 8 or less.
  const int64_t min_blocks = gdn ? 2048 : 1024, min_saved = gdn ? (3 * B + 3) / 4 : std::max<int64_t>(1, B / 4);
  if (opt.fork_groups < 0 && B * heads < min_blocks) return 0;
  std::map<int32_t, std::vector<int32_t>> readers;  // checkpoint slot → the sequences that read it and do not fold
  std::vector<int32_t> alone;
  for (int64_t b = 0; b < B; ++b)
    (fold_n[size_t(b)] == 0 ? readers[pool.slot(b)] : alone).push_back(int32_t(b));
  int32_t* seq = host_field(seq_field);
  int32_t* start = host_field(group_field);
  int v = 0, k = 0;
  for (auto& [slot, members] : readers)
    for (size_t i = 0; i < members.size(); i += kForkGroupMax) {
      start[k++] = v;
      for (size_t j = i; j < std::min(members.size(), i + kForkGroupMax); ++j) seq[v++] = members[j];
    }
  for (int32_t b : alone) start[k++] = v, seq[v++] = b;
  // Each group of two or more saves its members' reads but one; at least a
  // quarter of the batch's (GDN: three quarters, beams of 4 or more), or
  // the grouped kernels (the log's part as a kernel of its own, then the
  // pass) cost more than they save (forced groups, fork_groups = 1: any saving).
  if (B - k < (opt.fork_groups > 0 ? 1 : min_saved)) return 0;
  const int grid = int(std::min<int64_t>(B, (k + 7) / 8 * 8));
  for (int i = k; i <= grid; ++i) start[i] = int32_t(B);
  *saved = B - k;
  return grid;
}

}  // namespace replayssm::cuda
