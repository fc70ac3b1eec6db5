// Replay kernels (see replay.h, ReplayArgs in op_params.h).
//
// Both kernels run in three parts: (1) the new tokens' log entries and conv
// outputs, over a window rebuilt from the checkpoint and the log; (2) outputs,
// either by the sequential recurrence from the checkpoint (exact mode: the
// per-token arithmetic of ssm_step.h, so bit-identical to dense stepping) or
// by the dual form (fast mode: the checkpoint is read, never advanced);
// (3) state writes (flushes, snapshots) by the sequential recurrence. The
// dual form costs O(span) per token, so spans beyond kDualMaxSpan — long
// prefills — take the sequential path, which is exact anyway.
//
// A log entry holds the pre-conv row, not the post-conv x | B (Mamba2) or
// normalised k (GDN) the recurrence consumes: those are recomputed here,
// per channel the same sum as conv1d_silu over the same rows, so a logged
// token's inputs round exactly as when it was new. This trades a conv of
// K·(H·P+G·N) (or K·Hk·dk) multiply-adds per replayed token — about K/N of
// the state update — for an entry about half the size. The dual form
// reuses a span's recomputed rows (span ≤ kDualMaxSpan); the sequential
// pass recomputes one row at a time, so a long replay needs no span-sized
// buffer.
#include "ops/cpu/replay.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/cpu/activation.h"
#include "ops/cpu/gdn_scan.h"
#include "ops/cpu/ssm_step.h"

