// SSM decode kernels on the GPU, standard against replay, side by side:
//   Mamba2 at Nemotron-H-8B shapes (128 heads × 64, state 128, 8 groups)
//   Gated DeltaNet at Qwen3-Next shapes (16 key / 32 value heads, dk = dv = 128)
// fp32 state, bf16 inputs; batch 1, 8, 64, 256, 512; two workloads:
//   ar     — one token per step. standard: read + write the state in place.
//            replay: a full window cycle (log growing to W = 16, the last
//            step folding the log into the checkpoint in the same pass);
//            at batches where the decoder's replay layout takes one token
//            through the standard step (Mamba2: mamba2_replay_steps_faster)
//            that step, and the output-only kernels' cycle beside it as
//            "ar-kernel".
//   verify — speculative verify of T = 4 drafts, 2 accepted per step.
//            standard: read the state, write one state per draft (vLLM/SGLang).
//            replay: outputs for the 4 drafts from checkpoint + log, no state
//            write, the committed log folded every 7 steps (14 tokens).
//   beamN  — N beams sharing a checkpoint (a fork group), AR, Mamba2 and
//            GDN: replay reads the shared checkpoint once per group per step
//            (mamba2-fma: the groups' pass on FMAs instead of tensor cores;
//            beamN-alone: each beam decoded alone, the same checkpoints).
// Beside the batch ≥ 64 rows: the replay cycle's last two steps alone (the
// longest log without a fold, then the fold step), the cycle's step in
// phase and staggered (sequence b offset by b steps, as a server's are: a
// fold in most launches), and the AR state stream alone (a one-entry log,
// Mamba2 and GDN). Steps without a fold get no fold arrays, as the decoder
// plans them.
// For each it counts the bytes that must move, times the kernels with CUDA
// events (median of 7 runs after 3 warm-ups, each run one CUDA graph of its
// launches, as the decoder's steps are: launched from the host, a kernel
// of a few µs is timed at the host's launch rate; --graph 0 does that),
// and prints µs per step, GB/s,
// the fraction of the measured device copy bandwidth, and replay/standard
// from the same run — beside it the byte ratio, standard's bytes over
// replay's: the replay/standard a replay kernel as bandwidth-efficient as
// the standard one would reach (the bytes' ideal for this log's format).
// State slots rotate over ≥ 512 MB, well past the 60 MB L2, every launch
// on the next rotation (a replay cycle's steps too), each rotation with a
// log of its own; a timed run holds as many standard launches as replay
// launches. The first line
// gives the device's bandwidth by copy, by reads alone, and by one read and
// four writes (the standard verify's mix, fanout_probe.cu).
// Then the chunk scans (prefill): a chunk of 256 tokens per sequence through
// mamba2_scan_cuda / gdn_scan_cuda against the same 256 tokens as one-token
// standard steps, at batch 1, 8, 64 — µs, GB/s and the recurrence's fp32
// TFLOP/s (the scans are bound by their FMAs, not by bytes), steps / scan.
//
// Usage: replayssm_ssm_bench [JSON_OUT]
//        replayssm_ssm_bench --only mamba2|mamba2-ex|gdn|gdn-ex|scan|beams [--gdn-mma 1|0|-1] [--gdn-variant 0..4]
//                            [--gdn-l2-ahead -1..4] [--gdn-step-variant 0..3] [--mamba2-variant 0..5]
//                            [--batches B1,B2,...] [--scan-knobs TOKENS_PER_SUM TILE_ROWS] [--graph 0|1]
//                            [--mamba2-heads H] [--gdn-heads HK,HV] [--between MB]
//            (one family's rows, no JSON; GdnDecodeArgs::mma, GdnDecodeArgs::variant of the GDN
//            replay, its l2_ahead (−1 the launcher's), GdnDecodeArgs::variant of its standard
//            step, Mamba2DecodeArgs::variant or Mamba2ScanArgs'
//            tokens_per_sum and tile_rows, 0 the launcher's, for A/B runs; --batches: the ar and
//            verify rows' batches, 1 8 64 256 512 by default; --graph 1: every timed run launched
//            as one CUDA graph (the default), 0 from the host; --mamba2-heads, --gdn-heads: the
//            decode rows' head counts, 128 and 16,32 by default; --between: a read of MB megabytes
//            after every timed SSM launch, as a decoder's next GEMV streams its weights)
//        replayssm_ssm_bench --gdn-shapes [--gdn-mma 1|0|-1] [--gdn-variant 0..4] [--gdn-l2-ahead -1..4]
//                            [--gdn-step-variant 0..3] [--batches B1,B2,...] [--graph 0|1]
//            (the GDN kernels at each block shape, the same knobs; batch 64, 256, 512 by default)
//        replayssm_ssm_bench --profile mamba2|gdn ar|verify BATCH [VARIANT]   (untimed, for ncu)
//        replayssm_ssm_bench --profile gdn beams BATCH   (GDN beams of 8 in fork groups, untimed)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "cuda_bench.h"  // beside this file
#include "ops/cuda/gdn_decode.h"
#include "ops/cuda/gdn_scan.h"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/mamba2_scan.h"
#include "backend/cuda/device_fill.h"
#include "ssm_bench_cycle.h"  // beside this file

namespace {

using namespace replayssm::bench::ssm;  // NOLINT(build/namespaces): this bench's own machinery

int g_gdn_mma = 0;         // GdnDecodeArgs::mma of the replay rows (--gdn-mma)
int g_mamba2_variant = 0;  // Mamba2DecodeArgs::variant of the "mamba2" rows (--mamba2-variant)
int g_scan_sum = 0, g_scan_rows = 0;  // Mamba2ScanArgs::tokens_per_sum, tile_rows (--scan-knobs SUM ROWS)
int g_gdn_variant = 0;       // GdnDecodeArgs::variant of the "gdn" rows' replay (--gdn-variant)
int g_gdn_step_variant = 0;  // … and of their standard step (--gdn-step-variant)
int g_gdn_l2_ahead = -1;     // GdnDecodeArgs::l2_ahead of the replay rows (--gdn-l2-ahead)
// The batches given by --batches; empty: each mode's own (the ar and
// verify rows the 1, 8, 64, 256, 512; --gdn-shapes 64, 256, 512).
std::vector<int> g_batches;

// Whether the decoder's replay layout steps one token through the standard
// step at this batch, for the rows of `family` at the bench's shapes: the
// "mamba2" rows at the default variant where mamba2_replay_steps_faster
// (GDN's output-only kernels measured the faster decode step everywhere).
bool steps_faster(const std::string& family, int batch) {
  if (family != "mamba2" || g_mamba2_variant != 0) return false;
  replayssm::ops::cuda::Mamba2DecodeArgs a;
  a.batch = batch, a.H = g_mamba2_heads, a.P = 64, a.N = 128;
  return replayssm::ops::cuda::mamba2_replay_steps_faster(a);
}

// "1,2,8" → {1, 2, 8}; false on anything else.
bool parse_batches(const char* s, std::vector<int>* out) {
  std::vector<int> b;
  for (const char* p = s; *p != '\0';) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p || v < 1 || v > 4096 || (*end != ',' && *end != '\0')) return false;
    b.push_back(int(v));
    p = *end == ',' ? end + 1 : end;
    if (*end == ',' && *p == '\0') return false;
  }
  if (b.empty()) return false;
  *out = b;
  return true;
}

