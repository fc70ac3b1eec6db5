// Model::forward — the fp32 CPU reference forward pass.
//
// Activations are (rows, width) matrices over every token of the step, so
// each projection is one GEMM for the whole batch; only history-dependent
// work goes through the StateCache, slice by slice.
#include <algorithm>
#include <cmath>
#include <vector>

#include "model/program.h"
#include "ops/cpu/activation.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/moe.h"
#include "ops/cpu/norm.h"
#include "ops/cpu/rope.h"
#include "replayssm/model.h"

namespace replayssm {

namespace {

using ops::cpu::matmul;

void linear(const Linear& l, const float* x, int64_t ldx, int64_t rows, float* y, int64_t ldy) {
  matmul(x, ldx, rows, l.n_in, l.w, l.n_out, l.b, y, ldy);
}

// Scratch buffers reused across the blocks of one step.
struct Scratch {
  std::vector<float> a, b, c, d, e;
  static float* sized(std::vector<float>& v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
    return v.data();
  }
};

void run_mamba2(const ModelConfig& cfg, const Block& blk, std::span<const SeqSlice> step,
                StateCache& cache, const float* xn, int64_t rows, float* out, Scratch& s) {
  const Mamba2Config& m = cfg.mamba;
  const int64_t d_in = m.n_heads * m.head_dim, C = m.conv_channels();
  const int64_t width = blk.mamba.in_proj.n_out;  // z | xBC | dt
  float* proj = Scratch::sized(s.a, rows * width);
  linear(blk.mamba.in_proj, xn, cfg.hidden_size, rows, proj, width);
  float* y = Scratch::sized(s.b, rows * d_in);
  ops::Conv1dParams conv{C, m.conv_width, blk.mamba.conv_w, blk.mamba.conv_b};
  ops::Mamba2Params p{m.n_heads, m.head_dim, m.state_size, m.n_groups, blk.mamba.A_log,
                      blk.mamba.D,  blk.mamba.dt_bias, m.dt_min, m.dt_max};
  cache.mamba2(blk.cache_layer, conv, p, step, proj + d_in, width, proj + d_in + C, width, y, d_in);
  ops::cpu::rmsnorm_gated_group(y, d_in, proj, width, rows, d_in, d_in / m.n_groups,
                                blk.mamba.norm_w, cfg.norm_eps, y, d_in);
  linear(blk.mamba.out_proj, y, d_in, rows, out, cfg.hidden_size);
}

void run_gdn(const ModelConfig& cfg, const Block& blk, std::span<const SeqSlice> step,
             StateCache& cache, const float* xn, int64_t rows, float* out, Scratch& s) {
  const GdnConfig& g = cfg.gdn;
  const int64_t C = g.conv_channels(), Hv = g.n_v_heads, d_v = Hv * g.v_dim;
  const int64_t H = cfg.hidden_size;
  float* qkv = Scratch::sized(s.a, rows * C);
  float* z = Scratch::sized(s.b, rows * d_v);
  float* ab = Scratch::sized(s.c, rows * 2 * Hv);  // a | b per row
  float* o = Scratch::sized(s.d, rows * d_v);
  linear(blk.gdn.in_qkv, xn, H, rows, qkv, C);
  linear(blk.gdn.in_z, xn, H, rows, z, d_v);
  linear(blk.gdn.in_a, xn, H, rows, ab, 2 * Hv);
  linear(blk.gdn.in_b, xn, H, rows, ab + Hv, 2 * Hv);
  ops::Conv1dParams conv{C, g.conv_width, blk.gdn.conv_w, nullptr};
  ops::GdnParams p{g.n_k_heads, g.n_v_heads, g.k_dim, g.v_dim, blk.gdn.A_log, blk.gdn.dt_bias};
  cache.gated_deltanet(blk.cache_layer, conv, p, step, qkv, C, ab, 2 * Hv, ab + Hv, 2 * Hv, o, d_v);
  ops::cpu::rmsnorm_then_gate(o, d_v, z, d_v, rows, Hv, g.v_dim, blk.gdn.norm_w, cfg.norm_eps, o,
                              d_v);
  linear(blk.gdn.out_proj, o, d_v, rows, out, H);
}

void run_attention(const ModelConfig& cfg, const Block& blk, std::span<const SeqSlice> step,
                   StateCache& cache, const float* xn, int64_t rows, float* out, Scratch& s) {
  const AttentionConfig& a = cfg.attn;
  const int64_t D = a.head_dim, Hq = a.n_heads, Hkv = a.n_kv_heads, H = cfg.hidden_size;
  const int64_t d_q = Hq * D, d_kv = Hkv * D;
  const int64_t q_width = blk.attn.q.n_out;  // d_q, or 2·d_q with the output gate
  float* qg = Scratch::sized(s.a, rows * q_width);
  float* q = Scratch::sized(s.b, rows * d_q);
  float* kv = Scratch::sized(s.c, rows * 2 * d_kv);  // k | v per row
  float* o = Scratch::sized(s.d, rows * d_q);
  linear(blk.attn.q, xn, H, rows, qg, q_width);
  linear(blk.attn.k, xn, H, rows, kv, 2 * d_kv);
  linear(blk.attn.v, xn, H, rows, kv + d_kv, 2 * d_kv);
  // With the gate, each head's q_proj row block is [query (D) | gate (D)].
  const int64_t head_stride = a.output_gate ? 2 * D : D;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < Hq; ++h)
      std::copy_n(qg + r * q_width + h * head_stride, D, q + r * d_q + h * D);
  if (a.qk_norm) {
    ops::cpu::rmsnorm(q, D, rows * Hq, D, blk.attn.q_norm, cfg.norm_eps, cfg.norm_unit_offset, q, D);
    for (int64_t r = 0; r < rows; ++r)
      ops::cpu::rmsnorm(kv + r * 2 * d_kv, D, Hkv, D, blk.attn.k_norm, cfg.norm_eps,
                        cfg.norm_unit_offset, kv + r * 2 * d_kv, D);
  }
  if (a.rotary_dim > 0)
    for (const SeqSlice& sl : step) {
      ops::cpu::rope(q + sl.row * d_q, d_q, sl.n, sl.pos, Hq, D, a.rotary_dim, a.rope_theta);
      ops::cpu::rope(kv + sl.row * 2 * d_kv, 2 * d_kv, sl.n, sl.pos, Hkv, D, a.rotary_dim,
                     a.rope_theta);
    }
  ops::AttentionParams p{Hq, Hkv, D, 1.0f / std::sqrt(static_cast<float>(D))};
  cache.attention(blk.cache_layer, p, step, q, d_q, kv, kv + d_kv, 2 * d_kv, o, d_q);
  if (a.output_gate)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < Hq; ++h) {
        const float* gate = qg + r * q_width + h * head_stride + D;
        float* oh = o + r * d_q + h * D;
        for (int64_t i = 0; i < D; ++i) oh[i] *= ops::sigmoid(gate[i]);
      }
  linear(blk.attn.o, o, d_q, rows, out, H);
}