namespace replayssm::ops::cpu {

namespace {

constexpr int64_t kDualMaxSpan = 64;

// The pre-conv row of position r (r ≥ base_pos − (K−1)): from the new
// entries, the log, the checkpoint window, or zeros before position 0.
// `window` is the kernel's own copy of the checkpoint's window, taken
// before any write: a write may go into the checkpoint's own slot (a flush
// in place, ReplayStore's reuse), and a write at f < base_pos + K−1 would
// otherwise overwrite rows that later tokens' convs and later writes read.
struct RowSource {
  const ReplayArgs& a;
  int64_t K, C, E;
  const float* zeros;
  const float* window;  // (K-1, C) copy of a.ckpt_window; nullptr = zeros
  mutable std::vector<const float*> taps;  // conv's K rows, oldest first
  const float* row(int64_t r) const {
    if (r >= a.pos) return a.new_entries + (r - a.pos) * E;
    if (r >= a.base_pos) return a.log.entry(r);
    if (window == nullptr) return zeros;
    return window + (r - (a.base_pos - (K - 1))) * C;
  }
  // Any field of the entry of position s ≥ base_pos.
  const float* entry(int64_t s) const { return s >= a.pos ? a.new_entries + (s - a.pos) * E : a.log.entry(s); }
  // conv1d_silu's arithmetic for channels [c0, c1) of position t ≥ base_pos
  // (out[c − c0]); the pre-conv rows of new tokens must already be in place.
  void conv(const Conv1dParams& p, int64_t t, int64_t c0, int64_t c1, float* out) const {
    taps.resize(static_cast<size_t>(K));
    for (int64_t j = 0; j < K; ++j) taps[j] = row(t - (K - 1) + j);
    for (int64_t c = c0; c < c1; ++c) {
      float acc = p.bias != nullptr ? p.bias[c] : 0.0f;
      for (int64_t j = 0; j < K; ++j) acc += p.weight[c * K + j] * taps[j][c];
      out[c - c0] = silu(acc);
    }
  }
  void write_window(int64_t f, float* dst) const {
    for (int64_t r = 0; r < K - 1; ++r) std::memcpy(dst + r * C, row(f - (K - 1) + r), sizeof(float) * C);
  }
};

// Copies the checkpoint's window into dst ((K-1)·C floats of scratch) and
// returns what RowSource reads it from: dst, or nullptr (zeros).
const float* copy_window(const ReplayArgs& a, int64_t K, int64_t C, float* dst) {
  if (a.ckpt_window == nullptr) return nullptr;
  std::memcpy(dst, a.ckpt_window, sizeof(float) * (K - 1) * C);
  return dst;
}

void init_state(const ReplayArgs& a, int64_t size, std::vector<float>* S) {
  S->assign(static_cast<size_t>(size), 0.0f);
  if (a.ckpt_state != nullptr) std::memcpy(S->data(), a.ckpt_state, sizeof(float) * size);
}

// Performs the writes due at position f (state after f tokens).
void flush_writes(const ReplayArgs& a, const RowSource& src, int64_t f, const std::vector<float>& S,
                  int* wi) {
  while (*wi < a.n_writes && a.write_pos[*wi] == f) {
    std::memcpy(a.write_state[*wi], S.data(), sizeof(float) * S.size());
    src.write_window(f, a.write_window[*wi]);
    ++*wi;
  }
}

}  // namespace

void mamba2_replay(const Conv1dParams& conv, const Mamba2Params& p, const ReplayArgs& a,
                   const float* xbc, int64_t ldxbc, const float* dt_raw, int64_t lddt, float* y,
                   int64_t ldy, std::vector<float>* scratch) {
  const int64_t H = p.n_heads, P = p.head_dim, N = p.state_size, G = p.n_groups, C = conv.channels;
  const int64_t K = conv.width, HP = H * P, GN = G * N, hpg = H / G;
  const int64_t E = mamba2_entry_floats(p, C), o_dt = C, o_B = HP, o_C = HP + GN;
  const int64_t end = a.pos + a.n, span = end - a.base_pos;
  const bool sequential_outputs = a.exact || span > kDualMaxSpan;
  // scratch: zeros (C) | checkpoint window ((K-1)·C) | post-conv rows
  // x | B | C (C), one per position of the span for the dual form, one at
  // a time for the sequential pass.
  const int64_t n_post = sequential_outputs ? 1 : span;
  scratch->assign(static_cast<size_t>(K * C + n_post * C), 0.0f);
  const float* zeros = scratch->data();
  float* post = scratch->data() + K * C;
  RowSource src{a, K, C, E, zeros, copy_window(a, K, C, scratch->data() + C), {}};

  // (1) New entries: the pre-conv row and dt (every row first: a new
  // token's conv reads the rows of the new tokens before it).
  for (int64_t j = 0; j < a.n; ++j) {
    float* e = a.new_entries + j * E;
    std::memcpy(e, xbc + j * ldxbc, sizeof(float) * C);
    for (int64_t h = 0; h < H; ++h) {
      const float dt = softplus(dt_raw[j * lddt + h] + p.dt_bias[h]);
      e[o_dt + h] = std::min(std::max(dt, p.dt_min), p.dt_max);
    }
  }
  // The post-conv row of position s into out: x | B for a logged token,
  // x | B | C for a new one (its output reads C_t).
  auto conv_row = [&](int64_t s, float* out) { src.conv(conv, s, 0, s >= a.pos ? C : HP + GN, out); };

  // (2b) Dual-form outputs: y_t = e^{L_t}·S_c·C_t + Σ_s e^{L_t−L_s}·dt_s·(B_s·C_t)·x_s + D·x_t.
  if (!sequential_outputs) {
    for (int64_t s = a.base_pos; s < end; ++s) conv_row(s, post + (s - a.base_pos) * C);
    auto post_of = [&](int64_t s) { return post + (s - a.base_pos) * C; };
    std::vector<float> L(static_cast<size_t>(span * H)), dots(static_cast<size_t>(span));
    for (int64_t h = 0; h < H; ++h) {
      const float A = -std::exp(p.A_log[h]);
      float acc = 0.0f;
      for (int64_t s = a.base_pos; s < end; ++s) {
        acc += src.entry(s)[o_dt + h] * A;
        L[(s - a.base_pos) * H + h] = acc;
      }
    }
    for (int64_t j = 0; j < a.n; ++j) {
      const int64_t t = a.pos + j, tt = t - a.base_pos;
      const float* xt = post_of(t);
      for (int64_t g = 0; g < G; ++g) {
        const float* Ct = post_of(t) + o_C + g * N;
        for (int64_t s = a.base_pos; s <= t; ++s) {
          const float* Bs = post_of(s) + o_B + g * N;
          float d = 0.0f;
          for (int64_t n = 0; n < N; ++n) d += Bs[n] * Ct[n];
          dots[s - a.base_pos] = d;
        }
        for (int64_t h = g * hpg; h < (g + 1) * hpg; ++h) {
          float* yt = y + j * ldy + h * P;
          const float Lt = L[tt * H + h];
          if (a.ckpt_state != nullptr) {
            const float decay = std::exp(Lt);
            const float* S = a.ckpt_state + h * P * N;
            for (int64_t i = 0; i < P; ++i) {
              float acc = 0.0f;
              for (int64_t n = 0; n < N; ++n) acc += S[i * N + n] * Ct[n];
              yt[i] = decay * acc;
            }
          } else {
            std::fill(yt, yt + P, 0.0f);
          }
          for (int64_t s = a.base_pos; s <= t; ++s) {
            const int64_t ss = s - a.base_pos;
            const float w = std::exp(Lt - L[ss * H + h]) * src.entry(s)[o_dt + h] * dots[ss];
            const float* xs = post_of(s) + h * P;
            for (int64_t i = 0; i < P; ++i) yt[i] += w * xs[i];
          }
          for (int64_t i = 0; i < P; ++i) yt[i] += p.D[h] * xt[h * P + i];
        }
      }
    }
  }

  // (2a)+(3) Sequential pass: outputs when exact, and every state write.
  const int64_t last = sequential_outputs ? end : (a.n_writes ? a.write_pos[a.n_writes - 1] : a.base_pos);
  if (!sequential_outputs && a.n_writes == 0) return;
  std::vector<float> S;
  init_state(a, H * P * N, &S);
  int wi = 0;
  for (int64_t s = a.base_pos; s < last; ++s) {
    flush_writes(a, src, s, S, &wi);
    const float* e = src.entry(s);
    const float* xb = post;  // x | B (| C) of position s
    if (sequential_outputs) conv_row(s, post);
    else xb = post + (s - a.base_pos) * C;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / hpg;
      const float A = -std::exp(p.A_log[h]);
      const float dt = e[o_dt + h];
      const float dA = std::exp(dt * A);
      float* Sh = S.data() + h * P * N;
      mamba2_update_head(Sh, P, N, dA, dt, xb + o_B + g * N, xb + h * P);
      if (sequential_outputs && s >= a.pos)
        mamba2_output_head(Sh, P, N, xb + o_C + g * N, p.D[h], xb + h * P, y + (s - a.pos) * ldy + h * P);
    }
  }
  flush_writes(a, src, last, S, &wi);
}

