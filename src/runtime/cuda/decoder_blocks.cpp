// Decoder::Impl's launches of one step (see decoder_impl.h): the blocks
// (Mamba2, Gated DeltaNet, attention, MLP), the conv windows' roll after a
// verify, and the whole step in order.
#include "runtime/cuda/decoder_impl.h"

namespace replayssm::cuda {

Status Decoder::Impl::run_mamba2(const DeviceBlock& blk, LayerState& L, int T, bool fold, bool verify, bool scan,
                                 const float* next_norm) {
  const ModelConfig& c = m.config();
  const Mamba2Config& mc = c.mamba;
  const int B = int(opt.batch), Hd = int(c.hidden_size);
  const int64_t rows = step_rows;
  const int64_t HP = mc.n_heads * mc.head_dim, GN = mc.n_groups * mc.state_size, C = mc.conv_channels();
  const int64_t width = blk.in.n_out;
  const bool replay = opt.strategy == DecodeStrategy::kReplay;
  RSSM_CU(gemm->linear(xn, Hd, rows, blk.in.w, width, Hd, blk.in.b, proj, width, false), "Mamba2 in_proj");
  // A ragged step: the conv over every row, then its chunks through the
  // scan and its one-token sequences through the decode kernels.
  const bool decode_too = ragged && ragged_decode;
  const uint16_t* xbc = nullptr;
  int64_t ldxbc = 0;
  if (scan) {
    // The chunk scan reads the post-conv rows x | B | C and the raw dt
    // where they are: no append.
    RSSM_RETURN_IF_ERROR(run_conv(blk, L, T, false, C, mc.conv_width, HP, width, &xbc, &ldxbc));
    if (!ragged || ragged_scan) {
      RSSM_RETURN_IF_ERROR(scan_checkpoint_windows(L));
      oc::Mamba2ScanArgs a;
      a.batch = B, a.H = int(mc.n_heads), a.P = int(mc.head_dim), a.N = int(mc.state_size), a.G = int(mc.n_groups), a.T = T;
      a.A_log = blk.A_log, a.D = blk.D, a.dt_bias = blk.dt_bias, a.dt_min = mc.dt_min, a.dt_max = mc.dt_max;
      a.state = L.state, a.slot = field(kMSlot), a.out_slot = field(kMFoldSlot);
      a.x = xbc, a.ldx = ldxbc, a.Bm = xbc + HP, a.Cm = xbc + HP + GN, a.ldbc = ldxbc;
      a.dt_raw = proj + HP + C, a.lddt = width, a.y = y, a.ldy = HP;
      if (replay) a.W = opt.window, a.n_log = field(kMLog), a.log_x = L.log_x, a.log_B = L.log_B, a.log_dt = L.log_dt;
      if (ragged) a.cu_rows = field(kCuRows), a.n_rows = decode_too ? field(kScanRows) : nullptr;
      RSSM_CU(oc::mamba2_scan_cuda(a, stream), "Mamba2 chunk scan");
    }
  }
  if (!scan || decode_too) {
    // A ragged step's decoding sequences take a token each, their rows
    // where the plan put them (kDecRow), and fold nothing.
    const int Td = scan ? 1 : T;
    if (L.conv_log != nullptr)
      RSSM_RETURN_IF_ERROR(
          keep_conv_rows(L, Td, fold, C, mc.conv_width, HP, width, kMEntry, kMRoll, kMMoveFrom, kMMoveCount));
    oc::Mamba2AppendArgs ap;
    ap.rows = rows, ap.H = int(mc.n_heads), ap.P = int(mc.head_dim), ap.G = int(mc.n_groups), ap.N = int(mc.state_size);
    ap.dt_raw = proj + HP + C, ap.lddt = width, ap.dt_bias = blk.dt_bias;
    ap.dt_min = mc.dt_min, ap.dt_max = mc.dt_max, ap.Cm = cC;
    // The standard step's inputs are the step's compact rows — under replay
    // too where it takes the standard step (m_step: every log empty).
    const bool stepped = !replay || m_step;
    ap.entry = field(kMEntry);
    ap.x = stepped ? cx : L.log_x;
    ap.Bm = stepped ? cB : L.log_B;
    ap.dt = stepped ? cdt : L.log_dt;
    // Next is the step or replay kernel, whose early reads (state, older log
    // entries) in_proj does not write — nor, in a ragged step, the chunk
    // scan or the pre-conv rows' log, which write other sequences' slots
    // and the conv log.
    ap.release_early = true;
    if (!scan && T == 1 && oc::fusion_enabled()) {  // one kernel: the conv's output goes on to the log as it is made
      oc::Conv1dArgs cv = conv_args(blk, L, C, mc.conv_width, HP, width);
      cv.y = proj + HP, cv.ldy = width;
      RSSM_CU(oc::mamba2_conv_append_cuda(cv, ap, stream), "Mamba2 conv and append");
    } else {
      if (!scan) RSSM_RETURN_IF_ERROR(run_conv(blk, L, T, verify, C, mc.conv_width, HP, width, &xbc, &ldxbc));
      ap.xbc = xbc, ap.ldxbc = ldxbc;
      RSSM_CU(oc::mamba2_append_cuda(ap, stream), "Mamba2 append");
    }
    oc::Mamba2DecodeArgs a;
    a.batch = B, a.H = int(mc.n_heads), a.P = int(mc.head_dim), a.N = int(mc.state_size), a.G = int(mc.n_groups), a.T = Td;
    a.A_log = blk.A_log, a.D = blk.D, a.dt_bias = blk.dt_bias, a.dt_min = mc.dt_min, a.dt_max = mc.dt_max;
    a.state = L.state, a.slot = field(kMSlot), a.Cm = cC, a.y = y;
    if (scan) a.row = field(kDecRow);
    a.early = true;          // the kernel just before is the append: it writes no state
    a.release_early = true;  // the kernel just after (log move, gated norm) reads only weights before its wait
    if (stepped) {           // one token, or a verify's (or feed's) state per token; replay: the checkpoint stepped
      a.x = cx, a.Bm = cB, a.dt = cdt, a.out_slot = field(replay ? kMFoldSlot : kOutSlot);
      RSSM_CU(oc::mamba2_step_cuda(a, stream), "Mamba2 step");
    } else {
      a.W = opt.window, a.n_log = field(kMLog);
      a.log_x = ap.x, a.log_B = ap.Bm, a.log_dt = ap.dt;
      a.fold = fold ? field(kMFold) : nullptr, a.fold_slot = field(kMFoldSlot);
      a.max_fold = a.fold != nullptr ? a.W : 0;
      a.scratch = mamba_scratch;
      a.exact = opt.exact;
      if (m_groups > 0)  // sequences reading one checkpoint decode together (plan_fork_groups)
        a.group_start = field(kMGroup), a.seq = field(kMSeq), a.n_groups = m_groups, a.max_group = kForkGroupMax;
      RSSM_CU(oc::mamba2_replay_cuda(a, stream), "Mamba2 replay");
      if (fold) {
        // A verify folds only the committed prefix, a family its shared
        // oldest entries: the rest move to the front of the log (kMMoveCount
        // is 0 where the log did not fold, or folded whole).
        oc::LogMoveArgs mv;
        mv.batch = B, mv.W = opt.window, mv.from = field(kMMoveFrom), mv.count = field(kMMoveCount);
        mv.array[0] = L.log_x, mv.width[0] = HP;
        mv.array[1] = L.log_B, mv.width[1] = GN;
        mv.array[2] = L.log_dt, mv.width[2] = 2 * mc.n_heads;
        RSSM_CU(oc::log_move_cuda(mv, stream), "Mamba2 log move");
      }
    }
  }
  RSSM_CU(oc::rmsnorm_gated_group_cuda(y, HP, proj, width, rows, HP, HP / mc.n_groups, blk.norm_w, c.norm_eps, y, HP,
                                       stream, /*release_early=*/true),  // next: the out_proj GEMV
          "Mamba2 gated norm");
  return project_out(blk, y, HP, HP, T, next_norm, "Mamba2 out_proj");
}

Status Decoder::Impl::scan_checkpoint_windows(LayerState& L) {
  if (L.conv_log == nullptr || L.window_seq_bytes == 0) return {};  // options.rewind only
  if (!ragged) {
    RSSM_CU(cudaMemcpyAsync(L.ck_window, L.window, size_t(opt.batch * L.window_seq_bytes), cudaMemcpyDeviceToDevice,
                            stream),
            "checkpoint conv windows");
    return {};
  }
  // A sequence the scan takes no tokens of (none at all, or one through the
  // decode kernels) keeps its log, so its checkpoint's window too.
  const int32_t* n = host_field(kScanRows);
  for (int64_t b = 0; b < opt.batch; ++b) {
    if (n[b] == 0) continue;
    const int64_t at = b * L.window_seq_bytes;
    RSSM_CU(cudaMemcpyAsync(reinterpret_cast<uint8_t*>(L.ck_window) + at, reinterpret_cast<const uint8_t*>(L.window) + at,
                            size_t(L.window_seq_bytes), cudaMemcpyDeviceToDevice, stream),
            "checkpoint conv windows");
  }
  return {};
}

oc::Conv1dArgs Decoder::Impl::conv_args(const DeviceBlock& blk, LayerState& L, int64_t C, int64_t K, int64_t off,
                                        int64_t width) {
  oc::Conv1dArgs cv;
  cv.batch = int(opt.batch), cv.C = int(C), cv.K = int(K), cv.weight = blk.conv_w, cv.bias = blk.conv_b;
  cv.window = L.window, cv.slot = field(kWinSlot), cv.x = proj + off, cv.ldx = width;
  return cv;
}

Status Decoder::Impl::run_conv(const DeviceBlock& blk, LayerState& L, int T, bool verify, int64_t C, int64_t K,
                               int64_t off, int64_t width, const uint16_t** out, int64_t* ldo) {
  oc::Conv1dArgs cv = conv_args(blk, L, C, K, off, width);
  if (T == 1 && !ragged) {
    cv.y = proj + off, cv.ldy = width;
    RSSM_CU(oc::conv1d_step_cuda(cv, stream), "conv1d");
  } else {
    cv.y = xconv, cv.ldy = C, cv.cu_rows = field(kCuRows), cv.max_rows = T;
    // A verify leaves the window as it was and keeps its pre-conv rows for
    // the accepted prefix to roll in (commit_windows).
    cv.keep_window = verify;
    RSSM_CU(oc::conv1d_prefill_cuda(cv, stream), "conv1d chunk");
    if (verify)
      RSSM_CU(cudaMemcpy2DAsync(L.pending, sizeof(uint16_t) * C, proj + off, sizeof(uint16_t) * width,
                                sizeof(uint16_t) * C, size_t(opt.batch) * T, cudaMemcpyDeviceToDevice, stream),
              "verify conv rows");
  }
  *out = cv.y, *ldo = cv.ldy;
  return {};
}

Status Decoder::Impl::keep_conv_rows(LayerState& L, int T, bool fold, int64_t C, int64_t K, int64_t off,
                                     int64_t width, PlanField entry, PlanField fold_n, PlanField move_from,
                                     PlanField move_n) {
  // Before the conv: a one-token step's conv overwrites its pre-conv rows.
  oc::LogRowsArgs lr;
  lr.rows = step_rows, lr.width = C, lr.src = proj + off, lr.lds = width, lr.entry = field(entry);
  lr.dst = L.conv_log;
  RSSM_CU(oc::log_rows_cuda(lr, stream), "log pre-conv rows");
  if (!fold) return {};
  // The folded entries are the log's first fold_n[b] (0 where it did not fold).
  oc::Conv1dArgs cv;
  cv.batch = int(opt.batch), cv.C = int(C), cv.K = int(K), cv.window = L.ck_window, cv.slot = field(kWinSlot);
  cv.x = L.conv_log, cv.ldx = C, cv.cu_rows = field(kLogBase), cv.n_rows = field(fold_n);
  RSSM_CU(oc::conv1d_window_cuda(cv, stream), "checkpoint conv window");
  oc::LogMoveArgs mv;
  mv.batch = int(opt.batch), mv.W = opt.window, mv.from = field(move_from), mv.count = field(move_n);
  mv.array[0] = L.conv_log, mv.width[0] = C;
  RSSM_CU(oc::log_move_cuda(mv, stream), "log pre-conv rows move");
  return {};
}

Status Decoder::Impl::run_gdn(const DeviceBlock& blk, LayerState& L, int T, bool fold, bool verify, bool scan,
                              const float* next_norm) {
  const ModelConfig& c = m.config();
  const GdnConfig& g = c.gdn;
  const int B = int(opt.batch), Hd = int(c.hidden_size);
  const int64_t rows = step_rows;
  const int64_t K = g.n_k_heads * g.k_dim, V = g.n_v_heads * g.v_dim, C = g.conv_channels(), width = blk.in.n_out;
  const bool replay = opt.strategy == DecodeStrategy::kReplay;
  RSSM_CU(gemm->linear(xn, Hd, rows, blk.in.w, width, Hd, blk.in.b, proj, width, false), "GDN in_proj");
  // A ragged step: conv, prepare and append over every row, then its
  // chunks through the scan and its one-token sequences through the decode
  // kernels (kDecRow), which fold nothing.
  const bool decode_too = ragged && ragged_decode;
  if (L.conv_log != nullptr && (!scan || decode_too))
    RSSM_RETURN_IF_ERROR(keep_conv_rows(L, scan ? 1 : T, fold, C, g.conv_width, 0, width, kGEntry, kGRoll, kGMoveFrom,
                                        kGMoveCount));
  const uint16_t* qkv = nullptr;
  int64_t ldqkv = 0;
  RSSM_RETURN_IF_ERROR(run_conv(blk, L, T, verify, C, g.conv_width, 0, width, &qkv, &ldqkv));
  oc::GdnPrepareArgs pr;
  pr.rows = rows, pr.Hk = int(g.n_k_heads), pr.Hv = int(g.n_v_heads), pr.dk = int(g.k_dim);
  pr.A_log = blk.A_log, pr.dt_bias = blk.dt_bias, pr.q = qkv, pr.k = qkv + K, pr.ldq = ldqkv, pr.ldk = ldqkv;
  pr.a = proj + C + V, pr.b = proj + C + V + g.n_v_heads, pr.lda = width, pr.ldb = width;
  pr.q_out = gq, pr.k_out = gk, pr.g = gg, pr.beta = gbeta;
  RSSM_CU(oc::gdn_prepare_cuda(pr, stream), "GDN prepare");
  oc::GdnAppendArgs ap;
  ap.rows = rows, ap.Hk = int(g.n_k_heads), ap.Hv = int(g.n_v_heads), ap.dk = int(g.k_dim), ap.dv = int(g.v_dim);
  ap.v_in = qkv + 2 * K, ap.ldv = ldqkv, ap.v = gv;
  // Where the layers take the standard step or a one-token scan (g_step),
  // the new token goes to no log: the logs are folded into the checkpoint.
  if (replay && (!scan || decode_too) && g_step == 0)
    ap.entry = field(kGEntry), ap.k = gk, ap.g = gg, ap.log_k = L.log_k, ap.log_g = L.log_g;
  RSSM_CU(oc::gdn_append_cuda(ap, stream), "GDN append");
  // The chunk scan: a chunk (applying the log first, under replay), or a
  // plain step's one token after the log it folds (g_step 2).
  if ((scan && (!ragged || ragged_scan)) || g_step == 2) {
    RSSM_RETURN_IF_ERROR(scan_checkpoint_windows(L));
    oc::GdnScanArgs a;
    a.batch = B, a.Hk = int(g.n_k_heads), a.Hv = int(g.n_v_heads), a.dk = int(g.k_dim), a.dv = int(g.v_dim), a.T = T;
    a.state = L.state, a.slot = field(kGSlot), a.out_slot = field(kGFoldSlot);
    a.q = gq, a.k = gk, a.v = gv, a.g = gg, a.beta = gbeta, a.o = y;
    if (replay) a.W = opt.window, a.n_log = field(kGLog), a.log_k = L.log_k, a.log_u = L.log_u, a.log_g = L.log_g;
    if (ragged) a.cu_rows = field(kCuRows), a.n_rows = decode_too ? field(kScanRows) : nullptr;
    RSSM_CU(oc::gdn_scan_cuda(a, stream), "GDN chunk scan");
  }
  if ((!scan || decode_too) && g_step != 2) {
    oc::GdnDecodeArgs a;
    a.batch = B, a.Hk = int(g.n_k_heads), a.Hv = int(g.n_v_heads), a.dk = int(g.k_dim), a.dv = int(g.v_dim);
    a.T = scan ? 1 : T;
    a.state = L.state, a.slot = field(kGSlot), a.q = gq, a.v = gv, a.beta = gbeta, a.o = y;
    if (scan) a.row = field(kDecRow);
    // The kernel just before is the append (or, in a ragged step, the chunk
    // scan, which writes only the scanning sequences' slots): it writes no
    // state this one reads.
    a.early = true;
    // One token, or a verify's (or feed's) state per token; replay: the checkpoint stepped.
    if (!replay || g_step == 1) {
      a.k = gk, a.g = gg, a.out_slot = field(replay ? kGFoldSlot : kOutSlot);
      RSSM_CU(oc::gdn_step_cuda(a, stream), "GDN step");
    } else {
      a.W = opt.window, a.n_log = field(kGLog), a.log_k = L.log_k, a.log_u = L.log_u, a.log_g = L.log_g;
      a.fold = fold ? field(kGFold) : nullptr, a.fold_slot = field(kGFoldSlot), a.max_fold = fold ? opt.window : 0;
      a.exact = opt.exact;
      if (g_groups > 0)  // sequences reading one checkpoint decode together (plan_fork_groups)
        a.group_start = field(kGGroup), a.seq = field(kGSeq), a.n_groups = g_groups, a.max_group = kForkGroupMax,
        a.scratch = gdn_scratch;
      RSSM_CU(oc::gdn_replay_cuda(a, stream), "GDN replay");
      if (fold) {
        // The fold left this step's T entries (whose u the kernel just wrote)
        // at the end of the log; they become its first entries. kGMoveCount
        // is 0 where a GDN log did not fold.
        oc::LogMoveArgs mv;
        mv.batch = B, mv.W = opt.window, mv.from = field(kGMoveFrom), mv.count = field(kGMoveCount);
        mv.array[0] = L.log_k, mv.width[0] = K;
        mv.array[1] = L.log_u, mv.width[1] = 2 * V;
        mv.array[2] = L.log_g, mv.width[2] = 2 * g.n_v_heads;
        RSSM_CU(oc::log_move_cuda(mv, stream), "GDN log move");
      }
    }
  }
  RSSM_CU(oc::rmsnorm_then_gate_cuda(y, V, proj + C, width, rows, g.n_v_heads, g.v_dim, blk.norm_w, c.norm_eps, y, V,
                                     stream, /*release_early=*/true),  // next: the out_proj GEMV
          "GDN norm and gate");
  return project_out(blk, y, V, V, T, next_norm, "GDN out_proj");
}

Status Decoder::Impl::run_attention(const DeviceBlock& blk, LayerState& L, int T, const float* next_norm) {
  const ModelConfig& c = m.config();
  const AttentionConfig& ac = c.attn;
  const int B = int(opt.batch);
  const int64_t rows = step_rows;
  const int64_t D = ac.head_dim, d_q = ac.n_heads * D, d_kv = ac.n_kv_heads * D;
  AttentionRows qkv;
  RSSM_RETURN_IF_ERROR(attention_qkv(bufs(), m, blk, rows, field(kRowPos), &qkv));
  uint16_t *q = qkv.q, *k = qkv.k, *v = qkv.v;
  const int64_t ldq = qkv.ldq, ldk = qkv.ldk, ldv = qkv.ldv, head_stride = qkv.head_stride;
  // What the decode and the chunk kernels' arguments share: heads, q, gate, output, cache.
  auto heads = [&](auto& at) {
    at.batch = B, at.Hq = int(ac.n_heads), at.Hkv = int(ac.n_kv_heads), at.D = int(D);
    at.scale = 1.0f / std::sqrt(static_cast<float>(D));
    at.q = q, at.ldq = ldq, at.q_head_stride = head_stride;
    if (ac.output_gate) at.gate = q + D, at.ldg = ldq, at.g_head_stride = head_stride;
    at.out = y, at.ldo = d_q, at.kv = L.kv;
  };
  if (T == 1 && !ragged) {
    oc::KvAppendArgs ka;
    ka.batch = B, ka.width = int(d_kv), ka.k = k, ka.v = v, ka.ldk = ldk, ka.ldv = ldv;
    ka.pos = field(kRowPos), ka.kv = L.kv;
    RSSM_CU(oc::kv_append_cuda(ka, stream), "KV append");
    oc::AttentionDecodeArgs at;
    heads(at);
    at.seq_len = field(kSeqLen), at.max_seq_len = int(opt.max_context);
    at.scratch = attn_scratch;
    RSSM_CU(oc::attention_decode_cuda(at, stream), "attention");
  } else {
    oc::KvAppendRowsArgs ka;
    ka.rows = int(rows), ka.width = int(d_kv), ka.k = k, ka.v = v, ka.ldk = ldk, ka.ldv = ldv;
    ka.seq = field(kRowSeq), ka.pos = field(kRowPos), ka.kv = L.kv;
    RSSM_CU(oc::kv_append_rows_cuda(ka, stream), "KV append rows");
    oc::AttentionPrefillArgs at;
    heads(at);
    at.cu_rows = field(kCuRows), at.pos = field(kSeqPos), at.max_rows = T;
    RSSM_CU(oc::attention_prefill_cuda(at, stream), "attention chunk");
  }
  return project_out(blk, y, d_q, d_q, T, next_norm, "attention o_proj");
}

Status Decoder::Impl::run_mlp(const DeviceBlock& blk, int /*T*/, const float* next_norm) {
  return mlp_block(bufs(), m, blk, step_rows, next_norm);
}

Status Decoder::Impl::project_out(const DeviceBlock& blk, const uint16_t* y, int64_t ldy, int64_t n_in, int /*T*/,
                                  const float* next_norm, const char* what) {
  return cuda::project_out(bufs(), m, blk, y, ldy, n_in, step_rows, next_norm, what);
}

Status Decoder::Impl::commit_windows() {
  const ModelConfig& c = m.config();
  for (const DeviceBlock& blk : m.blocks()) {
    if (blk.kind != BlockKind::kMamba2 && blk.kind != BlockKind::kGatedDeltaNet) continue;
    const bool mamba = blk.kind == BlockKind::kMamba2;
    LayerState& L = layers[size_t(blk.cache_layer)];
    oc::Conv1dArgs cv;
    cv.batch = int(opt.batch), cv.C = int(mamba ? c.mamba.conv_channels() : c.gdn.conv_channels());
    cv.K = int(mamba ? c.mamba.conv_width : c.gdn.conv_width);
    cv.window = L.window, cv.slot = field(kWinSlot), cv.x = L.pending, cv.ldx = cv.C;
    cv.cu_rows = field(kCommitRows), cv.n_rows = field(kCommitCount);
    RSSM_CU(oc::conv1d_window_cuda(cv, stream), "conv window commit");
  }
  return {};
}

Status Decoder::Impl::enqueue(int T, bool fold, bool verify, bool commit, bool scan) {
  const ModelConfig& c = m.config();
  const int B = int(opt.batch);
  const int64_t Hd = c.hidden_size, V = c.vocab_size, rows = step_rows;
  RSSM_CU(cudaMemcpyAsync(plan, plan_host, sizeof(int32_t) * kPlanFields * field_len(), cudaMemcpyHostToDevice, stream),
          "plan");
  if (commit) RSSM_RETURN_IF_ERROR(commit_windows());
  RSSM_RETURN_IF_ERROR(embed_rows(bufs(), m, field(kTokens), rows));
  const std::vector<DeviceBlock>& blocks = m.blocks();
  for (size_t i = 0; i < blocks.size(); ++i) {
    const DeviceBlock& blk = blocks[i];
    const float* next_norm = i + 1 < blocks.size() ? blocks[i + 1].norm : m.final_norm();
    switch (blk.kind) {
      case BlockKind::kMamba2:
        RSSM_RETURN_IF_ERROR(run_mamba2(blk, layers[size_t(blk.cache_layer)], T, fold, verify, scan, next_norm));
        break;
      case BlockKind::kGatedDeltaNet:
        RSSM_RETURN_IF_ERROR(run_gdn(blk, layers[size_t(blk.cache_layer)], T, fold, verify, scan, next_norm));
        break;
      case BlockKind::kAttention:
        RSSM_RETURN_IF_ERROR(run_attention(blk, layers[size_t(blk.cache_layer)], T, next_norm));
        break;
      case BlockKind::kMlp: RSSM_RETURN_IF_ERROR(run_mlp(blk, T, next_norm)); break;
      case BlockKind::kMoe: return unsupported("cuda decode: MoE layers have no CUDA kernels yet");
    }
  }
  // Logits of every row (all_logits, verify), or of each sequence's last
  // row (rows b·T + T − 1; a ragged step's kLastRow, gathered into d, which
  // the last block's output projection left free).
  const DeviceLinear& lm = m.lm_head();
  const bool every = opt.all_logits || verify;
  const int64_t out_rows = every ? rows : B;
  const uint16_t* x = every ? xn : xn + (T - 1) * Hd;
  int64_t ldx = every ? Hd : T * Hd;
  if (ragged && !every) {
    oc::LogRowsArgs g;
    g.rows = B, g.width = Hd, g.src = xn, g.lds = Hd, g.src_row = field(kLastRow), g.dst = d;
    RSSM_CU(oc::log_rows_cuda(g, stream), "last rows");
    x = d, ldx = Hd;
  }
  RSSM_CU(gemm->linear(x, ldx, out_rows, lm.w, V, Hd, lm.b, logits, V, true), "LM head");
  RSSM_CU(oc::argmax_cuda(logits, V, out_rows, V, next, stream), "argmax");
  RSSM_CU(cudaMemcpyAsync(next_host, next, sizeof(int32_t) * out_rows, cudaMemcpyDeviceToHost, stream), "next tokens");
  return {};
}

}  // namespace replayssm::cuda