void run_mlp(const ModelConfig& cfg, const Block& blk, const float* xn, int64_t rows, float* out,
             Scratch& s) {
  const int64_t I = cfg.mlp.intermediate, H = cfg.hidden_size;
  float* up = Scratch::sized(s.a, rows * I);
  linear(blk.mlp.up, xn, H, rows, up, I);
  if (cfg.mlp.gated) {
    float* gate = Scratch::sized(s.b, rows * I);
    linear(blk.mlp.gate, xn, H, rows, gate, I);
    for (int64_t i = 0; i < rows * I; ++i) up[i] *= ops::activate(cfg.mlp.act, gate[i]);
  } else {
    for (int64_t i = 0; i < rows * I; ++i) up[i] = ops::activate(cfg.mlp.act, up[i]);
  }
  linear(blk.mlp.down, up, I, rows, out, H);
}

void run_moe(const ModelConfig& cfg, const Block& blk, const float* xn, int64_t rows, float* out) {
  const MoeConfig& e = cfg.moe;
  const MoeWeights& w = blk.moe;
  ops::MoeParams p;
  p.routing = ops::moe_routing_params(e, w.correction_bias);
  p.hidden = cfg.hidden_size;
  p.inter = e.intermediate;
  p.gated = e.gated;
  p.act = e.act;
  p.router = w.router.w;
  p.up = w.up;
  p.down = w.down;
  p.shared_inter = e.shared_intermediate;
  p.shared_gate_proj = w.shared.gate.w;
  p.shared_up = w.shared.up.w;
  p.shared_down = w.shared.down.w;
  p.shared_gate_proj_b = w.shared.gate.b;
  p.shared_up_b = w.shared.up.b;
  p.shared_down_b = w.shared.down.b;
  p.shared_gate = e.shared_gate && e.shared_intermediate > 0 ? w.shared_gate.w : nullptr;
  ops::cpu::moe(p, xn, cfg.hidden_size, rows, out, cfg.hidden_size);
}

}  // namespace

