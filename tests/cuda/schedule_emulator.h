// A host emulation of the CUDA backend's step: the StepSchedule that
// build_schedule makes for a plan (src/backend/cuda/step_schedule.h),
// interpreted launch by launch with the CPU reference's arithmetic
// (ops/cpu: the conv of replay.cpp's RowSource, ssm_step.h's recurrences,
// gdn_prepare) over storage laid out as the CUDA backend lays it out
// (slot_storage.h: log rows slot·B + p % B of x | B | dt or k | u | g and
// the pre-conv rows, checkpoint states and windows, K/V pages; fp32 here).
//
// So the schedule — every block table, first offset, entry row, scratch
// slot, fold, write chain, window gather and the order of the launches —
// is tested on any machine, against the CPU backend on the same plans: in
// exact plans bit for bit (the same arithmetic in the same order), in fast
// ones within the dual form's rounding. What it cannot test is the kernels
// themselves (their parity tests do) and the device pointers the backend
// builds from the same arrays (the GPU tests do).
//
// It also checks what the device would not report: every log row, state
// and window a launch reads was written (this step or a live earlier one;
// scratch slots live one step, freed slots none), no launch writes a state
// another of its sequences reads, and the zero slot is never written.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/slot_storage.h"
#include "backend/cuda/step_schedule.h"
#include "model/program.h"
#include "ops/cpu/activation.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/gdn_scan.h"
#include "ops/cpu/sampling.h"
#include "ops/cpu/ssm_step.h"
#include "replayssm/backend.h"
#include "replayssm/model.h"
#include "replayssm/state_cache.h"

namespace replayssm::test {

// Slot-addressed fp32 rows with a record of which were written.
struct EmuRows {
  int64_t width = 0, per_slot = 1;  // floats a row, rows a slot
  std::unordered_map<int32_t, std::vector<float>> slots;
  std::set<int64_t> valid;          // rows written
  float* row(int64_t r) {
    std::vector<float>& v = slots[int32_t(r / per_slot)];
    if (v.empty()) v.assign(size_t(per_slot * width), 0.0f);
    return v.data() + (r % per_slot) * width;
  }
  void write(int64_t r, const float* src) {
    std::copy(src, src + width, row(r));
    valid.insert(r);
  }
  void drop(int32_t slot) {
    slots.erase(slot);
    for (int64_t i = 0; i < per_slot; ++i) valid.erase(int64_t(slot) * per_slot + i);
  }
  void copy_slot(int32_t src, int32_t dst) {
    drop(dst);
    for (int64_t i = 0; i < per_slot; ++i) {
      const int64_t s = int64_t(src) * per_slot + i, d = int64_t(dst) * per_slot + i;
      if (valid.count(s)) write(d, row(s));
    }
  }
};

class EmuCache final : public StateCache {
 public:
  EmuCache(const CacheSpec& spec, int64_t B, cuda::ScheduleLimits lim) : spec_(spec), B_(B), lim_(lim) {
    for (const CacheLayerSpec& l : spec.layers) {
      Layer L;
      L.spec = l;
      if (l.kind == CacheLayerSpec::kAttention) {
        L.kv.width = 2 * l.n_kv_heads * l.head_dim, L.kv.per_slot = B;
      } else {
        L.sh = cuda::ssm_shape(l);
        L.a.width = L.sh.a_width, L.b.width = L.sh.b_width, L.c.width = L.sh.c_width, L.pre.width = L.sh.C;
        for (EmuRows* r : {&L.a, &L.b, &L.c, &L.pre}) r->per_slot = B;
        L.state.width = L.sh.state_floats(), L.window.width = L.sh.window_elems();
        has_mamba_ |= L.sh.mamba, has_gdn_ |= !L.sh.mamba;
      }
      layers_.push_back(L);
    }
  }

  void set_plan(const StepPlan* plan, std::span<const int64_t> logit_rows) {
    plan_ = plan;
    kept_.assign(logit_rows.begin(), logit_rows.end());
  }
  const cuda::StepSchedule& schedule() const { return s_; }
  int failures() const { return failures_; }