// stepped: the replay layout's one-token steps through the standard step
// (where mamba2_replay_steps_faster): every
// step of the cycle the standard step on the checkpoint, in place.
Row run_mamba2(int batch, bool verify, int variant, bool exact = false, bool stepped = false) {
  using replayssm::ops::cuda::Mamba2DecodeArgs;
  const int H = g_mamba2_heads, P = 64, N = 128, G = 8, T = verify ? kT : 1, W = verify ? kW + kT : kW;
  const double S = 4.0 * H * P * N, in_tok = H * P * 2.0 + 2 * G * N * 2.0 + H * 4.0 + H * P * 2.0,
               entry = H * P * 2.0 + G * N * 2.0 + H * 4.0;
  Arena ar;
  Slots sl = make_slots(ar, batch, S);
  Mamba2DecodeArgs a = mamba2_args(ar, batch, T, W, size_t(sl.rot) * batch * (1 + kT), sl.rot);
  a.variant = variant, a.exact = exact;
  const std::vector<Plan> plan = cycle(ar, batch, verify, true);
  auto at = [&](int i) {
    Mamba2DecodeArgs r = a;
    r.slot = sl.read[i % sl.rot];
    r.out_slot = verify ? sl.verify_out[i % sl.rot] : r.slot;
    r.fold_slot = r.slot;
    rotate_log(r, i, sl.rot);
    // Each launch reads another rotation than the one before wrote (every
    // launch takes the next, ≥ 3 of them), as in the decoder, where the
    // append runs just before: both kernels read their first pass early.
    // And than the one two before wrote: both release the next launch at
    // their start, as the decoder's, whose next kernel reads only weights
    // early.
    r.early = true, r.release_early = true;
    return r;
  };
  const auto [std_us, rep_us] = time_standard_and_replay(
      at, plan, [](const Mamba2DecodeArgs& r) { return replayssm::ops::cuda::mamba2_step_cuda(r, g_stream); },
      [stepped](const Mamba2DecodeArgs& r, const Plan&) {
        return stepped ? replayssm::ops::cuda::mamba2_step_cuda(r, g_stream)
                       : replayssm::ops::cuda::mamba2_replay_cuda(r, g_stream);
      });
  double rep_bytes = 0;
  for (const Plan& p : plan) rep_bytes += S + p.n * entry + T * (G * N * 2.0 + H * P * 2.0) + (p.f ? S : 0);
  if (stepped) rep_bytes = plan.size() * ((1 + T) * S + T * in_tok);  // the standard step's
  // Not the one-kernel rows (mamba2-1k); not with --between, whose reads are in the rows' times only.
  if (variant != 1 && !exact && !stepped && g_between_bytes == 0) {
    auto rep = [](const Mamba2DecodeArgs& r) { return replayssm::ops::cuda::mamba2_replay_cuda(r, g_stream); };
    print_last_steps("mamba2", verify, batch, plan, at, std_us, rep);
    if (variant == 0) print_staggered(ar, "mamba2", verify, batch, plan, at, rep);
  }
  // Diagnostic: the state stream alone (a log of one entry, no fold).
  if (!verify && variant == 0 && !exact && !stepped && g_between_bytes == 0 && !g_profile) {
    const Plan one = cycle(ar, batch, false, true)[0];
    const double us = median_us(
        [&](int i) {
          Mamba2DecodeArgs r = at(i);
          r.n_log = one.n_log, r.fold = nullptr, r.max_fold = 0;
          CK(replayssm::ops::cuda::mamba2_replay_cuda(r, g_stream));
        },
        20);
    // … and on contiguous slots 0..B-1 of a buffer of just the batch (no rotation, no verify gaps).
    std::vector<int32_t> seq(batch);
    for (int b = 0; b < batch; ++b) seq[b] = b;
    Mamba2DecodeArgs c = at(0);
    c.early = c.release_early = false;  // every launch here rereads the slots the one before wrote
    c.state = ar.uniform(size_t(batch) * H * P * N, -1.0f, 1.0f);
    c.slot = ar.ints(seq), c.fold_slot = c.slot, c.n_log = one.n_log, c.fold = nullptr, c.max_fold = 0;
    const double us_c = median_us([&](int) { CK(replayssm::ops::cuda::mamba2_replay_cuda(c, g_stream)); }, 20);
    c.out_slot = c.slot;
    const double us_s = median_us([&](int) { CK(replayssm::ops::cuda::mamba2_step_cuda(c, g_stream)); }, 20);
    std::printf("  (mamba2 replay with a 1-entry log, batch %d: %.1f us, %.0f GB/s; contiguous slots: %.1f us, %.0f GB/s; "
                "standard there %.1f us)\n",
                batch, us, batch * S / (us * 1e3), us_c, batch * S / (us_c * 1e3), us_s);
  }
  return {exact ? "mamba2-ex" : variant == 1 ? "mamba2-1k" : variant == 2 ? "mamba2-sp" : "mamba2", verify ? "verify" : "ar", batch, std_us, batch * ((1 + T) * S + T * in_tok),
          rep_us, batch * rep_bytes / plan.size()};
}

