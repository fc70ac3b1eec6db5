// The SSM decode bench's measuring machinery (ssm_decode_bench.cpp): device
// buffers, the rotations of state slots and logs, the replay cycles' plans,
// and the timer of a run of launches, each run one CUDA graph. One
// translation unit includes it.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cuda_bench.h"  // beside this file
#include "ops/cuda/gdn_decode.h"
#include "ops/cuda/mamba2_decode.h"
#include "backend/cuda/device_fill.h"

namespace replayssm::bench::ssm {

// --profile: each workload runs twice, untimed, for a profiler.
inline bool g_profile = false;
// Every timed run captured as one CUDA graph and launched so, as the
// decoder's steps are (no host launch between kernels: H200, fc5a5de,
// the GDN standard step at batch 1 2.6 µs a launch in graphs, 4.0–5.3
// from the host); the launches go to g_stream, a stream of its own.
// --graph 0: launched from the host, on the default stream.
inline bool g_graph = false;
// The decode rows' head counts (--mamba2-heads, --gdn-heads): Nemotron-H-8B's
// and Qwen3-Next's by default; other counts place the replay kernels'
// small-batch crossovers (docs/perf).
inline int g_mamba2_heads = 128;
inline int g_gdn_k_heads = 16, g_gdn_v_heads = 32;
// --between MB: after every timed SSM launch a read of that many bytes
// (read_ld), as a decoder's next GEMV streams its weights, so that what a
// launch leaves behind (the standard step's written state, dirty in L2)
// is paid where the decoder pays it; 0: none (the default). The rows'
// times, GB/s and shares of copy then hold the reads (the diagnostics
// beside the rows are left out).
inline size_t g_between_bytes = 0;
inline const void* g_between_buf = nullptr;
inline float* g_between_sink = nullptr;
inline int g_sms = 0;
inline cudaStream_t g_stream = nullptr;

// Median µs of one call of run(i), over 7 timed runs of `iters` calls.
inline double median_us(const std::function<void(int)>& run, int iters) {
  if (g_profile) {
    run(0), run(1);
    CK(cudaDeviceSynchronize());
    return 1.0;
  }
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaDeviceSynchronize());  // the arena's fills (the default stream) before g_stream's launches
  for (int i = 0; i < 3; ++i) run(i);
  CK(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    cudaGraphExec_t ge = nullptr;
    if (g_graph) {  // the run's launches (the same arguments) as one graph, uploaded before it is timed
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < iters; ++i) run(r * iters + i);
      CK(cudaStreamEndCapture(g_stream, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      CK(cudaGraphDestroy(g));
      CK(cudaGraphUpload(ge, g_stream));
      CK(cudaStreamSynchronize(g_stream));
    }
    CK(cudaEventRecord(a, g_stream));
    if (g_graph)
      CK(cudaGraphLaunch(ge, g_stream));
    else
      for (int i = 0; i < iters; ++i) run(r * iters + i);
    CK(cudaEventRecord(b, g_stream));
    CK(cudaEventSynchronize(b));
    if (ge != nullptr) CK(cudaGraphExecDestroy(ge));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(1e3 * ms / iters);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[3];
}

// Device allocations of one batch's run, freed together. Inputs and states
// are random (zeros can run faster than real data); outputs start zeroed.
struct Arena {
  std::vector<void*> ptrs;
  uint64_t seed = 1;
  template <typename T>
  T* zeros(size_t n) {
    void* p;
    CK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
    CK(cudaMemset(p, 0, std::max<size_t>(n, 1) * sizeof(T)));
    ptrs.push_back(p);
    return static_cast<T*>(p);
  }
  float* uniform(size_t n, float lo, float hi) {
    float* p = zeros<float>(n);
    CK(replayssm::cuda::fill_uniform_f32(p, int64_t(n), lo, hi, seed++, nullptr));
    return p;
  }
  uint16_t* uniform_bf16(size_t n, float bound) {
    uint16_t* p = zeros<uint16_t>(n);
    CK(replayssm::cuda::fill_uniform_bf16(p, int64_t(n), bound, seed++, nullptr));
    return p;
  }
  int32_t* ints(const std::vector<int32_t>& h) {
    int32_t* d = zeros<int32_t>(h.size());
    CK(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    return d;
  }
  ~Arena() {
    for (void* p : ptrs) cudaFree(p);
  }
};

inline constexpr int kW = 16;           // AR window
inline constexpr int kT = 4;            // verify drafts
inline constexpr int kAccepted = 2;     // per verify step
inline constexpr int kVerifyCycle = 7;  // verify steps per fold (committed 2, 4, …, 14)

struct Row {
  std::string family, workload;
  int batch;
  double std_us, std_bytes, rep_us, rep_bytes;
};

// Slot layout per rotation r: sequence b reads r·B·5 + b·5 and the standard
// verify writes the 4 slots after it. Rotations cover ≥ 512 MB of state,
// and are at least 3: a launch reads, before its PDL wait, another
// rotation than the two launches before it write.
struct Slots {
  int rot;
  std::vector<int32_t*> read, verify_out;
};
inline Slots make_slots(Arena& ar, int batch, double state_bytes) {
  Slots s;
  s.rot = std::max(3, int((512.0 * (1 << 20)) / (batch * state_bytes)) + 1);
  for (int r = 0; r < s.rot; ++r) {
    std::vector<int32_t> rd(batch), out(size_t(batch) * kT);
    for (int b = 0; b < batch; ++b) {
      rd[b] = (r * batch + b) * (1 + kT);
      for (int t = 0; t < kT; ++t) out[size_t(b) * kT + t] = rd[b] + 1 + t;
    }
    s.read.push_back(ar.ints(rd));
    s.verify_out.push_back(ar.ints(out));
  }
  return s;
}

// Rotation i's log: each rotation of slots has a log of its own, as it has
// states of its own (in the decoder a layer's log, like its states, is
// evicted from L2 between its steps; one log for every launch let the
// replay reread it from L2 at small batch before fce6dd6).
// The args' log arrays hold `sets` logs of batch·W entries.
inline void rotate_log(replayssm::ops::cuda::Mamba2DecodeArgs& r, int i, int sets) {
  const size_t e = size_t(i % sets) * r.batch * r.W;
  r.log_x += e * r.H * r.P, r.log_B += e * r.G * r.N, r.log_dt += e * r.H;
}
inline void rotate_log(replayssm::ops::cuda::GdnDecodeArgs& r, int i, int sets) {
  const size_t e = size_t(i % sets) * r.batch * r.W;
  r.log_k += e * r.Hk * r.dk, r.log_u += e * r.Hv * r.dv, r.log_g += e * r.Hv;
}

// Per-step plans of a replay cycle: (n_log, fold) for every sequence.
struct Plan {
  int32_t *n_log, *fold;
  int n, f;
};
inline std::vector<Plan> cycle(Arena& ar, int batch, bool verify, bool fold_new_token) {
  std::vector<Plan> c;
  auto add = [&](int n, int f) {
    c.push_back({ar.ints(std::vector<int32_t>(batch, n)), ar.ints(std::vector<int32_t>(batch, f)), n, f});
  };
  if (verify) {
    for (int k = 0; k < kVerifyCycle; ++k) {
      const int committed = kAccepted * (k + 1);
      add(committed + kT, k + 1 == kVerifyCycle ? committed : 0);
    }
  } else if (fold_new_token) {  // Mamba2: the new token's inputs are known, fold it too
    for (int n = 1; n <= kW; ++n) add(n, n == kW ? kW : 0);
  } else {  // GDN: a new token's u is this step's output, so the fold leaves it in the log
    for (int n = 2; n <= kW; ++n) add(n, n == kW ? kW - 1 : 0);
  }
  return c;
}

// The same cycle with the sequences out of phase: sequence b at step k is
// where the in-phase cycle's sequences are at step (k + b) mod its length,
// so every launch folds about one sequence in its length (as a server's
// sequences, which started at different times, do); the same bytes.
inline std::vector<Plan> staggered(Arena& ar, const std::vector<Plan>& in_phase, int batch) {
  const int n = int(in_phase.size());
  std::vector<Plan> c;
  for (int k = 0; k < n; ++k) {
    std::vector<int32_t> nl(batch), fo(batch);
    int f = 0, most = 0;
    for (int b = 0; b < batch; ++b) {
      const Plan& q = in_phase[(k + b) % n];  // an in-phase step: every sequence's n and f alike
      nl[b] = q.n, fo[b] = q.f, f = std::max(f, q.f), most = std::max(most, q.n);
    }
    c.push_back({ar.ints(nl), ar.ints(fo), most, f});
  }
  return c;
}

// Diagnostic (batch ≥ 64): the replay cycle's last two steps timed alone —
// the longest log without a fold, and the fold step — beside the standard step.
template <typename AtFn, typename ReplayFn>
void print_last_steps(const char* family, bool verify, int batch, const std::vector<Plan>& plan, AtFn&& at,
                      double std_us, ReplayFn&& replay) {
  if (g_profile || batch < 64) return;
  auto step_us = [&](const Plan& p) {
    return median_us(
        [&](int i) {
          auto r = at(i);
          r.n_log = p.n_log, r.fold = p.f ? p.fold : nullptr, r.max_fold = p.f ? r.W : 0;
          CK(replay(r));
        },
        20);
  };
  const Plan &last = plan.back(), &before = plan[plan.size() - 2];
  std::printf(
      "  (%s %s replay, batch %d: a %d-entry log, no fold %.1f us; the fold step (%d folded) %.1f us; "
      "standard %.1f us)\n",
      family, verify ? "verify" : "ar", batch, before.n, step_us(before), last.f, step_us(last), std_us);
}

// Diagnostic (batch ≥ 64): µs a step of a cycle of plans, in phase and
// staggered (the same launches, each with fold arrays where one folds).
template <typename AtFn, typename ReplayFn>
void print_staggered(Arena& ar, const char* family, bool verify, int batch, const std::vector<Plan>& plan, AtFn&& at,
                     ReplayFn&& replay) {
  if (g_profile || batch < 64) return;
  const std::vector<Plan> st = staggered(ar, plan, batch);
  auto cycle_us = [&](const std::vector<Plan>& c) {
    return median_us(
               [&](int i) {
                 for (size_t k = 0; k < c.size(); ++k) {  // each launch on the next rotation, as below
                   auto r = at(i * int(c.size()) + int(k));
                   r.n_log = c[k].n_log, r.fold = c[k].f ? c[k].fold : nullptr, r.max_fold = c[k].f ? r.W : 0;
                   CK(replay(r));
                 }
               },
               4) /
           double(c.size());
  };
  const double a = cycle_us(plan), b = cycle_us(st), a2 = cycle_us(plan), b2 = cycle_us(st);
  std::printf("  (%s %s replay, batch %d, a step of the cycle: in phase %.1f / %.1f us, staggered %.1f / %.1f us)\n",
              family, verify ? "verify" : "ar", batch, a, a2, b, b2);
}

// Mamba2 arguments at Nemotron-H-8B shapes over zeroed device buffers:
// `state_slots` states, T tokens per sequence, log capacity W, `log_sets`
// logs of batch·W entries (rotate_log).
replayssm::ops::cuda::Mamba2DecodeArgs mamba2_args(Arena& ar, int batch, int T, int W, size_t state_slots,
                                                   int log_sets = 1) {
  const int H = g_mamba2_heads, P = 64, N = 128, G = 8;
  replayssm::ops::cuda::Mamba2DecodeArgs a;
  a.batch = batch, a.H = H, a.P = P, a.N = N, a.G = G, a.T = T, a.W = W, a.max_fold = W;
  a.A_log = ar.uniform(H, 0.0f, 1.0f), a.D = ar.uniform(H, -1.0f, 1.0f), a.dt_bias = ar.uniform(H, -2.0f, 0.0f);
  a.state = ar.uniform(state_slots * H * P * N, -1.0f, 1.0f);
  a.x = ar.uniform_bf16(size_t(batch) * T * H * P, 1.0f), a.Bm = ar.uniform_bf16(size_t(batch) * T * G * N, 0.5f);
  a.Cm = ar.uniform_bf16(size_t(batch) * T * G * N, 0.5f), a.dt_raw = ar.uniform(size_t(batch) * T * H, -2.0f, 0.0f);
  a.y = ar.zeros<uint16_t>(size_t(batch) * T * H * P);
  const size_t E = size_t(log_sets) * batch * W;
  a.log_x = ar.uniform_bf16(E * H * P, 1.0f), a.log_B = ar.uniform_bf16(E * G * N, 0.5f);
  a.log_dt = ar.uniform(E * H, 0.0f, 0.2f);
  a.scratch = ar.zeros<float>(replayssm::ops::cuda::mamba2_replay_scratch_floats(batch, T, H, P));
  return a;
}

// Median µs of one standard step and of one step of the replay cycle
// (the whole cycle's time over its steps), args from at(i). Every launch,
// the cycle's too, takes the next rotation of slots: in the decoder the
// rest of the model's reads evict a layer's states between its steps, so
// a checkpoint read again by the next step of its cycle must not come
// from L2 here either (one rotation a cycle let batch 1–8's replay reread
// its checkpoints from L2 before ffa8936), and no launch reads the
// slots the one before folded into.
template <typename AtFn, typename StepFn, typename ReplayFn>
std::pair<double, double> time_standard_and_replay(AtFn&& at, const std::vector<Plan>& plan, StepFn&& step,
                                                   ReplayFn&& replay) {
  // As many standard launches a timed run as the replay cycles' (4 cycles):
  // a graph's launch latency, in each run's time, is then as much a launch.
  auto between = [] {
    if (g_between_bytes > 0)
      CK(replayssm::bench::read_ld(g_between_buf, g_between_bytes, g_between_sink, g_sms, g_stream));
  };
  const double std_us = median_us(
      [&](int i) {
        CK(step(at(i)));
        between();
      },
      4 * int(plan.size()));
  const double cyc_us = median_us(
      [&](int i) {
        for (size_t k = 0; k < plan.size(); ++k) {
          auto r = at(i * int(plan.size()) + int(k));
          const Plan& p = plan[k];
          // As the decoder plans a step: no fold arrays where none folds.
          r.n_log = p.n_log, r.fold = p.f ? p.fold : nullptr, r.max_fold = p.f ? r.W : 0;
          CK(replay(r, p));
          between();
        }
      },
      4);
  return {std_us, cyc_us / plan.size()};
}

}  // namespace replayssm::bench::ssm