  void apply(std::span<const StorageOp> ops) {
    for (const StorageOp& op : ops)
      for (Layer& L : layers_) {
        switch (op.kind) {
          case StorageOp::kCopyPage:
            if (L.spec.kind == CacheLayerSpec::kAttention) L.kv.copy_slot(op.src, op.dst);
            break;
          case StorageOp::kCopyLog:
            for (EmuRows* r : L.logs()) r->copy_slot(op.src, op.dst);
            break;
          case StorageOp::kCopyCheckpoint:
            if (L.spec.kind != CacheLayerSpec::kAttention)
              L.state.copy_slot(op.src, op.dst), L.window.copy_slot(op.src, op.dst);
            break;
          case StorageOp::kFreePage:
            if (L.spec.kind == CacheLayerSpec::kAttention) L.kv.drop(op.src);
            break;
          case StorageOp::kFreeLog:
            for (EmuRows* r : L.logs()) r->drop(op.src);
            break;
          case StorageOp::kFreeCheckpoint:
            if (L.spec.kind != CacheLayerSpec::kAttention) L.state.drop(op.src), L.window.drop(op.src);
            break;
        }
      }
  }

  Status begin_step(std::span<const SeqSlice>, std::span<const int32_t>) override {
    const cuda::SlotsNamed n = cuda::slots_named(*plan_);
    log_cap_ = std::max(log_cap_, n.logs), ckpt_cap_ = std::max(ckpt_cap_, n.ckpts);
    slots_ = {log_cap_, ckpt_cap_, ckpt_cap_ + 1};
    RSSM_ASSIGN_OR_RETURN(s_, cuda::build_schedule(*plan_, kept_, has_mamba_, has_gdn_, lim_, slots_));
    if (on_schedule) on_schedule(s_);
    apply(plan_->ops);
    return {};
  }

  void attention(int layer, const ops::AttentionParams& p, std::span<const SeqSlice>, const float* q, int64_t ldq,
                 const float* k, const float* v, int64_t ldkv, float* out, int64_t ldo) override {
    Layer& L = layers_[size_t(layer)];
    const int64_t w = L.kv.width / 2;
    std::vector<float> row(static_cast<size_t>(2 * w));
    for (int64_t r = 0; r < s_.rows; ++r) {
      const int32_t pos = at(s_.kv_pos)[r];
      if (pos < 0) continue;  // a rebuild's row: read, never written
      std::copy(k + r * ldkv, k + r * ldkv + w, row.begin());
      std::copy(v + r * ldkv, v + r * ldkv + w, row.begin() + w);
      L.kv.write(page_row(at(s_.kv_table) + int64_t(at(s_.kv_seq)[r]) * s_.kv_max_pages, pos), row.data());
    }
    for (int j = 0; j < s_.n_seqs; ++j) {
      const int32_t* table = at(s_.kv_table) + int64_t(j) * s_.kv_max_pages;
      const int64_t pos = at(s_.seq_pos)[j], len = at(s_.seq_len)[j], r0 = at(s_.cu_rows)[j];
      std::vector<const float*> kp, vp;
      for (int64_t i = 0; i * B_ < len; ++i) {
        kp.push_back(L.kv.row(int64_t(table[i]) * B_));
        vp.push_back(kp.back() + w);
      }
      for (int64_t t = 0; t < len; ++t) check(L.kv.valid.count(page_row(table, t)) > 0, "K/V row", t);
      const ops::KvView view{kp.data(), vp.data(), B_, 2 * w};
      ops::cpu::attention(p, q + r0 * ldq, ldq, pos, len - pos, view, out + r0 * ldo, ldo);
    }
  }