// Beams of `beams` sharing a checkpoint, per rotation of sl: the group's
// shared checkpoint (a slot of its own) for each sequence, and the
// groups' first positions (consecutive beams).
struct BeamSlots {
  std::vector<int32_t*> shared;
  std::vector<int32_t> starts;
  int32_t* groups;
};
BeamSlots beam_slots(Arena& ar, const Slots& sl, int batch, int beams) {
  BeamSlots bs;
  for (int r = 0; r < sl.rot; ++r) {
    std::vector<int32_t> own(batch), sh(batch);
    CK(cudaMemcpy(own.data(), sl.read[r], batch * 4, cudaMemcpyDeviceToHost));
    // The group's first beam's first verify slot (unused by the AR beams):
    // no beam's fold (into its own slot) writes what another reads.
    for (int b = 0; b < batch; ++b) sh[b] = own[b - b % beams] + 1;
    bs.shared.push_back(ar.ints(sh));
  }
  for (int b = 0; b < batch; b += beams) bs.starts.push_back(b);
  bs.starts.push_back(batch);
  bs.groups = ar.ints(bs.starts);
  return bs;
}

// Either family's beam arguments for rotation i: standard steps each
// beam's own state in place; replay reads the group's checkpoint and folds
// into each beam's own.
template <typename Args>
Args beam_at(const Args& a, const Slots& sl, const BeamSlots& bs, int i) {
  Args r = a;
  r.out_slot = sl.read[i % sl.rot];
  r.slot = bs.shared[i % sl.rot];
  r.fold_slot = r.out_slot;
  rotate_log(r, i, sl.rot);
  return r;
}
// Replay's fork groups on a step of plan p (none where the window fills:
// every beam folds alone); returns whether the step is grouped.
template <typename Args>
bool beam_groups(Args& r, const Plan& p, bool grouped, const BeamSlots& bs, int beams) {
  const bool together = grouped && p.f == 0;
  r.group_start = together ? bs.groups : nullptr;
  r.n_groups = together ? int(bs.starts.size()) - 1 : 0, r.max_group = beams;
  return together;
}

// Beam search with `beams` beams sharing a checkpoint (a fork group), AR
// with W = 16: standard reads and writes a state per beam and step; replay
// reads the shared checkpoint once per group on the 15 steps without a
// fold, and on the step whose window fills every beam folds into its own
// checkpoint (each block reads the shared checkpoint and writes its
// beam's). grouped = false: every beam decoded alone, reading the shared
// checkpoint itself (what the decoder does without fork groups; its bytes
// counted as requested, though L2 may serve the repeats).
Row run_mamba2_beams(int batch, int variant = 0, int beams = 8, bool grouped = true) {
  using replayssm::ops::cuda::Mamba2DecodeArgs;
  const int kBeams = beams;
  const int H = g_mamba2_heads, P = 64, N = 128, G = 8, W = kW;
  const double S = 4.0 * H * P * N, in_tok = H * P * 2.0 + 2 * G * N * 2.0 + H * 4.0 + H * P * 2.0,
               entry = H * P * 2.0 + G * N * 2.0 + H * 4.0;
  Arena ar;
  Slots sl = make_slots(ar, batch, S);
  Mamba2DecodeArgs a = mamba2_args(ar, batch, 1, W, size_t(sl.rot) * batch * (1 + kT), sl.rot);
  // Per rotation: each beam's own slot (standard; replay's fold target) and
  // the group's shared checkpoint (the group's first beam's slot).
  const BeamSlots bs = beam_slots(ar, sl, batch, kBeams);
  const std::vector<Plan> plan = cycle(ar, batch, false, true);
  auto at = [&](int i) { return beam_at(a, sl, bs, i); };
  const auto [std_us, rep_us] = time_standard_and_replay(
      at, plan,
      [](Mamba2DecodeArgs r) {
        r.slot = r.out_slot;
        return replayssm::ops::cuda::mamba2_step_cuda(r, g_stream);
      },
      [&](Mamba2DecodeArgs r, const Plan& p) {
        const bool together = beam_groups(r, p, grouped, bs, kBeams);
        r.variant = variant != 0 ? variant : together || !grouped ? 0 : 2;
        return replayssm::ops::cuda::mamba2_replay_cuda(r, g_stream);
      });
  double rep_bytes = 0;  // per cycle, the whole batch
  for (const Plan& p : plan)
    rep_bytes += p.f == 0 ? (grouped ? batch / kBeams : batch) * S + batch * (p.n * entry + G * N * 2.0 + H * P * 2.0)
                          : batch * (2 * S + p.n * entry + G * N * 2.0 + H * P * 2.0);
  return {variant == 2 ? "mamba2-fma" : "mamba2", "beam" + std::to_string(kBeams) + (grouped ? "" : "-alone"), batch,
          std_us, batch * (2 * S + in_tok), rep_us, rep_bytes / plan.size()};
}

// GDN arguments at Qwen3-Next shapes over device buffers: `state_slots`
// states, T tokens per sequence, log capacity W, `log_sets` logs of
// batch·W entries (rotate_log).
replayssm::ops::cuda::GdnDecodeArgs gdn_args(Arena& ar, int batch, int T, int W, size_t state_slots, int log_sets = 1) {
  const int Hk = g_gdn_k_heads, Hv = g_gdn_v_heads, dk = 128, dv = 128;
  replayssm::ops::cuda::GdnDecodeArgs a;
  a.batch = batch, a.Hk = Hk, a.Hv = Hv, a.dk = dk, a.dv = dv, a.T = T, a.W = W, a.max_fold = W;
  // Keys of norm ≈ 0.65 and decays in (e^−0.5, 1]: the delta rule stays bounded.
  a.state = ar.uniform(state_slots * Hv * dk * dv, -1.0f, 1.0f);
  a.q = ar.uniform_bf16(size_t(batch) * T * Hk * dk, 0.1f), a.k = ar.uniform_bf16(size_t(batch) * T * Hk * dk, 0.1f);
  a.v = ar.uniform_bf16(size_t(batch) * T * Hv * dv, 1.0f), a.g = ar.uniform(size_t(batch) * T * Hv, -0.5f, 0.0f);
  a.beta = ar.uniform(size_t(batch) * T * Hv, 0.0f, 1.0f), a.o = ar.zeros<uint16_t>(size_t(batch) * T * Hv * dv);
  const size_t E = size_t(log_sets) * batch * W;
  a.log_k = ar.uniform_bf16(E * Hk * dk, 0.1f);
  a.log_u = ar.uniform(E * Hv * dv, -1.0f, 1.0f);
  a.log_g = ar.uniform(E * Hv, -0.5f, 0.0f);
  a.scratch = ar.zeros<float>(replayssm::ops::cuda::gdn_replay_scratch_floats(batch, T, Hv, dv));
  return a;
}

