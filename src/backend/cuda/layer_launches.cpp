// The launches of a step's stateful layers (see layer_launches.h).
//
// Each kernel reads its part of the fused input projection, the post-conv
// rows, C, q/k/v/g/β in dense rows — with the log paged
// (log_pages.h: each launch's block tables and first offsets from the
// schedule) and each sequence's rows by the row map (decode_rows.cuh) or
// ragged scan rows.
#include "backend/cuda/layer_launches.h"

#include <cmath>
#include <optional>
#include <string>

#include "backend/cuda/cuda_status.h"
#include "ops/cuda/attention_decode.h"
#include "ops/cuda/attention_prefill.h"
#include "ops/cuda/conv1d.h"
#include "ops/cuda/dry_launch.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/gdn_decode.h"
#include "ops/cuda/gdn_scan.h"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/mamba2_scan.h"
#include "ops/cuda/ssm_append.h"

namespace replayssm::cuda {

namespace oc = replayssm::ops::cuda;

namespace {

// A launch's result: with check_only only a refusal of the arguments counts.
Status launched(const LayerArgs& a, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  if (a.check_only && e != cudaErrorInvalidValue) {
    cudaGetLastError();
    return {};
  }
  return cuda_status(e, "cuda backend", what);
}
#define RSSM_LAUNCH(expr, what) RSSM_RETURN_IF_ERROR(launched(a, (expr), (what)))

// A device-to-device copy of the step; with check_only nothing is copied
// (the stand-in pointers name no memory).
cudaError_t copy_async(const LayerArgs& a, void* dst, const void* src, size_t bytes) {
  if (a.check_only) return cudaSuccess;
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, a.stream);
}

const int32_t* dev(const LayerArgs& a, const Span32& s) { return s.present() ? a.sched + s.at : nullptr; }

oc::LogPages log_pages(const LayerArgs& a, const Span32& page, int stride, const Span32& first) {
  oc::LogPages p;
  p.page = dev(a, page), p.page_stride = stride, p.first = dev(a, first), p.page_size = int(a.page_size);
  return p;
}

// The conv of every row over its slice's paged window — logged pre-conv
// rows from its base on, its base checkpoint's window before — into
// a.xconv, then the new pre-conv rows into the log (for later steps'
// windows and this step's checkpoints). off: the conv channels' column in
// a.proj.
Status conv_and_log(const LayerArgs& a, const StepSchedule& s, int64_t off) {
  const SsmShape& sh = a.ssm->shape;
  const int64_t width = a.blk->in.n_out;
  oc::Conv1dArgs cv;
  cv.batch = s.n_seqs, cv.C = int(sh.C), cv.K = int(sh.K), cv.weight = a.blk->conv_w, cv.bias = a.blk->conv_b;
  cv.x = a.proj + off, cv.ldx = width, cv.y = a.xconv, cv.ldy = sh.C;
  cv.cu_rows = dev(a, s.cu_rows), cv.max_rows = s.max_rows;
  cv.log_rows = a.ssm->log_pre, cv.pages = log_pages(a, s.conv_page, s.conv_page_stride, s.conv_first);
  cv.n_logged = dev(a, s.conv_logged), cv.ckpt_window = a.ssm->window, cv.ckpt_slot = dev(a, s.conv_ckpt);
  RSSM_LAUNCH(oc::conv1d_prefill_cuda(cv, a.stream), "conv1d");
  oc::LogRowsArgs lr;
  lr.rows = s.rows, lr.width = sh.C, lr.src = a.proj + off, lr.lds = width, lr.entry = dev(a, s.entry);
  lr.dst = a.ssm->log_pre;
  RSSM_LAUNCH(oc::log_rows_cuda(lr, a.stream), "log pre-conv rows");
  return {};
}

// Every planned state's window (the K−1 pre-conv rows before its
// position) into staging, then into its slot: a write may reuse the slot
// whose window another gather, or its own, reads. The scatter is one
// launch (log_rows_cuda over window rows), not a copy per state: a
// snapshot step writes a state per sequence per layer, 6,144 copies a
// step at batch 256 on Nemotron-H-8B's 24 Mamba2 layers.
Status gather_windows(const LayerArgs& a, const WindowGather& g) {
  const SsmShape& sh = a.ssm->shape;
  if (g.n == 0 || sh.K == 1) return {};
  oc::Conv1dArgs cv;
  cv.batch = g.n, cv.C = int(sh.C), cv.K = int(sh.K), cv.log_rows = a.ssm->log_pre;
  cv.pages = log_pages(a, g.page, g.page_stride, g.first);
  cv.ckpt_window = a.ssm->window, cv.ckpt_slot = dev(a, g.ckpt_slot);
  RSSM_LAUNCH(oc::conv1d_gather_window_cuda(cv, dev(a, g.n_upto), a.win_stage, dev(a, g.out), a.stream),
              "checkpoint windows");
  const int64_t w = sh.window_elems();
  oc::LogRowsArgs sc;
  sc.rows = g.n, sc.width = w, sc.src = a.win_stage, sc.lds = w, sc.entry = dev(a, g.write), sc.dst = a.ssm->window;
  RSSM_LAUNCH(oc::log_rows_cuda(sc, a.stream), "checkpoint windows");
  return {};
}

// A state at its source's position (the schedule's kCopy).
Status copy_state(const LayerArgs& a, const SsmLaunch& L) {
  const int64_t n = a.ssm->shape.state_floats();
  RSSM_LAUNCH(copy_async(a, a.ssm->state + int64_t(L.copy_dst) * n, a.ssm->state + int64_t(L.copy_src) * n,
                         size_t(n * 4)),
              "checkpoint at its base");
  return {};
}

Status mamba2_layer(const LayerArgs& a, const StepSchedule& s) {
  const Mamba2Config& mc = a.config->mamba;
  const DeviceBlock& blk = *a.blk;
  SsmStore& st = *a.ssm;
  const int64_t HP = mc.n_heads * mc.head_dim, GN = mc.n_groups * mc.state_size, C = mc.conv_channels();
  const int64_t width = blk.in.n_out;
  RSSM_RETURN_IF_ERROR(conv_and_log(a, s, HP));  // z | xBC | dt: the conv takes xBC
  // x, B, dt of every row into its log row; C into its dense row (the
  // replay kernels' Cm).
  oc::Mamba2AppendArgs ap;
  ap.rows = s.rows, ap.H = int(mc.n_heads), ap.P = int(mc.head_dim), ap.G = int(mc.n_groups), ap.N = int(mc.state_size);
  ap.xbc = a.xconv, ap.ldxbc = C, ap.dt_raw = a.proj + HP + C, ap.lddt = width, ap.dt_bias = blk.dt_bias;
  ap.dt_min = mc.dt_min, ap.dt_max = mc.dt_max, ap.entry = dev(a, s.entry);
  ap.x = st.log_a, ap.Bm = static_cast<uint16_t*>(st.log_b), ap.dt = st.log_c, ap.Cm = a.cC;
  RSSM_LAUNCH(oc::mamba2_append_cuda(ap, a.stream), "Mamba2 append");
  for (const SsmLaunch& L : s.mamba.launches) {
    if (L.kind == SsmLaunch::kCopy) {
      RSSM_RETURN_IF_ERROR(copy_state(a, L));
      continue;
    }
    const oc::LogPages pages = log_pages(a, L.page, L.page_stride, L.first);
    if (L.kind == SsmLaunch::kDecode) {
      oc::Mamba2DecodeArgs d;
      d.batch = L.batch, d.H = int(mc.n_heads), d.P = int(mc.head_dim), d.N = int(mc.state_size);
      d.G = int(mc.n_groups), d.T = L.T;
      d.A_log = blk.A_log, d.D = blk.D, d.dt_bias = blk.dt_bias, d.dt_min = mc.dt_min, d.dt_max = mc.dt_max;
      d.state = st.state, d.slot = dev(a, L.slot), d.Cm = a.cC, d.y = a.y, d.row = dev(a, L.row);
      d.W = 0, d.n_log = dev(a, L.n_log);  // paged: W bounds the log only (0: the most a kernel takes)
      d.log_x = st.log_a, d.log_B = static_cast<const uint16_t*>(st.log_b), d.log_dt = st.log_c;
      d.fold = dev(a, L.fold), d.fold_slot = dev(a, L.fold_slot), d.max_fold = L.max_fold;
      d.scratch = a.mamba_scratch, d.exact = s.exact, d.pages = pages;
      RSSM_LAUNCH(oc::mamba2_replay_cuda(d, a.stream), "Mamba2 replay");
    } else if (L.kind == SsmLaunch::kScan) {
      oc::Mamba2ScanArgs d;
      d.batch = L.batch, d.H = int(mc.n_heads), d.P = int(mc.head_dim), d.N = int(mc.state_size);
      d.G = int(mc.n_groups), d.T = L.T;
      d.A_log = blk.A_log, d.D = blk.D, d.dt_bias = blk.dt_bias, d.dt_min = mc.dt_min, d.dt_max = mc.dt_max;
      d.state = st.state, d.slot = dev(a, L.slot), d.out_slot = dev(a, L.out_slot);
      d.x = a.xconv, d.ldx = C, d.Bm = a.xconv + HP, d.Cm = a.xconv + HP + GN, d.ldbc = C;
      d.dt_raw = a.proj + HP + C, d.lddt = width, d.y = a.y, d.ldy = HP;
      d.cu_rows = dev(a, L.cu_rows), d.n_rows = dev(a, L.n_rows), d.apply_log_alone = L.log_alone;
      d.n_log = dev(a, L.n_log), d.log_x = st.log_a, d.log_B = static_cast<const uint16_t*>(st.log_b);
      d.log_dt = st.log_c, d.pages = pages;
      RSSM_LAUNCH(oc::mamba2_scan_cuda(d, a.stream), L.log_alone ? "Mamba2 checkpoint" : "Mamba2 chunk scan");
    } else {
      return invalid_argument("cuda backend: a Mamba2 layer scheduled for the standard step");
    }
  }
  return gather_windows(a, s.mamba.windows);
}

Status gdn_layer(const LayerArgs& a, const StepSchedule& s) {
  const GdnConfig& g = a.config->gdn;
  const DeviceBlock& blk = *a.blk;
  SsmStore& st = *a.ssm;
  const int64_t Kd = g.n_k_heads * g.k_dim, V = g.n_v_heads * g.v_dim, C = g.conv_channels(), width = blk.in.n_out;
  RSSM_RETURN_IF_ERROR(conv_and_log(a, s, 0));  // qkv | z | a | b: the conv takes qkv
  oc::GdnPrepareArgs pr;
  pr.rows = s.rows, pr.Hk = int(g.n_k_heads), pr.Hv = int(g.n_v_heads), pr.dk = int(g.k_dim);
  pr.A_log = blk.A_log, pr.dt_bias = blk.dt_bias, pr.q = a.xconv, pr.k = a.xconv + Kd, pr.ldq = C, pr.ldk = C;
  pr.a = a.proj + C + V, pr.b = a.proj + C + V + g.n_v_heads, pr.lda = width, pr.ldb = width;
  pr.q_out = a.gq, pr.k_out = a.gk, pr.g = a.gg, pr.beta = a.gbeta;
  RSSM_LAUNCH(oc::gdn_prepare_cuda(pr, a.stream), "GDN prepare");
  // v into its dense row; k and g of every row into its log row (u comes
  // from the kernels that compute it).
  oc::GdnAppendArgs ap;
  ap.rows = s.rows, ap.Hk = int(g.n_k_heads), ap.Hv = int(g.n_v_heads), ap.dk = int(g.k_dim), ap.dv = int(g.v_dim);
  ap.v_in = a.xconv + 2 * Kd, ap.ldv = C, ap.v = a.gv;
  ap.entry = dev(a, s.entry), ap.k = a.gk, ap.g = a.gg, ap.log_k = st.log_a, ap.log_g = st.log_c;
  RSSM_LAUNCH(oc::gdn_append_cuda(ap, a.stream), "GDN append");
  float* log_u = static_cast<float*>(st.log_b);
  for (const SsmLaunch& L : s.gdn.launches) {
    if (L.kind == SsmLaunch::kCopy) {
      RSSM_RETURN_IF_ERROR(copy_state(a, L));
      continue;
    }
    const oc::LogPages pages = log_pages(a, L.page, L.page_stride, L.first);
    if (L.kind == SsmLaunch::kDecode || L.kind == SsmLaunch::kStep) {
      oc::GdnDecodeArgs d;
      d.batch = L.batch, d.Hk = int(g.n_k_heads), d.Hv = int(g.n_v_heads), d.dk = int(g.k_dim), d.dv = int(g.v_dim);
      d.T = L.T, d.state = st.state, d.slot = dev(a, L.slot), d.row = dev(a, L.row);
      d.q = a.gq, d.v = a.gv, d.beta = a.gbeta, d.o = a.y;
      if (L.kind == SsmLaunch::kStep) {  // no log: each token's state where the plan keeps it (or scratch)
        d.k = a.gk, d.g = a.gg, d.out_slot = dev(a, L.out_slot);
        RSSM_LAUNCH(oc::gdn_step_cuda(d, a.stream), "GDN step");
      } else {  // the new tokens' u into their log rows
        d.W = 0, d.n_log = dev(a, L.n_log), d.log_k = st.log_a, d.log_u = log_u, d.log_g = st.log_c;
        d.fold = dev(a, L.fold), d.fold_slot = dev(a, L.fold_slot), d.max_fold = L.max_fold;
        d.exact = s.exact, d.pages = pages;
        RSSM_LAUNCH(oc::gdn_replay_cuda(d, a.stream), "GDN replay");
      }
      continue;
    }
    oc::GdnScanArgs d;
    d.batch = L.batch, d.Hk = int(g.n_k_heads), d.Hv = int(g.n_v_heads), d.dk = int(g.k_dim), d.dv = int(g.v_dim);
    d.T = L.T, d.state = st.state, d.slot = dev(a, L.slot), d.out_slot = dev(a, L.out_slot);
    d.q = a.gq, d.k = a.gk, d.v = a.gv, d.g = a.gg, d.beta = a.gbeta, d.o = a.y;
    d.cu_rows = dev(a, L.cu_rows), d.n_rows = dev(a, L.n_rows), d.apply_log_alone = L.log_alone;
    d.u = L.u_entry.present() ? a.gu : nullptr;
    d.n_log = dev(a, L.n_log), d.log_k = st.log_a, d.log_u = log_u, d.log_g = st.log_c, d.pages = pages;
    RSSM_LAUNCH(oc::gdn_scan_cuda(d, a.stream), L.log_alone ? "GDN checkpoint" : "GDN chunk scan");
    if (L.u_entry.present()) {  // the chunk's u into its log rows, before any write replays them
      oc::LogRowsArgs lr;
      lr.rows = s.rows, lr.width = 2 * V, lr.src = reinterpret_cast<const uint16_t*>(a.gu), lr.lds = 2 * V;
      lr.entry = dev(a, L.u_entry), lr.dst = reinterpret_cast<uint16_t*>(log_u);
      RSSM_LAUNCH(oc::log_rows_cuda(lr, a.stream), "GDN log u");
    }
  }
  return gather_windows(a, s.gdn.windows);
}

}  // namespace