  void mamba2(int layer, const ops::Conv1dParams& conv, const ops::Mamba2Params& p, std::span<const SeqSlice>,
              const float* xbc, int64_t ldxbc, const float* dt, int64_t lddt, float* y, int64_t ldy) override {
    Layer& L = layers_[size_t(layer)];
    const int64_t R = s_.rows, C = L.sh.C, H = p.n_heads, P = p.head_dim, N = p.state_size, G = p.n_groups;
    const int64_t HP = H * P, GN = G * N, hpg = H / G;
    std::vector<float> post = conv_rows(L, conv, xbc, ldxbc);
    std::vector<float> dtv(static_cast<size_t>(R * H)), cC(size_t(R * GN));
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t h = 0; h < H; ++h)
        dtv[size_t(r * H + h)] =
            std::min(std::max(ops::softplus(dt[r * lddt + h] + p.dt_bias[h]), p.dt_min), p.dt_max);
      const int64_t e = at(s_.entry)[r];
      L.a.write(e, &post[size_t(r * C)]);
      L.b.write(e, &post[size_t(r * C + HP)]);
      L.c.write(e, &dtv[size_t(r * H)]);
      std::copy(&post[size_t(r * C + HP + GN)], &post[size_t(r * C + HP + GN)] + GN, &cC[size_t(r * GN)]);
    }
    // One token into S: the entry's (or row's) x, B, dt; y where asked.
    auto token = [&](std::vector<float>& S, const float* x, const float* Bv, const float* dts, const float* Cv,
                     float* yr) {
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / hpg;
        const float A = -std::exp(p.A_log[h]), dA = std::exp(dts[h] * A);
        float* Sh = S.data() + h * P * N;
        ops::cpu::mamba2_update_head(Sh, P, N, dA, dts[h], Bv + g * N, x + h * P);
        if (yr != nullptr) ops::cpu::mamba2_output_head(Sh, P, N, Cv + g * N, p.D[h], x + h * P, yr + h * P);
      }
    };
    for (const cuda::SsmLaunch& Ln : kind_launches(true)) {
      Race race(this);
      if (Ln.kind == cuda::SsmLaunch::kCopy) {
        copy_state(L, Ln.copy_src, Ln.copy_dst);
        continue;
      }
      check(Ln.kind != cuda::SsmLaunch::kStep, "Mamba2 has no standard-step launch", 0);
      for (int b = 0; b < Ln.batch; ++b) {
        std::vector<float> S = read_state(L, at(Ln.slot)[b], race, b);
        const int n_log = at(Ln.n_log)[b];
        const int T = Ln.kind == cuda::SsmLaunch::kDecode ? Ln.T : 0;
        const int f = Ln.fold.present() ? at(Ln.fold)[b] : 0;
        for (int s = 0; s < n_log; ++s) {
          const int64_t e = log_row(Ln, b, s);
          for (EmuRows* a : {&L.a, &L.b, &L.c}) check(a->valid.count(e) > 0, "Mamba2 log row", e);
          const bool fresh = s >= n_log - T;
          const int64_t r = fresh ? at(Ln.row)[b] + (s - (n_log - T)) : -1;
          token(S, L.a.row(e), L.b.row(e), L.c.row(e), fresh ? &cC[size_t(r * GN)] : nullptr,
                fresh ? y + r * ldy : nullptr);
          if (s + 1 == f) write_state(L, at(Ln.fold_slot)[b], S, race, b);
        }
        if (Ln.kind == cuda::SsmLaunch::kScan) {
          const int64_t r0 = at(Ln.cu_rows)[b];
          for (int64_t r = r0; r < r0 + at(Ln.n_rows)[b]; ++r) {
            const float* pr = &post[size_t(r * C)];
            token(S, pr, pr + HP, &dtv[size_t(r * H)], pr + HP + GN, y + r * ldy);
          }
          write_state(L, at(Ln.out_slot)[b], S, race, b);
        }
      }
    }
    gather_windows(L, kind_windows(true));
  }

  void gated_deltanet(int layer, const ops::Conv1dParams& conv, const ops::GdnParams& p, std::span<const SeqSlice>,
                      const float* qkv, int64_t ldqkv, const float* a, int64_t lda, const float* bb, int64_t ldb,
                      float* o, int64_t ldo) override {
    Layer& L = layers_[size_t(layer)];
    const int64_t R = s_.rows, C = L.sh.C, Hk = p.n_k_heads, Hv = p.n_v_heads, dk = p.k_dim, dv = p.v_dim;
    const int64_t Kd = Hk * dk, V = Hv * dv, rep = Hv / Hk;
    std::vector<float> post = conv_rows(L, conv, qkv, ldqkv);
    std::vector<float> g(static_cast<size_t>(R * Hv)), beta(static_cast<size_t>(R * Hv)), u(static_cast<size_t>(R * V));
    for (int64_t r = 0; r < R; ++r) {  // q, k normalised in place in the post-conv row
      float* pr = &post[size_t(r * C)];
      ops::cpu::gdn_prepare(p, pr, pr + Kd, C, a + r * lda, lda, bb + r * ldb, ldb, 1, &g[size_t(r * Hv)],
                            &beta[size_t(r * Hv)]);
      const int64_t e = at(s_.entry)[r];
      L.a.write(e, pr + Kd);
      L.c.write(e, &g[size_t(r * Hv)]);
    }
    auto logged = [&](std::vector<float>& S, const float* k, const float* uu, const float* gg) {
      for (int64_t h = 0; h < Hv; ++h) {
        float* Sh = S.data() + h * dk * dv;
        ops::cpu::gdn_decay_head(Sh, dk, dv, std::exp(gg[h]));
        ops::cpu::gdn_rank1_head(Sh, dk, dv, k + (h / rep) * dk, uu + h * dv);
      }
    };
    // A new token of row r (k and g from `k`, `gg`): u into uu, o into row r.
    auto fresh = [&](std::vector<float>& S, int64_t r, const float* k, const float* gg, float* uu) {
      const float* pr = &post[size_t(r * C)];
      for (int64_t h = 0; h < Hv; ++h) {
        float* Sh = S.data() + h * dk * dv;
        ops::cpu::gdn_decay_head(Sh, dk, dv, std::exp(gg[h]));
        ops::cpu::gdn_correct_head(Sh, dk, dv, k + (h / rep) * dk, pr + 2 * Kd + h * dv, beta[size_t(r * Hv + h)],
                                   uu + h * dv);
        ops::cpu::gdn_rank1_head(Sh, dk, dv, k + (h / rep) * dk, uu + h * dv);
        ops::cpu::gdn_output_head(Sh, dk, dv, pr + (h / rep) * dk, o + r * ldo + h * dv);
      }
    };
    for (const cuda::SsmLaunch& Ln : kind_launches(false)) {
      Race race(this);
      if (Ln.kind == cuda::SsmLaunch::kCopy) {
        copy_state(L, Ln.copy_src, Ln.copy_dst);
        continue;
      }
      for (int b = 0; b < Ln.batch; ++b) {
        std::vector<float> S = read_state(L, at(Ln.slot)[b], race, b);
        if (Ln.kind == cuda::SsmLaunch::kStep) {
          for (int t = 0; t < Ln.T; ++t) {
            const int64_t r = at(Ln.row)[b] + t;
            const float* pr = &post[size_t(r * C)];
            fresh(S, r, pr + Kd, &g[size_t(r * Hv)], &u[size_t(r * V)]);
            write_state(L, at(Ln.out_slot)[r], S, race, b);
          }
          continue;
        }
        const int n_log = at(Ln.n_log)[b];
        const int T = Ln.kind == cuda::SsmLaunch::kDecode ? Ln.T : 0;
        const int f = Ln.fold.present() ? at(Ln.fold)[b] : 0;
        check(f <= n_log - T, "GDN fold past the entries before the new tokens", f);
        for (int s = 0; s < n_log; ++s) {
          const int64_t e = log_row(Ln, b, s);
          check(L.a.valid.count(e) && L.c.valid.count(e), "GDN log row", e);
          if (s < n_log - T) {
            check(L.b.valid.count(e) > 0, "GDN log u", e);
            logged(S, L.a.row(e), L.b.row(e), L.c.row(e));
          } else {  // the kernel reads k and g from the log, writes u there
            const int64_t r = at(Ln.row)[b] + (s - (n_log - T));
            std::vector<float> uu(static_cast<size_t>(V));
            fresh(S, r, L.a.row(e), L.c.row(e), uu.data());
            L.b.write(e, uu.data());
          }
          if (s + 1 == f) write_state(L, at(Ln.fold_slot)[b], S, race, b);
        }
        if (Ln.kind == cuda::SsmLaunch::kScan) {
          const int64_t r0 = at(Ln.cu_rows)[b];
          for (int64_t r = r0; r < r0 + at(Ln.n_rows)[b]; ++r) {
            const float* pr = &post[size_t(r * C)];
            fresh(S, r, pr + Kd, &g[size_t(r * Hv)], &u[size_t(r * V)]);
          }
          write_state(L, at(Ln.out_slot)[b], S, race, b);
        }
      }
      if (Ln.u_entry.present())
        for (int64_t r = 0; r < R; ++r)
          if (at(Ln.u_entry)[r] >= 0) L.b.write(at(Ln.u_entry)[r], &u[size_t(r * V)]);
    }
    gather_windows(L, kind_windows(false));
  }

  void end_step(std::span<const SeqSlice>) override {
    // Scratch slots live one step.
    for (Layer& L : layers_) {
      for (EmuRows* r : L.logs())
        for (int32_t i = 0; i < s_.log_scratch; ++i) r->drop(slots_.log_scratch + i);
      for (int32_t i = 0; i < s_.ckpt_scratch; ++i) L.state.drop(slots_.ckpt_scratch + i);
    }
  }

  // read_state's rule: the state after the log from the base, the window before the length.
  void read(const StateRead& rd, int layer, std::vector<float>* window, std::vector<float>* state) {
    Layer& L = layers_[size_t(layer)];
    std::vector<float> S(size_t(L.sh.state_floats()), 0.0f);
    if (rd.base >= 0) S.assign(L.state.row(rd.base), L.state.row(rd.base) + L.sh.state_floats());
    auto entry = [&](int64_t q) { return int64_t(rd.logs[size_t(q / B_)]) * B_ + q % B_; };
    const int64_t H = L.sh.H, P = L.sh.rows, N = L.sh.cols;
    for (int64_t q = rd.base_pos; q < rd.length; ++q) {
      const int64_t e = entry(q);
      if (L.sh.mamba) {
        const int64_t G = L.sh.b_width / N;
        for (int64_t h = 0; h < H; ++h) {
          const float A = -std::exp(ssm_param(layer, 0)[h]), dts = L.c.row(e)[h];
          ops::cpu::mamba2_update_head(S.data() + h * P * N, P, N, std::exp(dts * A), dts,
                                       L.b.row(e) + (h / (H / G)) * N, L.a.row(e) + h * P);
        }
      } else {
        const int64_t dk = P, dv = N, rep = H / (L.sh.a_width / dk);
        for (int64_t h = 0; h < H; ++h) {
          float* Sh = S.data() + h * dk * dv;
          ops::cpu::gdn_decay_head(Sh, dk, dv, std::exp(L.c.row(e)[h]));
          ops::cpu::gdn_rank1_head(Sh, dk, dv, L.a.row(e) + (h / rep) * dk, L.b.row(e) + h * dv);
        }
      }
    }
    *state = S;
    window->assign(size_t(L.sh.window_elems()), 0.0f);
    for (int64_t i = 0; i < L.sh.K - 1; ++i) {
      const int64_t q = rd.length - (L.sh.K - 1) + i;
      const float* src = nullptr;
      if (q >= rd.base_pos) src = L.pre.row(entry(q));
      else if (rd.base >= 0) src = L.window.row(rd.base) + (q - rd.base_pos + L.sh.K - 1) * L.sh.C;
      if (src != nullptr) std::copy(src, src + L.sh.C, window->begin() + i * L.sh.C);
    }
  }
  // The model's A_log of an SSM layer (the read's arithmetic needs it).
  std::function<const float*(int, int)> ssm_param;
  // Called with each step's schedule before it runs.
  std::function<void(const cuda::StepSchedule&)> on_schedule;

 private:
  struct Layer {
    CacheLayerSpec spec{};
    cuda::SsmShape sh;
    EmuRows a, b, c, pre, state, window, kv;
    std::vector<EmuRows*> logs() { return {&a, &b, &c, &pre}; }
  };
  // A launch's state reads and writes, by sequence: no sequence may write a
  // state another reads or writes (the device runs them at once).
  struct Race {
    EmuCache* cache;
    std::map<int32_t, std::set<int>> readers, writers;
    explicit Race(EmuCache* c) : cache(c) {}
    ~Race() {
      for (const auto& [slot, w] : writers) {
        std::set<int> others = readers.count(slot) ? readers[slot] : std::set<int>{};
        others.insert(w.begin(), w.end());
        cache->check(others.size() <= 1, "a launch's sequences race on checkpoint slot", slot);
      }
    }
  };

  void check(bool ok, const char* what, int64_t at) {
    if (ok) return;
    if (failures_++ < 8) ADD_FAILURE() << "emulated cuda schedule: " << what << " " << at;
  }
  const int32_t* at(const cuda::Span32& a) const { return s_.at(a); }
  int64_t page_row(const int32_t* table, int64_t pos) const { return int64_t(table[pos / B_]) * B_ + pos % B_; }
  // Entry s of sequence b's log in a launch (log_pages.h's row).
  int64_t log_row(const cuda::SsmLaunch& Ln, int b, int s) const {
    const int64_t e = at(Ln.first)[b] + s;
    return int64_t(at(Ln.page)[int64_t(b) * Ln.page_stride + e / B_]) * B_ + e % B_;
  }
  const std::vector<cuda::SsmLaunch>& kind_launches(bool mamba) const {
    return mamba ? s_.mamba.launches : s_.gdn.launches;
  }
  const cuda::WindowGather& kind_windows(bool mamba) const { return mamba ? s_.mamba.windows : s_.gdn.windows; }

  std::vector<float> read_state(Layer& L, int32_t slot, Race& race, int b) {
    race.readers[slot].insert(b);
    if (slot == slots_.zero) return std::vector<float>(size_t(L.sh.state_floats()), 0.0f);
    check(L.state.valid.count(slot) > 0, "state read from an unwritten checkpoint slot", slot);
    const float* s = L.state.row(slot);
    return std::vector<float>(s, s + L.sh.state_floats());
  }
  void write_state(Layer& L, int32_t slot, const std::vector<float>& S, Race& race, int b) {
    check(slot != slots_.zero, "a write into the zero slot", slot);
    race.writers[slot].insert(b);
    L.state.write(slot, S.data());
  }
  void copy_state(Layer& L, int32_t src, int32_t dst) {
    if (src == slots_.zero) {
      std::vector<float> z(size_t(L.sh.state_floats()), 0.0f);
      L.state.write(dst, z.data());
      return;
    }
    check(L.state.valid.count(src) > 0, "a copy of an unwritten state", src);
    L.state.write(dst, L.state.row(src));
  }

  // The conv of every row over its slice's paged window (conv1d.h), and the
  // pre-conv rows into the log.
  std::vector<float> conv_rows(Layer& L, const ops::Conv1dParams& conv, const float* x, int64_t ldx) {
    const int64_t C = L.sh.C, K = L.sh.K;
    std::vector<float> post(static_cast<size_t>(s_.rows * C));
    std::vector<const float*> taps(static_cast<size_t>(K));
    for (int j = 0; j < s_.n_seqs; ++j) {
      const int64_t r0 = at(s_.cu_rows)[j], n = at(s_.cu_rows)[j + 1] - r0, logged = at(s_.conv_logged)[j];
      const int32_t ck = at(s_.conv_ckpt)[j];
      const int32_t* table = at(s_.conv_page) + int64_t(j) * s_.conv_page_stride;
      const int64_t first = at(s_.conv_first)[j];
      std::vector<float> zeros(size_t(C), 0.0f);
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t i = 0; i < K; ++i) {
          const int64_t d = t - (K - 1) + i;  // rows from the first new one
          if (d >= 0) {
            taps[size_t(i)] = x + (r0 + d) * ldx;
          } else if (logged + d >= 0) {
            const int64_t e = first + logged + d, row = int64_t(table[e / B_]) * B_ + e % B_;
            check(L.pre.valid.count(row) > 0, "conv window from an unwritten pre-conv row", row);
            taps[size_t(i)] = L.pre.row(row);
          } else if (ck >= 0) {
            check(L.window.valid.count(ck) > 0, "conv window from an unwritten checkpoint", ck);
            taps[size_t(i)] = L.window.row(ck) + (logged + d + K - 1) * C;
          } else {
            taps[size_t(i)] = zeros.data();
          }
        }
        for (int64_t c = 0; c < C; ++c) {
          float acc = conv.bias != nullptr ? conv.bias[c] : 0.0f;
          for (int64_t i = 0; i < K; ++i) acc += conv.weight[c * K + i] * taps[size_t(i)][c];
          post[size_t((r0 + t) * C + c)] = ops::silu(acc);
        }
      }
    }
    for (int64_t r = 0; r < s_.rows; ++r) L.pre.write(at(s_.entry)[r], x + r * ldx);
    return post;
  }

  void gather_windows(Layer& L, const cuda::WindowGather& g) {
    const int64_t C = L.sh.C, K = L.sh.K;
    std::vector<std::vector<float>> staged;
    for (int j = 0; j < g.n; ++j) {
      std::vector<float> w(size_t(L.sh.window_elems()), 0.0f);
      const int32_t ck = at(g.ckpt_slot)[j];
      const int64_t upto = at(g.n_upto)[j], first = at(g.first)[j];
      const int32_t* table = at(g.page) + int64_t(j) * g.page_stride;
      for (int64_t i = 0; i < K - 1; ++i) {
        const int64_t d = upto - (K - 1) + i;
        const float* src = nullptr;
        if (d >= 0) {
          const int64_t e = first + d, row = int64_t(table[e / B_]) * B_ + e % B_;
          check(L.pre.valid.count(row) > 0, "a checkpoint window from an unwritten pre-conv row", row);
          src = L.pre.row(row);
        } else if (ck >= 0) {
          src = L.window.row(ck) + (d + K - 1) * C;
        }
        if (src != nullptr) std::copy(src, src + C, w.begin() + i * C);
      }
      staged.push_back(std::move(w));
    }
    for (int j = 0; j < g.n; ++j) L.window.write(g.write_slot[size_t(j)], staged[size_t(j)].data());
  }

  CacheSpec spec_;
  int64_t B_;
  cuda::ScheduleLimits lim_;
  std::vector<Layer> layers_;
  bool has_mamba_ = false, has_gdn_ = false;
  const StepPlan* plan_ = nullptr;
  std::vector<int64_t> kept_;
  cuda::StepSchedule s_;
  cuda::ScheduleSlots slots_;
  int32_t log_cap_ = 0, ckpt_cap_ = 0;
  int failures_ = 0;
};