Status Model::forward(std::span<const SeqSlice> step, std::span<const int32_t> tokens,
                      StateCache& cache, std::span<const int64_t> logit_rows, float* logits) const {
  const ModelConfig& cfg = config_;
  if (!has_matrices_)
    return unsupported("forward: this model's matrices live on a device (random_without_matrices), not on the CPU");
  const int64_t rows = static_cast<int64_t>(tokens.size()), H = cfg.hidden_size;
  int64_t covered = 0;
  for (const SeqSlice& sl : step) {
    if (sl.row != covered || sl.n <= 0)
      return invalid_argument("forward: slices must cover the token rows in order without gaps");
    covered += sl.n;
  }
  if (covered != rows)
    return invalid_argument("forward: slices cover " + std::to_string(covered) + " rows but " +
                            std::to_string(rows) + " tokens were given");
  for (int32_t t : tokens)
    if (t < 0 || t >= cfg.vocab_size)
      return invalid_argument("token id " + std::to_string(t) + " is out of range [0, " +
                              std::to_string(cfg.vocab_size) + ")");
  for (int64_t r : logit_rows)
    if (r < 0 || r >= rows) return invalid_argument("forward: logit row " + std::to_string(r) + " out of range");
  RSSM_RETURN_IF_ERROR(cache.begin_step(step, tokens));

  const Program& prog = *program_;
  std::vector<float> h(static_cast<size_t>(rows * H)), xn(h.size()), out(h.size());
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(prog.embed + static_cast<int64_t>(tokens[r]) * H, H, h.data() + r * H);
  Scratch s;
  for (const Block& blk : prog.blocks) {
    ops::cpu::rmsnorm(h.data(), H, rows, H, blk.norm, cfg.norm_eps, cfg.norm_unit_offset,
                      xn.data(), H);
    switch (blk.kind) {
      case BlockKind::kMamba2: run_mamba2(cfg, blk, step, cache, xn.data(), rows, out.data(), s); break;
      case BlockKind::kGatedDeltaNet: run_gdn(cfg, blk, step, cache, xn.data(), rows, out.data(), s); break;
      case BlockKind::kAttention: run_attention(cfg, blk, step, cache, xn.data(), rows, out.data(), s); break;
      case BlockKind::kMlp: run_mlp(cfg, blk, xn.data(), rows, out.data(), s); break;
      case BlockKind::kMoe: run_moe(cfg, blk, xn.data(), rows, out.data()); break;
    }
    for (int64_t i = 0; i < rows * H; ++i) h[i] += out[i];
  }
  cache.end_step(step);

  // Final norm and LM head only for the rows whose logits are wanted.
  const int64_t n_out = static_cast<int64_t>(logit_rows.size());
  std::vector<float> fin(static_cast<size_t>(n_out * H));
  for (int64_t i = 0; i < n_out; ++i)
    ops::cpu::rmsnorm(h.data() + logit_rows[i] * H, H, 1, H, prog.final_norm, cfg.norm_eps,
                      cfg.norm_unit_offset, fin.data() + i * H, H);
  linear(prog.lm_head, fin.data(), H, n_out, logits, cfg.vocab_size);
  return {};
}

}  // namespace replayssm