Status ssm_layer(const LayerArgs& a, const StepSchedule& s) {
  std::optional<oc::DryLaunches> dry;  // check_only: the launchers' checks, no launch
  if (a.check_only) dry.emplace();
  return a.blk->kind == BlockKind::kMamba2 ? mamba2_layer(a, s) : gdn_layer(a, s);
}

Status attention_layer(const LayerArgs& a, const StepSchedule& s) {
  std::optional<oc::DryLaunches> dry;  // check_only: the launchers' checks, no launch
  if (a.check_only) dry.emplace();
  const AttentionConfig& ac = a.config->attn;
  const int64_t D = ac.head_dim, d_q = ac.n_heads * D, d_kv = ac.n_kv_heads * D;
  oc::PagedKv pk;
  pk.k_pages = a.kv->k_pages, pk.v_pages = a.kv->v_pages, pk.page_table = dev(a, s.kv_table);
  pk.max_pages = s.kv_max_pages, pk.page_size = int(a.page_size), pk.row_stride = 2 * a.kv->width;
  // The new rows into their pages; a rebuild's rows (kv_pos −1) are skipped.
  oc::KvAppendRowsArgs ka;
  ka.rows = int(s.rows), ka.width = int(d_kv), ka.k = a.k, ka.v = a.v, ka.ldk = a.ldk, ka.ldv = a.ldv;
  ka.seq = dev(a, s.kv_seq), ka.pos = dev(a, s.kv_pos), ka.kv = pk;
  RSSM_LAUNCH(oc::kv_append_rows_cuda(ka, a.stream), "K/V append");
  auto heads = [&](auto& at) {
    at.batch = s.n_seqs, at.Hq = int(ac.n_heads), at.Hkv = int(ac.n_kv_heads), at.D = int(D);
    at.scale = 1.0f / std::sqrt(static_cast<float>(D));
    at.q = a.q, at.ldq = a.ldq, at.q_head_stride = a.q_head_stride;
    if (ac.output_gate) at.gate = a.q + D, at.ldg = a.ldq, at.g_head_stride = a.q_head_stride;
    at.out = a.y, at.ldo = d_q, at.kv = pk;
  };
  if (s.all_single && a.decode_attention) {  // sequence b is row b: one query each
    oc::AttentionDecodeArgs at;
    heads(at);
    at.seq_len = dev(a, s.seq_len), at.max_seq_len = s.max_len, at.scratch = a.attn_scratch;
    RSSM_LAUNCH(oc::attention_decode_cuda(at, a.stream), "attention");
  } else {
    oc::AttentionPrefillArgs at;
    heads(at);
    at.cu_rows = dev(a, s.cu_rows), at.pos = dev(a, s.seq_pos), at.max_rows = s.max_rows;
    RSSM_LAUNCH(oc::attention_prefill_cuda(at, a.stream), "attention");
  }
  return {};
}

}  // namespace replayssm::cuda