// A Backend over EmuCache and the model's CPU forward: the CUDA backend's
// schedule and storage layout with the CPU's arithmetic (its units too, so
// the manager plans as it plans for the CUDA backend).
class EmulatedBackend final : public Backend {
 public:
  EmulatedBackend(const Model& m, cuda::ScheduleLimits lim = {})
      : model_(m), spec_(replayssm::cache_spec(m.config())), lim_(lim) {}
  const char* name() const override { return "emulated-cuda"; }
  const ModelConfig& config() const override { return model_.config(); }
  const CacheSpec& cache_spec() const override { return spec_; }
  StateUnits units(const StateOptions&) const override { return cuda::SlotStorage::units(spec_); }
  Status check_options(const StateOptions& opt) const override {
    RSSM_RETURN_IF_ERROR(opt.validate());
    if ((opt.page_size & (opt.page_size - 1)) != 0) return invalid_argument("--page-size: not a power of two");
    return {};
  }
  int64_t max_step_rows() const override { return 64; }
  Status execute(const StepPlan& plan, std::span<const int64_t> logit_rows) override {
    std::vector<SeqSlice> slices;
    for (const PlanSlice& ps : plan.slices) slices.push_back({ps.seq, ps.pos, ps.n, ps.row, ps.commit});
    std::sort(slices.begin(), slices.end(), [](const SeqSlice& a, const SeqSlice& b) { return a.row < b.row; });
    logits_.resize(logit_rows.size() * size_t(model_.config().vocab_size));
    cache_->set_plan(&plan, logit_rows);
    const Status st = model_.forward(slices, plan.tokens, *cache_, logit_rows, logits_.data());
    kept_ = st.ok() ? int64_t(logit_rows.size()) : 0;
    ++steps_;
    return st;
  }
  Status apply(std::span<const StorageOp> ops) override {
    cache_->apply(ops);
    return {};
  }
  Status logits(std::span<const int64_t> rows, float* out) override {
    for (size_t i = 0; i < rows.size(); ++i)
      std::copy_n(row(rows[i]).data(), model_.config().vocab_size, out + i * size_t(model_.config().vocab_size));
    return {};
  }
  Status argmax(std::span<const int64_t> rows, int32_t* out) override {
    for (size_t i = 0; i < rows.size(); ++i) out[i] = ops::cpu::argmax(row(rows[i]));
    return {};
  }
  Status top_logprobs(std::span<const int64_t> rows, int64_t k, TokenLogprob* out) override {
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto t = ops::cpu::top_logprobs(row(rows[i]), k);
      std::copy(t.begin(), t.end(), out + i * size_t(k));
    }
    return {};
  }
  Status sample(std::span<const SampleRequest> requests, int32_t* ids, double* lp) override {
    for (size_t i = 0; i < requests.size(); ++i) {
      ids[i] = ops::cpu::sample_at(row(requests[i].row), requests[i].params, requests[i].r);
      if (lp != nullptr) lp[i] = ops::cpu::log_prob(row(requests[i].row), ids[i]);
    }
    return {};
  }
  Status logprobs_of(std::span<const int64_t> rows, std::span<const int32_t> tokens, double* out) override {
    for (size_t i = 0; i < rows.size(); ++i) out[i] = ops::cpu::log_prob(row(rows[i]), tokens[i]);
    return {};
  }
  Status read_state(const StateRead& read, int layer, std::vector<float>* window, std::vector<float>* state) override {
    cache_->read(read, layer, window, state);
    return {};
  }
  BackendMemory memory() const override { return {}; }
  int failures() const { return cache_ != nullptr ? cache_->failures() : 0; }
  // Called with each step's schedule (from the next claim on).
  std::function<void(const cuda::StepSchedule&)> on_schedule;
  int64_t steps() const { return steps_; }

 protected:
  Status reset_storage(const StateOptions& opt) override {
    cache_ = std::make_unique<EmuCache>(spec_, opt.page_size, lim_);
    cache_->on_schedule = on_schedule;
    cache_->ssm_param = [this](int layer, int) -> const float* {
      for (const Block& b : model_.program().blocks)
        if (b.cache_layer == layer) return b.kind == BlockKind::kMamba2 ? b.mamba.A_log : b.gdn.A_log;
      return nullptr;
    };
    return {};
  }

 private:
  std::span<const float> row(int64_t i) const {
    const size_t V = size_t(model_.config().vocab_size);
    return std::span<const float>(logits_).subspan(size_t(i) * V, V);
  }
  const Model& model_;
  CacheSpec spec_;
  cuda::ScheduleLimits lim_;
  std::unique_ptr<EmuCache> cache_;
  std::vector<float> logits_;
  int64_t kept_ = 0, steps_ = 0;
};

}  // namespace replayssm::test
