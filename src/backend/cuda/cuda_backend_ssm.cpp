// CudaBackend's SSM layers (see cuda_backend.h, step_schedule.h): the input
// projection, the conv over the paged pre-conv log and the base windows, the
// step's entries into the log (every new token has a log row: the plan's
// slot, or a scratch slot), the schedule's launches, the windows of the
// states written, the output norm and projection.
//
// The launches' arguments follow the decoder's (src/runtime/cuda/
// decoder_blocks.cpp), which drives the same kernels: the same buffers for
// the projection's parts, the post-conv rows, C, q/k/v/g/β, with the log
// paged (log_pages.h) and each sequence's rows by the row map
// (decode_rows.cuh) or ragged scan rows.
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_status.h"
#include "ops/cuda/conv1d.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/gdn_decode.h"
#include "ops/cuda/gdn_scan.h"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/mamba2_scan.h"
#include "ops/cuda/norm.h"
#include "ops/cuda/ssm_append.h"

namespace replayssm::cuda {

namespace oc = replayssm::ops::cuda;

#define RSSM_SSM_CU(expr, what) RSSM_RETURN_IF_ERROR(cuda_status((expr), "cuda backend", (what)))

namespace {

oc::LogPages log_pages(const int32_t* page, int stride, const int32_t* first, int64_t B) {
  oc::LogPages p;
  p.page = page, p.page_stride = stride, p.first = first, p.page_size = int(B);
  return p;
}

}  // namespace

Status CudaBackend::conv_and_log(const DeviceBlock& blk, SsmStore& st, const StepSchedule& s, int64_t off,
                                 int64_t width) {
  const SsmShape& sh = st.shape;
  const int64_t B = storage_->page_size();
  // Each slice's rows after the K−1 before them: logged pre-conv rows from
  // its base on, its base checkpoint's window before.
  oc::Conv1dArgs cv;
  cv.batch = s.n_seqs, cv.C = int(sh.C), cv.K = int(sh.K), cv.weight = blk.conv_w, cv.bias = blk.conv_b;
  cv.x = proj_ + off, cv.ldx = width, cv.y = xconv_, cv.ldy = sh.C;
  cv.cu_rows = dev(s.cu_rows), cv.max_rows = s.max_rows;
  cv.log_rows = st.log_pre, cv.pages = log_pages(dev(s.conv_page), s.conv_page_stride, dev(s.conv_first), B);
  cv.n_logged = dev(s.conv_logged), cv.ckpt_window = st.window, cv.ckpt_slot = dev(s.conv_ckpt);
  RSSM_SSM_CU(oc::conv1d_prefill_cuda(cv, stream_), "conv1d");
  // The new pre-conv rows into the log, for later steps' windows and this
  // step's checkpoints (gather_windows).
  oc::LogRowsArgs lr;
  lr.rows = s.rows, lr.width = sh.C, lr.src = proj_ + off, lr.lds = width, lr.entry = dev(s.entry);
  lr.dst = st.log_pre;
  RSSM_SSM_CU(oc::log_rows_cuda(lr, stream_), "log pre-conv rows");
  return {};
}

Status CudaBackend::run_mamba2(const DeviceBlock& blk, SsmStore& st, const StepSchedule& s, const float* next_norm) {
  const ModelConfig& c = model_.config();
  const Mamba2Config& mc = c.mamba;
  const int Hd = int(c.hidden_size);
  const int64_t HP = mc.n_heads * mc.head_dim, C = mc.conv_channels(), width = blk.in.n_out;
  RSSM_SSM_CU(gemm_->linear(xn_, Hd, s.rows, blk.in.w, width, Hd, blk.in.b, proj_, width, false), "Mamba2 in_proj");
  RSSM_RETURN_IF_ERROR(conv_and_log(blk, st, s, HP, width));  // z | xBC | dt: the conv takes xBC
  // x, B, dt of every row into its log row; C into its dense row (the
  // replay kernels' Cm).
  oc::Mamba2AppendArgs ap;
  ap.rows = s.rows, ap.H = int(mc.n_heads), ap.P = int(mc.head_dim), ap.G = int(mc.n_groups), ap.N = int(mc.state_size);
  ap.xbc = xconv_, ap.ldxbc = C, ap.dt_raw = proj_ + HP + C, ap.lddt = width, ap.dt_bias = blk.dt_bias;
  ap.dt_min = mc.dt_min, ap.dt_max = mc.dt_max, ap.entry = dev(s.entry);
  ap.x = st.log_a, ap.Bm = static_cast<uint16_t*>(st.log_b), ap.dt = st.log_c, ap.Cm = cC_;
  RSSM_SSM_CU(oc::mamba2_append_cuda(ap, stream_), "Mamba2 append");
  RSSM_RETURN_IF_ERROR(run_launches(blk, st, s, s.mamba));
  RSSM_SSM_CU(oc::rmsnorm_gated_group_cuda(y_, HP, proj_, width, s.rows, HP, HP / mc.n_groups, blk.norm_w, c.norm_eps,
                                           y_, HP, stream_, /*release_early=*/true),  // next: the out_proj GEMV
              "Mamba2 gated norm");
  return project_out(bufs(), *dm_, blk, y_, HP, HP, s.rows, next_norm, "Mamba2 out_proj");
}

Status CudaBackend::run_gdn(const DeviceBlock& blk, SsmStore& st, const StepSchedule& s, const float* next_norm) {
  const ModelConfig& c = model_.config();
  const GdnConfig& g = c.gdn;
  const int Hd = int(c.hidden_size);
  const int64_t Kd = g.n_k_heads * g.k_dim, V = g.n_v_heads * g.v_dim, C = g.conv_channels(), width = blk.in.n_out;
  RSSM_SSM_CU(gemm_->linear(xn_, Hd, s.rows, blk.in.w, width, Hd, blk.in.b, proj_, width, false), "GDN in_proj");
  RSSM_RETURN_IF_ERROR(conv_and_log(blk, st, s, 0, width));  // qkv | z | a | b: the conv takes qkv
  oc::GdnPrepareArgs pr;
  pr.rows = s.rows, pr.Hk = int(g.n_k_heads), pr.Hv = int(g.n_v_heads), pr.dk = int(g.k_dim);
  pr.A_log = blk.A_log, pr.dt_bias = blk.dt_bias, pr.q = xconv_, pr.k = xconv_ + Kd, pr.ldq = C, pr.ldk = C;
  pr.a = proj_ + C + V, pr.b = proj_ + C + V + g.n_v_heads, pr.lda = width, pr.ldb = width;
  pr.q_out = gq_, pr.k_out = gk_, pr.g = gg_, pr.beta = gbeta_;
  RSSM_SSM_CU(oc::gdn_prepare_cuda(pr, stream_), "GDN prepare");
  // v into its dense row; k and g of every row into its log row (u comes
  // from the kernels that compute it).
  oc::GdnAppendArgs ap;
  ap.rows = s.rows, ap.Hk = int(g.n_k_heads), ap.Hv = int(g.n_v_heads), ap.dk = int(g.k_dim), ap.dv = int(g.v_dim);
  ap.v_in = xconv_ + 2 * Kd, ap.ldv = C, ap.v = gv_;
  ap.entry = dev(s.entry), ap.k = gk_, ap.g = gg_, ap.log_k = st.log_a, ap.log_g = st.log_c;
  RSSM_SSM_CU(oc::gdn_append_cuda(ap, stream_), "GDN append");
  RSSM_RETURN_IF_ERROR(run_launches(blk, st, s, s.gdn));
  RSSM_SSM_CU(oc::rmsnorm_then_gate_cuda(y_, V, proj_ + C, width, s.rows, g.n_v_heads, g.v_dim, blk.norm_w, c.norm_eps,
                                         y_, V, stream_, /*release_early=*/true),  // next: the out_proj GEMV
              "GDN norm and gate");
  return project_out(bufs(), *dm_, blk, y_, V, V, s.rows, next_norm, "GDN out_proj");
}

Status CudaBackend::run_launches(const DeviceBlock& blk, SsmStore& st, const StepSchedule& s, const KindSchedule& k) {
  const ModelConfig& c = model_.config();
  const SsmShape& sh = st.shape;
  const int64_t B = storage_->page_size();
  for (const SsmLaunch& L : k.launches) {
    const oc::LogPages pages = log_pages(dev(L.page), L.page_stride, dev(L.first), B);
    if (L.kind == SsmLaunch::kCopy) {  // a state at its source's position
      const int64_t bytes = sh.state_floats() * 4;
      RSSM_SSM_CU(cudaMemcpyAsync(st.state + int64_t(L.copy_dst) * sh.state_floats(),
                                  st.state + int64_t(L.copy_src) * sh.state_floats(), size_t(bytes),
                                  cudaMemcpyDeviceToDevice, stream_),
                  "checkpoint at its base");
      continue;
    }
    if (sh.mamba) {
      const Mamba2Config& mc = c.mamba;
      const int64_t HP = mc.n_heads * mc.head_dim, GN = mc.n_groups * mc.state_size, C = mc.conv_channels();
      if (L.kind == SsmLaunch::kDecode) {
        oc::Mamba2DecodeArgs a;
        a.batch = L.batch, a.H = int(mc.n_heads), a.P = int(mc.head_dim), a.N = int(mc.state_size);
        a.G = int(mc.n_groups), a.T = L.T;
        a.A_log = blk.A_log, a.D = blk.D, a.dt_bias = blk.dt_bias, a.dt_min = mc.dt_min, a.dt_max = mc.dt_max;
        a.state = st.state, a.slot = dev(L.slot), a.Cm = cC_, a.y = y_, a.row = dev(L.row);
        a.W = 0, a.n_log = dev(L.n_log);  // paged: W bounds the log only (0: the most a kernel takes)
        a.log_x = st.log_a, a.log_B = static_cast<const uint16_t*>(st.log_b), a.log_dt = st.log_c;
        a.fold = dev(L.fold), a.fold_slot = dev(L.fold_slot), a.max_fold = L.max_fold;
        a.scratch = mamba_scratch_, a.exact = s.exact, a.pages = pages;
        RSSM_SSM_CU(oc::mamba2_replay_cuda(a, stream_), "Mamba2 replay");
      } else if (L.kind == SsmLaunch::kScan) {
        const int64_t width = blk.in.n_out;
        oc::Mamba2ScanArgs a;
        a.batch = L.batch, a.H = int(mc.n_heads), a.P = int(mc.head_dim), a.N = int(mc.state_size);
        a.G = int(mc.n_groups), a.T = L.T;
        a.A_log = blk.A_log, a.D = blk.D, a.dt_bias = blk.dt_bias, a.dt_min = mc.dt_min, a.dt_max = mc.dt_max;
        a.state = st.state, a.slot = dev(L.slot), a.out_slot = dev(L.out_slot);
        a.x = xconv_, a.ldx = C, a.Bm = xconv_ + HP, a.Cm = xconv_ + HP + GN, a.ldbc = C;
        a.dt_raw = proj_ + HP + C, a.lddt = width, a.y = y_, a.ldy = HP;
        a.cu_rows = dev(L.cu_rows), a.n_rows = dev(L.n_rows), a.apply_log_alone = L.log_alone;
        a.n_log = dev(L.n_log), a.log_x = st.log_a, a.log_B = static_cast<const uint16_t*>(st.log_b);
        a.log_dt = st.log_c, a.pages = pages;
        RSSM_SSM_CU(oc::mamba2_scan_cuda(a, stream_), L.log_alone ? "Mamba2 checkpoint" : "Mamba2 chunk scan");
      } else {
        return invalid_argument("cuda backend: a Mamba2 layer scheduled for the standard step");
      }
      continue;
    }
    const GdnConfig& g = c.gdn;
    const int64_t V = g.n_v_heads * g.v_dim;
    float* log_u = static_cast<float*>(st.log_b);
    if (L.kind == SsmLaunch::kDecode || L.kind == SsmLaunch::kStep) {
      oc::GdnDecodeArgs a;
      a.batch = L.batch, a.Hk = int(g.n_k_heads), a.Hv = int(g.n_v_heads), a.dk = int(g.k_dim), a.dv = int(g.v_dim);
      a.T = L.T, a.state = st.state, a.slot = dev(L.slot), a.row = dev(L.row);
      a.q = gq_, a.v = gv_, a.beta = gbeta_, a.o = y_;
      if (L.kind == SsmLaunch::kStep) {  // no log: each token's state where the plan keeps it (or scratch)
        a.k = gk_, a.g = gg_, a.out_slot = dev(L.out_slot);
        RSSM_SSM_CU(oc::gdn_step_cuda(a, stream_), "GDN step");
      } else {  // the new tokens' u into their log rows
        a.W = 0, a.n_log = dev(L.n_log), a.log_k = st.log_a, a.log_u = log_u, a.log_g = st.log_c;
        a.fold = dev(L.fold), a.fold_slot = dev(L.fold_slot), a.max_fold = L.max_fold;
        a.exact = s.exact, a.pages = pages;
        RSSM_SSM_CU(oc::gdn_replay_cuda(a, stream_), "GDN replay");
      }
      continue;
    }
    oc::GdnScanArgs a;
    a.batch = L.batch, a.Hk = int(g.n_k_heads), a.Hv = int(g.n_v_heads), a.dk = int(g.k_dim), a.dv = int(g.v_dim);
    a.T = L.T, a.state = st.state, a.slot = dev(L.slot), a.out_slot = dev(L.out_slot);
    a.q = gq_, a.k = gk_, a.v = gv_, a.g = gg_, a.beta = gbeta_, a.o = y_;
    a.cu_rows = dev(L.cu_rows), a.n_rows = dev(L.n_rows), a.apply_log_alone = L.log_alone;
    a.u = L.u_entry.present() ? gu_ : nullptr;
    a.n_log = dev(L.n_log), a.log_k = st.log_a, a.log_u = log_u, a.log_g = st.log_c, a.pages = pages;
    RSSM_SSM_CU(oc::gdn_scan_cuda(a, stream_), L.log_alone ? "GDN checkpoint" : "GDN chunk scan");
    if (L.u_entry.present()) {  // the chunk's u into its log rows (before any write replays them)
      oc::LogRowsArgs lr;
      lr.rows = s.rows, lr.width = 2 * V, lr.src = reinterpret_cast<const uint16_t*>(gu_), lr.lds = 2 * V;
      lr.entry = dev(L.u_entry), lr.dst = reinterpret_cast<uint16_t*>(log_u);
      RSSM_SSM_CU(oc::log_rows_cuda(lr, stream_), "GDN log u");
    }
  }
  return gather_windows(blk, st, s, k.windows);
}

Status CudaBackend::gather_windows(const DeviceBlock& blk, SsmStore& st, const StepSchedule& s, const WindowGather& g) {
  (void)blk, (void)s;
  const SsmShape& sh = st.shape;
  if (g.n == 0 || sh.K == 1) return {};
  // Into the staging area first: a write may reuse the slot whose window
  // another gather (or its own) reads.
  oc::Conv1dArgs cv;
  cv.batch = g.n, cv.C = int(sh.C), cv.K = int(sh.K), cv.log_rows = st.log_pre;
  cv.pages = log_pages(dev(g.page), g.page_stride, dev(g.first), storage_->page_size());
  cv.ckpt_window = st.window, cv.ckpt_slot = dev(g.ckpt_slot);
  RSSM_SSM_CU(oc::conv1d_gather_window_cuda(cv, dev(g.n_upto), win_stage_, dev(g.out), stream_), "checkpoint windows");
  const int64_t w = sh.window_elems();
  for (int j = 0; j < g.n; ++j)
    RSSM_SSM_CU(cudaMemcpyAsync(st.window + int64_t(g.write_slot[size_t(j)]) * w, win_stage_ + int64_t(j) * w,
                                size_t(w * 2), cudaMemcpyDeviceToDevice, stream_),
                "checkpoint windows");
  return {};
}

}  // namespace replayssm::cuda
