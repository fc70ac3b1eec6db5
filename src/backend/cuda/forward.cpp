// The stateless parts of a CUDA forward step (see forward.h).
#include "backend/cuda/forward.h"

#include "backend/cuda/cuda_status.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/norm.h"
#include "ops/cuda/rope.h"
#include "ops/cuda/sampling.h"

namespace replayssm::cuda {

namespace oc = replayssm::ops::cuda;

#define RSSM_FWD_CU(expr, what) RSSM_RETURN_IF_ERROR(cuda_status((expr), s.context, (what)))

Status embed_rows(const StepBuffers& s, const DeviceModel& m, const int32_t* tokens, int64_t rows) {
  const ModelConfig& c = m.config();
  const int64_t Hd = c.hidden_size, V = c.vocab_size;
  RSSM_FWD_CU(oc::embedding_cuda(tokens, rows, m.embed(), V, Hd, Hd, s.h, Hd, s.stream), "embedding");
  // The first block's norm; every later one (and the final norm) comes out
  // of the block before's output projection (project_out).
  const std::vector<DeviceBlock>& blocks = m.blocks();
  RSSM_FWD_CU(oc::residual_rmsnorm_cuda(s.h, Hd, nullptr, Hd, rows, Hd, blocks.empty() ? m.final_norm() : blocks[0].norm,
                                        c.norm_eps, c.norm_unit_offset, s.xn, Hd, s.stream, /*release_early=*/true),
              "first norm");
  return {};
}

Status attention_qkv(const StepBuffers& s, const DeviceModel& m, const DeviceBlock& blk, int64_t rows,
                     const int32_t* row_pos, AttentionRows* out) {
  const ModelConfig& c = m.config();
  const AttentionConfig& ac = c.attn;
  const int Hd = int(c.hidden_size);
  const int64_t D = ac.head_dim, d_kv = ac.n_kv_heads * D;
  const int64_t head_stride = ac.output_gate ? 2 * D : D, q_width = ac.n_heads * head_stride;
  AttentionRows r;
  r.head_stride = head_stride;
  if (!ac.qk_norm) {  // one GEMM: q | k | v side by side
    const int64_t width = blk.in.n_out;
    RSSM_FWD_CU(s.gemm->linear(s.xn, Hd, rows, blk.in.w, width, Hd, blk.in.b, s.proj, width, false), "attention qkv");
    r.q = s.proj, r.k = s.proj + q_width, r.v = s.proj + q_width + d_kv, r.ldq = r.ldk = r.ldv = width;
  } else {  // per-head norms want q and k each in their own rows
    const float* bq = blk.in.b;
    RSSM_FWD_CU(s.gemm->linear(s.xn, Hd, rows, blk.in.w, q_width, Hd, bq, s.aq, q_width, false), "attention q");
    RSSM_FWD_CU(s.gemm->linear(s.xn, Hd, rows, blk.in.w + q_width * Hd, d_kv, Hd, bq ? bq + q_width : nullptr, s.ak,
                               d_kv, false),
                "attention k");
    RSSM_FWD_CU(s.gemm->linear(s.xn, Hd, rows, blk.in.w + (q_width + d_kv) * Hd, d_kv, Hd,
                               bq ? bq + q_width + d_kv : nullptr, s.av, d_kv, false),
                "attention v");
    r.q = s.aq, r.k = s.ak, r.v = s.av, r.ldq = q_width, r.ldk = r.ldv = d_kv;
    RSSM_FWD_CU(oc::rmsnorm_cuda(r.q, head_stride, rows * ac.n_heads, D, blk.q_norm, c.norm_eps, c.norm_unit_offset,
                                 r.q, head_stride, s.stream),
                "q norm");
    RSSM_FWD_CU(oc::rmsnorm_cuda(r.k, D, rows * ac.n_kv_heads, D, blk.k_norm, c.norm_eps, c.norm_unit_offset, r.k, D,
                                 s.stream),
                "k norm");
  }
  if (ac.rotary_dim > 0) {
    RSSM_FWD_CU(oc::rope_cuda(r.q, r.ldq, head_stride, rows, int(ac.n_heads), int(ac.rotary_dim), s.inv_freq, row_pos,
                              s.stream),
                "RoPE q");
    RSSM_FWD_CU(oc::rope_cuda(r.k, r.ldk, D, rows, int(ac.n_kv_heads), int(ac.rotary_dim), s.inv_freq, row_pos,
                              s.stream),
                "RoPE k");
  }
  *out = r;
  return {};
}

Status mlp_block(const StepBuffers& s, const DeviceModel& m, const DeviceBlock& blk, int64_t rows,
                 const float* next_norm) {
  const ModelConfig& c = m.config();
  const int Hd = int(c.hidden_size);
  const int64_t I = c.mlp.intermediate, width = blk.in.n_out;
  uint16_t* act = c.mlp.gated ? s.proj + I : s.proj;  // act(gate) ⊙ up lands on up
  if (c.mlp.gated) {
    RSSM_FWD_CU(s.gemm->linear(s.xn, Hd, rows, blk.in.w, width, Hd, blk.in.b, s.proj, width, false), "MLP up");
    RSSM_FWD_CU(oc::mlp_activation_cuda(c.mlp.act, s.proj, width, act, width, rows, I, act, width, s.stream),
                "MLP activation");
  } else {
    RSSM_FWD_CU(s.gemm->linear_act(s.xn, Hd, rows, blk.in.w, width, Hd, blk.in.b, c.mlp.act, s.proj, width),
                "MLP up and activation");
  }
  return project_out(s, m, blk, act, width, I, rows, next_norm, "MLP down");
}

Status project_out(const StepBuffers& s, const DeviceModel& m, const DeviceBlock& blk, const uint16_t* y, int64_t ldy,
                   int64_t n_in, int64_t rows, const float* next_norm, const char* what) {
  const ModelConfig& c = m.config();
  const int64_t Hd = c.hidden_size;
  // The norm's next kernel is the next block's in-projection (or the LM
  // head): a GEMV that reads only weights before its wait.
  RSSM_FWD_CU(s.gemm->linear_residual_norm(y, ldy, rows, blk.out.w, Hd, n_in, blk.out.b, s.h, Hd, next_norm,
                                           c.norm_eps, c.norm_unit_offset, s.xn, Hd, s.d, Hd, /*release_early=*/true),
              what);
  return {};
}

}  // namespace replayssm::cuda