void gdn_replay(const Conv1dParams& conv, const GdnParams& p, const ReplayArgs& a, const float* qkv,
                int64_t ldqkv, const float* a_in, int64_t lda, const float* b_in, int64_t ldb,
                float* o, int64_t ldo, std::vector<float>* scratch) {
  const int64_t Hk = p.n_k_heads, Hv = p.n_v_heads, dk = p.k_dim, dv = p.v_dim, C = conv.channels;
  const int64_t K = conv.width, rep = Hv / Hk, Kd = Hk * dk;
  const int64_t E = gdn_entry_floats(p, C), o_u = C, o_g = C + Hv * dv;
  const int64_t end = a.pos + a.n, span = end - a.base_pos, logged = a.pos - a.base_pos;
  const bool sequential = a.exact || span > kDualMaxSpan;
  // scratch: zeros (C) | checkpoint window ((K-1)·C) | normalised k (Kd)
  // of logged tokens: all of them for the dual form, one at a time for the
  // sequential pass.
  const int64_t n_keys = sequential ? 1 : logged;
  scratch->assign(static_cast<size_t>(K * C + n_keys * Kd), 0.0f);
  float* keys = scratch->data() + K * C;
  RowSource src{a, K, C, E, scratch->data(), copy_window(a, K, C, scratch->data() + C), {}};

  // Per new token: post-conv q | k | v, then q, k normalised, g, β (every
  // pre-conv row first: a new token's conv reads the new rows before it).
  std::vector<float> post(static_cast<size_t>(a.n * C)), beta(static_cast<size_t>(a.n * Hv));
  for (int64_t j = 0; j < a.n; ++j) std::memcpy(a.new_entries + j * E, qkv + j * ldqkv, sizeof(float) * C);
  for (int64_t j = 0; j < a.n; ++j) {
    float* pj = post.data() + j * C;
    src.conv(conv, a.pos + j, 0, C, pj);
    gdn_prepare(p, pj, pj + Kd, C, a_in + j * lda, lda, b_in + j * ldb, ldb, 1, a.new_entries + j * E + o_g,
                beta.data() + j * Hv);
  }
  auto q_of = [&](int64_t j, int64_t h) { return post.data() + j * C + (h / rep) * dk; };
  auto v_of = [&](int64_t j, int64_t h) { return post.data() + j * C + 2 * Kd + h * dv; };
  // The normalised k of a logged token, as gdn_prepare made it when it was new.
  auto recompute_k = [&](int64_t s, float* out) {
    src.conv(conv, s, Kd, 2 * Kd, out);
    gdn_normalize_k(p, out);
  };

  if (!sequential) {
    for (int64_t s = a.base_pos; s < a.pos; ++s) recompute_k(s, keys + (s - a.base_pos) * Kd);
    auto k_of = [&](int64_t s) {
      return s >= a.pos ? post.data() + (s - a.pos) * C + Kd : keys + (s - a.base_pos) * Kd;
    };
    // Dual form per value head h, token t, with G_s = Σ_{r=base..s} g_r:
    //   mem = e^{G_t}·S_cᵀk_t + Σ_{s<t} e^{G_t−G_s}(k_s·k_t)·u_s ;  u_t = β(v_t − mem)
    //   o_t = e^{G_t}·S_cᵀq_t + Σ_{s≤t} e^{G_t−G_s}(k_s·q_t)·u_s
    std::vector<float> Gc(static_cast<size_t>(span * Hv)), acc(static_cast<size_t>(dv));
    for (int64_t h = 0; h < Hv; ++h) {
      float c = 0.0f;
      for (int64_t s = a.base_pos; s < a.pos; ++s) {
        c += src.entry(s)[o_g + h];
        Gc[(s - a.base_pos) * Hv + h] = c;
      }
    }
    auto read = [&](const float* x, float Gt, int64_t h, int64_t upto, float* out) {
      // out = e^{Gt}·S_cᵀx + Σ_{s<upto} e^{Gt−G_s}(k_s·x)·u_s
      if (a.ckpt_state != nullptr) {
        const float* S = a.ckpt_state + h * dk * dv;
        const float d = std::exp(Gt);
        for (int64_t j = 0; j < dv; ++j) {
          float m = 0.0f;
          for (int64_t i = 0; i < dk; ++i) m += S[i * dv + j] * x[i];
          out[j] = d * m;
        }
      } else {
        std::fill(out, out + dv, 0.0f);
      }
      for (int64_t s = a.base_pos; s < upto; ++s) {
        const float* ks = k_of(s) + (h / rep) * dk;
        float kx = 0.0f;
        for (int64_t i = 0; i < dk; ++i) kx += ks[i] * x[i];
        const float w = std::exp(Gt - Gc[(s - a.base_pos) * Hv + h]) * kx;
        const float* us = src.entry(s) + o_u + h * dv;
        for (int64_t j = 0; j < dv; ++j) out[j] += w * us[j];
      }
    };
    for (int64_t j = 0; j < a.n; ++j) {
      const int64_t t = a.pos + j, tt = t - a.base_pos;
      float* e = a.new_entries + j * E;
      for (int64_t h = 0; h < Hv; ++h) {
        Gc[tt * Hv + h] = (tt > 0 ? Gc[(tt - 1) * Hv + h] : 0.0f) + e[o_g + h];
        const float Gt = Gc[tt * Hv + h];
        read(k_of(t) + (h / rep) * dk, Gt, h, t, acc.data());
        const float* v = v_of(j, h);
        float* u = e + o_u + h * dv;
        for (int64_t c = 0; c < dv; ++c) u[c] = (v[c] - acc[c]) * beta[j * Hv + h];
        read(q_of(j, h), Gt, h, t + 1, o + j * ldo + h * dv);
      }
    }
    if (a.n_writes == 0) return;
  }

  const int64_t last = sequential ? end : a.write_pos[a.n_writes - 1];
  std::vector<float> S;
  init_state(a, Hv * dk * dv, &S);
  int wi = 0;
  for (int64_t s = a.base_pos; s < last; ++s) {
    flush_writes(a, src, s, S, &wi);
    const bool fresh = sequential && s >= a.pos;  // a new token whose u is still to compute
    const int64_t j = s - a.pos;
    float* e = const_cast<float*>(src.entry(s));  // only new entries are written
    const float* k = keys;  // normalised k of position s
    if (s >= a.pos) k = post.data() + j * C + Kd;
    else if (sequential) recompute_k(s, keys);
    else k = keys + (s - a.base_pos) * Kd;
    for (int64_t h = 0; h < Hv; ++h) {
      float* Sh = S.data() + h * dk * dv;
      const float* kh = k + (h / rep) * dk;
      float* u = e + o_u + h * dv;
      gdn_decay_head(Sh, dk, dv, std::exp(e[o_g + h]));
      if (fresh) gdn_correct_head(Sh, dk, dv, kh, v_of(j, h), beta[j * Hv + h], u);
      gdn_rank1_head(Sh, dk, dv, kh, u);
      if (fresh) gdn_output_head(Sh, dk, dv, q_of(j, h), o + j * ldo + h * dv);
    }
  }
  flush_writes(a, src, last, S, &wi);
}

}  // namespace replayssm::ops::cpu