// slice, rows: the streaming blocks' shape (GdnDecodeArgs; 0: the launchers' choice).
Row run_gdn(int batch, bool verify, int slice = 0, int rows = 0, bool exact = false) {
  using replayssm::ops::cuda::GdnDecodeArgs;
  const int Hk = g_gdn_k_heads, Hv = g_gdn_v_heads, dk = 128, dv = 128, T = verify ? kT : 1, W = verify ? kW + kT : kW;
  const double S = 4.0 * Hv * dk * dv, qv = 2 * Hk * dk * 2.0 + Hv * dv * 2.0 + 2 * Hv * 4.0 + Hv * dv * 2.0,
               in_tok = qv + Hk * dk * 2.0, entry = Hk * dk * 2.0 + Hv * dv * 4.0 + Hv * 4.0;
  Arena ar;
  Slots sl = make_slots(ar, batch, S);
  GdnDecodeArgs a = gdn_args(ar, batch, T, W, size_t(sl.rot) * batch * (1 + kT), sl.rot);
  a.slice_cols = slice, a.tile_rows = rows, a.mma = g_gdn_mma, a.l2_ahead = g_gdn_l2_ahead, a.exact = exact;
  const std::vector<Plan> plan = cycle(ar, batch, verify, false);
  auto at = [&](int i) {
    GdnDecodeArgs r = a;
    r.slot = sl.read[i % sl.rot];
    r.out_slot = verify ? sl.verify_out[i % sl.rot] : r.slot;
    r.fold_slot = r.slot;
    rotate_log(r, i, sl.rot);
    // As the decoder's: the first state rows read before the PDL wait —
    // each launch reads another rotation than the one before wrote (every
    // launch takes the next).
    r.early = true;
    return r;
  };
  const auto [std_us, rep_us] = time_standard_and_replay(
      at, plan,
      [](GdnDecodeArgs r) {
        r.variant = g_gdn_step_variant;
        return replayssm::ops::cuda::gdn_step_cuda(r, g_stream);
      },
      [](GdnDecodeArgs r, const Plan&) {
        r.variant = g_gdn_variant;
        return replayssm::ops::cuda::gdn_replay_cuda(r, g_stream);
      });
  if (slice == 0 && rows == 0 && !exact && g_between_bytes == 0) {  // with --between the rows' times hold its reads
    auto rep = [](GdnDecodeArgs r) {
      r.variant = g_gdn_variant;  // the row's kernel
      return replayssm::ops::cuda::gdn_replay_cuda(r, g_stream);
    };
    print_last_steps("gdn", verify, batch, plan, at, std_us, rep);
    print_staggered(ar, "gdn", verify, batch, plan, at, rep);
    if (!verify && batch >= 64 && !g_profile) {  // diagnostic: the state stream alone (the new token's entry only)
      int32_t* one = ar.ints(std::vector<int32_t>(batch, 1));
      const double us = median_us(
          [&](int i) {
            GdnDecodeArgs r = at(i);
            r.n_log = one, r.fold = nullptr, r.max_fold = 0;
            CK(rep(r));
          },
          20);
      std::printf("  (gdn replay with a 1-entry log, batch %d: %.1f us, %.0f GB/s of state)\n", batch, us,
                  batch * S / (us * 1e3));
    }
  }
  double rep_bytes = 0;
  for (const Plan& p : plan) rep_bytes += S + p.n * entry + T * (qv + Hv * dv * 4.0) + (p.f ? S : 0);
  return {exact ? "gdn-ex" : "gdn", verify ? "verify" : "ar", batch, std_us, batch * ((1 + T) * S + T * in_tok), rep_us,
          batch * rep_bytes / plan.size()};
}

// GDN beams (Qwen3-Next shapes), as run_mamba2_beams: standard reads and
// writes a state per beam and step; replay reads the group's checkpoint
// once per group on the steps without a fold (gdn_replay_group.cu), and on
// the step whose window fills every beam folds alone into its own;
// grouped = false: every beam alone, reading the shared checkpoint itself.
Row run_gdn_beams(int batch, int beams = 8, bool grouped = true) {
  using replayssm::ops::cuda::GdnDecodeArgs;
  const int Hk = g_gdn_k_heads, Hv = g_gdn_v_heads, dk = 128, dv = 128, W = kW;
  const double S = 4.0 * Hv * dk * dv, qv = 2 * Hk * dk * 2.0 + Hv * dv * 2.0 + 2 * Hv * 4.0 + Hv * dv * 2.0,
               in_tok = qv + Hk * dk * 2.0, entry = Hk * dk * 2.0 + Hv * dv * 4.0 + Hv * 4.0;
  Arena ar;
  Slots sl = make_slots(ar, batch, S);
  GdnDecodeArgs a = gdn_args(ar, batch, 1, W, size_t(sl.rot) * batch * (1 + kT), sl.rot);
  const BeamSlots bs = beam_slots(ar, sl, batch, beams);
  const std::vector<Plan> plan = cycle(ar, batch, false, false);
  auto at = [&](int i) { return beam_at(a, sl, bs, i); };
  const auto [std_us, rep_us] = time_standard_and_replay(
      at, plan,
      [](GdnDecodeArgs r) {
        r.slot = r.out_slot;
        return replayssm::ops::cuda::gdn_step_cuda(r, g_stream);
      },
      [&](GdnDecodeArgs r, const Plan& p) {
        beam_groups(r, p, grouped, bs, beams);
        return replayssm::ops::cuda::gdn_replay_cuda(r, g_stream);
      });
  if (batch >= 64 && !g_profile) {  // diagnostic: single steps of the cycle
    auto step_us = [&](const Plan& p, bool together) {
      return median_us(
          [&](int i) {
            GdnDecodeArgs r = at(i);
            r.n_log = p.n_log, r.fold = p.f ? p.fold : nullptr, r.max_fold = p.f ? r.W : 0;
            beam_groups(r, p, together, bs, beams);
            CK(replayssm::ops::cuda::gdn_replay_cuda(r, g_stream));
          },
          20);
    };
    std::printf("  (gdn beam%d %s, batch %d: a %d-entry log %.1f us, a %d-entry log %.1f us; the fold step %.1f us)\n",
                beams, grouped ? "grouped" : "alone", batch, plan[0].n, step_us(plan[0], grouped),
                plan[plan.size() - 2].n, step_us(plan[plan.size() - 2], grouped), step_us(plan.back(), false));
  }
  double rep_bytes = 0;  // per cycle, the whole batch
  for (const Plan& p : plan)
    rep_bytes += (p.f == 0 ? (grouped ? batch / beams : batch) * S : 2.0 * batch * S) +
                 batch * (p.n * entry + qv + Hv * dv * 4.0);
  return {"gdn", "beam" + std::to_string(beams) + (grouped ? "" : "-alone"), batch, std_us, batch * (2 * S + in_tok),
          rep_us, rep_bytes / plan.size()};
}

// Chunk scans: kScanT tokens per sequence in one launch against kScanT
// one-token standard steps over the same state (the path a prompt took a
// token at a time), slots rotated per launch as the decode rows do.
constexpr int kScanT = 256;

struct ScanRow {
  std::string family;
  int batch;
  double scan_us, steps_us, bytes, flops;  // bytes and FLOPs of the scan
};

// Median µs of scan(slots) (a chunk of kScanT tokens) and of kScanT
// step(slots) calls, each launch on the next rotation of slots.
template <typename ScanFn, typename StepFn>
std::pair<double, double> time_scan_and_steps(const Slots& sl, ScanFn&& scan, StepFn&& step) {
  const double scan_us = median_us([&](int i) { CK(scan(sl.read[i % sl.rot])); }, 2);
  const double steps_us = median_us(
      [&](int i) {
        for (int t = 0; t < kScanT; ++t) CK(step(sl.read[(i * kScanT + t) % sl.rot]));
      },
      1);
  return {scan_us, steps_us};
}

ScanRow run_mamba2_scan(int batch) {
  using namespace replayssm::ops::cuda;
  const int H = 128, P = 64, N = 128, G = 8, T = kScanT;
  const int64_t HP = int64_t(H) * P, GN = int64_t(G) * N, ld = HP + 2 * GN;
  const double S = 4.0 * H * P * N;
  Arena ar;
  Slots sl = make_slots(ar, batch, S);
  Mamba2DecodeArgs st = mamba2_args(ar, batch, 1, kW, size_t(sl.rot) * batch * (1 + kT));
  Mamba2ScanArgs a;
  a.batch = batch, a.H = H, a.P = P, a.N = N, a.G = G, a.T = T;
  a.tokens_per_sum = g_scan_sum, a.tile_rows = g_scan_rows;
  a.A_log = st.A_log, a.D = st.D, a.dt_bias = st.dt_bias, a.state = st.state;
  uint16_t* xbc = ar.uniform_bf16(size_t(batch) * T * ld, 1.0f);
  a.x = xbc, a.ldx = ld, a.Bm = xbc + HP, a.Cm = xbc + HP + GN, a.ldbc = ld;
  a.dt_raw = ar.uniform_bf16(size_t(batch) * T * H, 1.0f), a.lddt = H;
  a.y = ar.zeros<uint16_t>(size_t(batch) * T * HP), a.ldy = HP;
  const auto [scan_us, steps_us] = time_scan_and_steps(
      sl,
      [&](int32_t* slots) {
        a.slot = a.out_slot = slots;
        return mamba2_scan_cuda(a, g_stream);
      },
      [&](int32_t* slots) {
        Mamba2DecodeArgs r = st;
        r.slot = r.out_slot = slots;
        return mamba2_step_cuda(r, g_stream);
      });
  const double per_tok = HP * 2.0 + 2 * GN * 2.0 + H * 2.0 + HP * 2.0;  // x, B, C, dt in; y out
  return {"mamba2", batch, scan_us, steps_us, batch * (2 * S + T * per_tok), 5.0 * batch * H * P * N * T};
}

ScanRow run_gdn_scan(int batch) {
  using namespace replayssm::ops::cuda;
  const int Hk = 16, Hv = 32, dk = 128, dv = 128, T = kScanT;
  const double S = 4.0 * Hv * dk * dv;
  Arena ar;
  Slots sl = make_slots(ar, batch, S);
  GdnScanArgs a;
  a.batch = batch, a.Hk = Hk, a.Hv = Hv, a.dk = dk, a.dv = dv, a.T = T;
  a.state = ar.uniform(size_t(sl.rot) * batch * (1 + kT) * Hv * dk * dv, -1.0f, 1.0f);
  // As run_gdn's inputs: keys of norm ≈ 0.65 and decays in (e^−0.5, 1].
  a.q = ar.uniform_bf16(size_t(batch) * T * Hk * dk, 0.1f), a.k = ar.uniform_bf16(size_t(batch) * T * Hk * dk, 0.1f);
  a.v = ar.uniform_bf16(size_t(batch) * T * Hv * dv, 1.0f), a.g = ar.uniform(size_t(batch) * T * Hv, -0.5f, 0.0f);
  a.beta = ar.uniform(size_t(batch) * T * Hv, 0.0f, 1.0f), a.o = ar.zeros<uint16_t>(size_t(batch) * T * Hv * dv);
  GdnDecodeArgs st;
  st.batch = batch, st.Hk = Hk, st.Hv = Hv, st.dk = dk, st.dv = dv, st.T = 1;
  st.state = a.state, st.q = a.q, st.k = a.k, st.v = a.v, st.g = a.g, st.beta = a.beta, st.o = a.o;
  const auto [scan_us, steps_us] = time_scan_and_steps(
      sl,
      [&](int32_t* slots) {
        a.slot = a.out_slot = slots;
        return gdn_scan_cuda(a, g_stream);
      },
      [&](int32_t* slots) {
        GdnDecodeArgs r = st;
        r.slot = r.out_slot = slots;
        return gdn_step_cuda(r, g_stream);
      });
  const double per_tok = 2 * Hk * dk * 2.0 + Hv * dv * 2.0 + 2 * Hv * 4.0 + Hv * dv * 2.0;  // q, k, v, g, β in; o out
  return {"gdn", batch, scan_us, steps_us, batch * (2 * S + T * per_tok), 7.0 * batch * Hv * dk * dv * T};
}

}  // namespace

// --profile FAMILY WORK BATCH [VARIANT]: the standard kernel and the replay
// cycle of one row of the table (VARIANT: the replay's
// Mamba2DecodeArgs::variant or GdnDecodeArgs::variant), twice each,
// untimed (for ncu / nsys).
int profile(int argc, char** argv) {
  const std::string fam = argc > 2 ? argv[2] : "", work = argc > 3 ? argv[3] : "";
  const int batch = argc > 4 ? std::atoi(argv[4]) : 0, variant = argc > 5 ? std::atoi(argv[5]) : 0;
  const int max_variant = fam == "gdn" ? 4 : 5;
  if ((fam == "mamba2" || fam == "gdn") && (variant < 0 || variant > max_variant))
    std::fprintf(stderr, "VARIANT: 0..%d for %s, not %d\n", max_variant, fam.c_str(), variant);
  if ((fam != "mamba2" && fam != "gdn") || (work != "ar" && work != "verify" && work != "beams") || batch < 1 ||
      variant < 0 || variant > max_variant || (work == "beams" && fam != "gdn")) {
    std::fprintf(stderr, "usage: replayssm_ssm_bench --profile mamba2|gdn ar|verify BATCH [VARIANT]\n"
                         "       replayssm_ssm_bench --profile gdn beams BATCH   (beams of 8, grouped)\n");
    return 2;
  }
  g_profile = true;
  if (work == "beams") run_gdn_beams(batch);
  else if (fam == "gdn") g_gdn_variant = variant, run_gdn(batch, work == "verify");
  else run_mamba2(batch, work == "verify", variant);
  return 0;
}

// --gdn-shapes: the GDN streaming kernels at each block shape (columns per
// block × rows per warp per pass), at batch 64, 256, 512 or the given
// batches — the launchers' defaults come from this table.
int gdn_shapes(double copy_gbs, const std::vector<int>& batches) {
  std::printf("GDN block shapes (slice columns x rows per warp): us per step, %% of copy bandwidth\n");
  std::printf("%-7s %5s %5s %5s | %9s %6s | %9s %6s | %7s\n", "work", "batch", "slice", "rows", "std us", "%copy",
              "replay us", "%copy", "rep/std");
  for (bool verify : {false, true})
    for (int batch : batches)
      for (int slice : {128, 64})
        for (int rows : {4, 8}) {
          const Row r = run_gdn(batch, verify, slice, rows);
          const double sg = r.std_bytes / (r.std_us * 1e3), rg = r.rep_bytes / (r.rep_us * 1e3);
          std::printf("%-7s %5d %5d %5d | %9.1f %5.0f%% | %9.1f %5.0f%% | %6.2fx\n", r.workload.c_str(), batch, slice, rows,
                      r.std_us, 100 * sg / copy_gbs, r.rep_us, 100 * rg / copy_gbs, r.std_us / r.rep_us);
          std::fflush(stdout);
        }
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--profile") return profile(argc, argv);
  const bool shapes = argc > 1 && std::string(argv[1]) == "--gdn-shapes";
  const std::string only = argc > 2 && std::string(argv[1]) == "--only" ? argv[2] : "";
  int graph = 1;  // g_graph (--graph 0|1), once the bandwidth probes (launched alone) are done
  if (argc > 1 && (std::string(argv[1]) == "--only" || shapes)) {
    if (!shapes && only != "mamba2" && only != "mamba2-ex" && only != "gdn" && only != "gdn-ex" && only != "scan" &&
        only != "beams") {
      std::fprintf(stderr, "--only: mamba2, mamba2-ex, gdn, gdn-ex, scan or beams, not '%s'\n",
                   argc > 2 ? argv[2] : "");
      return 2;
    }
    // Knobs for A/B runs: NAME VALUE pairs (--scan-knobs takes two values).
    auto bad = [] {
      std::fprintf(
          stderr,
          "usage: replayssm_ssm_bench --only mamba2|mamba2-ex|gdn|gdn-ex|scan|beams [--gdn-mma 1|0|-1] [--gdn-variant "
          "0..4]\n"
          "                           [--gdn-l2-ahead -1..4] [--gdn-step-variant 0..3] [--mamba2-variant 0..5]\n"
          "                           [--batches B1,B2,...] [--scan-knobs TOKENS_PER_SUM TILE_ROWS] [--graph 0|1]\n"
          "                           [--mamba2-heads H] [--gdn-heads HK,HV] [--between MB]\n"
          "       replayssm_ssm_bench --gdn-shapes [--gdn-mma 1|0|-1] [--gdn-variant 0..4] [--gdn-l2-ahead -1..4]\n"
          "                           [--gdn-step-variant 0..3] [--batches B1,...] [--graph 0|1]\n");
      return 2;
    };
    for (int i = shapes ? 2 : 3; i < argc; i += 2) {
      const std::string k = argv[i];
      if (i + 1 >= argc) return bad();
      const char* v = argv[i + 1];
      if (k == "--gdn-mma")
        g_gdn_mma = std::atoi(v);
      else if (k == "--gdn-variant")
        g_gdn_variant = std::atoi(v);
      else if (k == "--gdn-l2-ahead")
        g_gdn_l2_ahead = std::atoi(v);
      else if (k == "--graph")
        graph = std::atoi(v);
      else if (k == "--gdn-step-variant")
        g_gdn_step_variant = std::atoi(v);
      else if (k == "--mamba2-variant" && !shapes)
        g_mamba2_variant = std::atoi(v);
      else if (k == "--between" && !shapes)
        g_between_bytes = size_t(std::max(0, std::atoi(v))) << 20;
      else if (k == "--mamba2-heads" && !shapes)
        g_mamba2_heads = std::atoi(v);
      else if (k == "--gdn-heads") {
        if (std::sscanf(v, "%d,%d", &g_gdn_k_heads, &g_gdn_v_heads) != 2 || g_gdn_k_heads < 1 ||
            g_gdn_v_heads < g_gdn_k_heads || g_gdn_v_heads % g_gdn_k_heads != 0 || g_gdn_v_heads > 256) {
          std::fprintf(stderr, "--gdn-heads: HK,HV with HV a multiple of HK, at most 256, not '%s'\n", v);
          return 2;
        }
      } else if (k == "--batches") {
        if (!parse_batches(v, &g_batches)) {
          std::fprintf(stderr, "--batches: a comma-separated list of batch sizes 1..4096, not '%s'\n", v);
          return 2;
        }
      } else if (k == "--scan-knobs" && only == "scan" && i + 2 < argc) {
        g_scan_sum = std::atoi(v), g_scan_rows = std::atoi(argv[i + 2]);
        ++i;
      } else {
        return bad();
      }
    }
    // Each knob in its range, the one out of it named.
    const struct {
      const char* name;
      int value, lo, hi;
    } knobs[] = {{"--gdn-mma", g_gdn_mma, -1, 1},
                 {"--gdn-variant", g_gdn_variant, 0, 4},
                 {"--gdn-l2-ahead", g_gdn_l2_ahead, -1, 4},
                 {"--gdn-step-variant", g_gdn_step_variant, 0, 3},
                 {"--mamba2-variant", g_mamba2_variant, 0, 5},
                 {"--mamba2-heads", g_mamba2_heads % 8 == 0 ? g_mamba2_heads : 0, 8, 512},
                 {"--graph", graph, 0, 1}};
    for (const auto& k : knobs)
      if (k.value < k.lo || k.value > k.hi) {
        std::fprintf(stderr, "%s: %d..%d, not %d\n", k.name, k.lo, k.hi, k.value);
        return bad();
      }
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  // Copy bandwidth: device-to-device, counting read + write.
  const size_t copy_n = size_t(1) << 30;
  void *src, *dst;
  CK(cudaMalloc(&src, copy_n));
  CK(cudaMalloc(&dst, copy_n));
  const double copy_us = median_us([&](int) { CK(cudaMemcpyAsync(dst, src, copy_n, cudaMemcpyDeviceToDevice)); }, 5);
  const double copy_gbs = 2.0 * copy_n / (copy_us * 1e3);
  // Read-only bandwidth, two ways (read_probe.cu).
  float* sink;
  CK(cudaMalloc(reinterpret_cast<void**>(&sink), 4));
  const double ld_us = median_us([&](int) { CK(replayssm::bench::read_ld(src, copy_n, sink, prop.multiProcessorCount)); }, 5);
  const double bulk_us =
      median_us([&](int) { CK(replayssm::bench::read_bulk(src, copy_n, sink, prop.multiProcessorCount)); }, 5);
  const double ld_gbs = copy_n / (ld_us * 1e3), bulk_gbs = copy_n / (bulk_us * 1e3);
  CK(cudaFree(sink));
  // The standard verify's mix, one read and kT writes (fanout_probe.cu):
  // a kT-th of the one buffer read, written kT times over the other.
  const size_t fan_n = copy_n / kT;
  const double fan_us =
      median_us([&](int) { CK(replayssm::bench::fanout_copy(src, dst, fan_n, kT, prop.multiProcessorCount)); }, 5);
  const double fan_gbs = (1 + kT) * double(fan_n) / (fan_us * 1e3);
  CK(cudaFree(src));
  CK(cudaFree(dst));
  std::printf("%s: measured copy bandwidth %.0f GB/s (read + write); read-only %.0f GB/s (loads), %.0f GB/s (bulk copy); "
              "one read + %d writes %.0f GB/s\n",
              prop.name, copy_gbs, ld_gbs, bulk_gbs, kT, fan_gbs);
  // The timed runs' stream and --between's buffers, released on every way out of main.
  struct Release {
    ~Release() {
      if (g_stream != nullptr) cudaStreamDestroy(g_stream);
      cudaFree(const_cast<void*>(g_between_buf)), cudaFree(g_between_sink);
    }
  } release;
  if (g_between_bytes > 0) {  // --between: a buffer of its own, past the slots
    void* buf = nullptr;
    CK(cudaMalloc(&buf, g_between_bytes));
    CK(cudaMemset(buf, 0, g_between_bytes));
    CK(cudaMalloc(reinterpret_cast<void**>(&g_between_sink), 4));
    g_between_buf = buf, g_sms = prop.multiProcessorCount;
    const double us =
        median_us([&](int) { CK(replayssm::bench::read_ld(buf, g_between_bytes, g_between_sink, g_sms)); }, 5);
    std::printf("(after each timed SSM launch a read of %zu MB: %.1f us alone, in every row's times)\n",
                g_between_bytes >> 20, us);
  }
  if (graph != 0) {
    g_graph = true;
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  }
  std::printf("(%s)\n", g_graph ? "each timed run of launches as one CUDA graph" : "launched from the host");
  if (shapes) return gdn_shapes(copy_gbs, g_batches.empty() ? std::vector<int>{64, 256, 512} : g_batches);
  std::printf("ar: W = %d; verify: T = %d drafts, %d accepted per step, fold every %d steps\n", kW, kT, kAccepted,
              kVerifyCycle);
  std::printf(
      "(where the replay layout takes one token through the standard step — the decoder's rule,\n"
      " mamba2_replay_steps_faster — the ar row's replay is that step, every token folded; ar-kernel: the\n"
      " output-only kernels' cycle there)\n\n");
  std::printf("%-9s %-11s %6s | %9s %7s %6s | %9s %7s %6s | %7s %7s\n", "family", "work", "batch", "std us", "GB/s",
              "%copy", "replay us", "GB/s", "%copy", "rep/std", "bytes");
  std::string json = "{\"device\": \"" + std::string(prop.name) + "\", \"copy_gbs\": " + std::to_string(copy_gbs) +
                     ", \"read_ld_gbs\": " + std::to_string(ld_gbs) +
                     ", \"read_bulk_gbs\": " + std::to_string(bulk_gbs) +
                     ", \"fanout_gbs\": " + std::to_string(fan_gbs) + ", \"graphs\": " + (g_graph ? "true" : "false") +
                     ", \"mamba2\": {\"H\": " + std::to_string(g_mamba2_heads) +
                     ", \"P\": 64, \"N\": 128, \"G\": 8}, \"gdn\": {\"Hk\": " + std::to_string(g_gdn_k_heads) +
                     ", \"Hv\": " + std::to_string(g_gdn_v_heads) +
                     ", \"dk\": 128, \"dv\": 128}, \"W\": 16, \"T\": 4, \"accepted\": 2, \"rows\": [";
  bool first = true;
  // mamba2-1k: the replay path as one kernel (no split of the log's part),
  // kept in the table to show what the split buys; mamba2-sp: the split
  // path (the log's part a kernel of its own, variant 2), which the fused
  // kernel (mamba2_replay_fused.cu) replaced at batch ≥ 64.
  auto print_row = [&](const Row& r) {
    const double sg = r.std_bytes / (r.std_us * 1e3), rg = r.rep_bytes / (r.rep_us * 1e3);
    const double speed = r.std_us / r.rep_us, bytes = r.std_bytes / r.rep_bytes;
    std::printf("%-9s %-11s %6d | %9.1f %7.0f %5.0f%% | %9.1f %7.0f %5.0f%% | %6.2fx %6.2fx\n", r.family.c_str(),
                r.workload.c_str(), r.batch, r.std_us, sg, 100 * sg / copy_gbs, r.rep_us, rg, 100 * rg / copy_gbs,
                speed, bytes);
    char row[512];
    std::snprintf(row, sizeof row,
                  "%s\n  {\"family\": \"%s\", \"workload\": \"%s\", \"batch\": %d, \"standard_us\": %.2f, "
                  "\"standard_gbs\": %.1f, \"standard_frac_copy\": %.3f, \"replay_us\": %.2f, \"replay_gbs\": "
                  "%.1f, \"replay_frac_copy\": %.3f, \"replay_over_standard\": %.3f, "
                  "\"standard_bytes_over_replay_bytes\": %.3f}",
                  first ? "" : ",", r.family.c_str(), r.workload.c_str(), r.batch, r.std_us, sg, sg / copy_gbs,
                  r.rep_us, rg, rg / copy_gbs, speed, bytes);
    json += row;
    first = false;
  };
  if (only.empty() || only == "beams") {
    for (int batch : {8, 64, 256, 512}) print_row(run_mamba2_beams(batch));
    // mamba2-fma: the fork groups' pass on FMAs (variant 2), as before the tensor cores.
    for (int batch : {64, 256, 512}) print_row(run_mamba2_beams(batch, 2));
    // What the groups buy over decoding each beam alone (the decoder's
    // choice), at the widths searches use.
    for (auto [beams, batch] : {std::pair{2, 2}, std::pair{4, 4}, std::pair{4, 64}, std::pair{8, 8}, std::pair{8, 64},
                                std::pair{8, 256}}) {
      if (beams != 8) print_row(run_mamba2_beams(batch, 0, beams));
      print_row(run_mamba2_beams(batch, 0, beams, false));
    }
    // GDN (Qwen3-Next shapes): the same, grouped and alone.
    for (auto [beams, batch] : {std::pair{2, 2}, std::pair{4, 4}, std::pair{8, 8}, std::pair{2, 64}, std::pair{4, 64},
                                std::pair{8, 64}, std::pair{8, 256}}) {
      print_row(run_gdn_beams(batch, beams));
      print_row(run_gdn_beams(batch, beams, false));
    }
  }
  // mamba2-ex: exact replay (the sequential recurrence, n_log × a step's
  // FLOPs, no dual form) where a batch is too small to stream the state at
  // bandwidth: is it the faster replay there?
  for (bool verify : {false, true})
    for (int batch : {1, 2, 8, 32})
      if (only.empty() || only == "mamba2-ex") print_row(run_mamba2(batch, verify, 0, true));
  // gdn-ex: the same for GDN (the standard step's kernels over the log).
  for (bool verify : {false, true})
    for (int batch : {1, 8, 64})
      if (only.empty() || only == "gdn-ex") print_row(run_gdn(batch, verify, 0, 0, true));
  const std::vector<int> row_batches = g_batches.empty() ? std::vector<int>{1, 8, 64, 256, 512} : g_batches;
  for (const char* family : {"mamba2", "mamba2-sp", "mamba2-1k", "gdn"})
    for (bool verify : {false, true})
      for (int batch : row_batches) {
        const std::string fam = family;
        if (!only.empty() && fam != only && !(fam == "mamba2-sp" && only == "mamba2")) continue;
        if (fam == "mamba2-sp" && batch < 64) continue;
        Row r = fam == "gdn" ? run_gdn(batch, verify)
                             : run_mamba2(batch, verify,
                                          fam == "mamba2"      ? g_mamba2_variant
                                          : fam == "mamba2-sp" ? 2
                                                               : 1);
        // Where the replay layout takes the standard step for one token
        // (the decoder's rule), its "ar" row is that; the output-only
        // kernels' cycle beside it as "ar-kernel".
        if (!verify && steps_faster(fam, batch)) {
          print_row(run_mamba2(batch, false, g_mamba2_variant, false, true));
          r.workload = "ar-kernel";
        }
        print_row(r);
      }
  json += "\n], \"scan_tokens\": " + std::to_string(kScanT) + ", \"scan_rows\": [";
  if (only.empty() || only == "scan") {
    std::printf("\nchunk scans: %d tokens per sequence in one launch, against %d one-token standard steps\n", kScanT, kScanT);
    std::printf("%-9s %6s | %10s %8s %7s %8s | %10s | %7s\n", "family", "batch", "scan us", "us/token", "GB/s",
                "TFLOP/s", "steps us", "steps/scan");
    first = true;
    for (const char* family : {"mamba2", "gdn"})
      for (int batch : {1, 8, 64}) {
        const ScanRow r = std::string(family) == "gdn" ? run_gdn_scan(batch) : run_mamba2_scan(batch);
        const double gbs = r.bytes / (r.scan_us * 1e3), tflops = r.flops / (r.scan_us * 1e6);
        std::printf("%-9s %6d | %10.1f %8.3f %7.0f %8.2f | %10.1f | %6.2fx\n", r.family.c_str(), r.batch, r.scan_us,
                    r.scan_us / kScanT, gbs, tflops, r.steps_us, r.steps_us / r.scan_us);
        std::fflush(stdout);
        char row[320];
        std::snprintf(row, sizeof row,
                      "%s\n  {\"family\": \"%s\", \"batch\": %d, \"scan_us\": %.2f, \"scan_gbs\": %.1f, \"scan_tflops\": %.3f, "
                      "\"steps_us\": %.2f, \"steps_over_scan\": %.3f}",
                      first ? "" : ",", r.family.c_str(), r.batch, r.scan_us, gbs, tflops, r.steps_us, r.steps_us / r.scan_us);
        json += row;
        first = false;
      }
  }
  json += "\n]}\n";
  if (argc > 1 && only.empty()) {
    FILE* f = std::fopen(argv[1], "w");
    if (f == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", argv[1]);
      return 1;
    }
    std::fputs(json.c_str(), f);
    std::fclose(f);
  }
  return 0;
}
