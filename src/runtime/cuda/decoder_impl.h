// Decoder's insides (decoder.h), shared by the files that implement it:
// the step plan's fields, each stateful layer's buffers, and Decoder::Impl
// (the buffers, the plan and the launch sequence of one step).
//   decoder.cpp         — create, reset, the host's plan of a step or verify, graphs;
//   decoder_blocks.cpp  — the launches of one step, block by block;
//   decoder_ragged.cpp  — step_ragged(): a step whose sequences take their own numbers of tokens;
//   decoder_fork.cpp    — reorder(): forks;
//   decoder_rewind.cpp  — rewind(): going back within the logs;
//   decoder_readout.cpp — logits rows and top log-probabilities of the last step.
#pragma once

#include "runtime/cuda/decoder.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backend/cuda/forward.h"
#include "ops/cuda/attention_decode.h"
#include "ops/cuda/attention_prefill.h"
#include "ops/cuda/conv1d.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/gdn_decode.h"
#include "ops/cuda/gdn_scan.h"
#include "ops/cuda/gemm.h"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/mamba2_scan.h"
#include "ops/cuda/norm.h"
#include "ops/cuda/rope.h"
#include "ops/cuda/sampling.h"
#include "ops/cuda/ssm_append.h"
#include "ops/cuda/seq_copy.h"
#include "backend/cuda/cuda_status.h"
#include "runtime/cuda/slot_pool.h"

namespace replayssm::cuda {

namespace oc = replayssm::ops::cuda;

// The plan: one int32 array per field in one buffer, each with room for
// every row of a step (batch × the most tokens per sequence) plus one. Per
// row r = b·T + t (a ragged step: cu_rows[b] + t): kTokens, kRowPos,
// kRowSeq, kMEntry, kGEntry, kOutSlot. Per sequence b: the rest (kCuRows
// and kCommitRows have B + 1 entries).
// A comment a group of fields, aligned by hand.
// clang-format off
enum PlanField {
  kTokens, kRowPos, kRowSeq,      // the step's rows
  kSeqPos, kSeqLen, kCuRows,      // per sequence: first new position, rows attended, first row (b·T)
  kLastRow,                       // a ragged step: each sequence's last row, which the LM head reads
  kMEntry, kMLog, kMFold,         // Mamba2 layers: log entry (standard, and replay's standard step: compact
                                  // row; −1: a ragged step's scan row) of each new row; entries; fold
  kGEntry, kGLog, kGFold,         // Gated DeltaNet layers, likewise
  kMSlot, kGSlot,                 // state or checkpoint slot each sequence reads (Mamba2, GDN layers)
  kMFoldSlot, kGFoldSlot,         // where a fold writes (replay: a fresh slot where others read the old one)
  kOutSlot, kWinSlot,             // where each row's state goes (standard); conv window = b
  kMMoveFrom, kMMoveCount,        // the post-fold log moves (replay)
  kGMoveFrom, kGMoveCount,
  kCommitRows, kCommitCount,      // the last verify's rows b·T and accepted count, rolled into the windows
  // reorder(): per sequence b, the source sequence and what to copy from it
  // (0 where b keeps its own): 1, K/V rows, Mamba2 / GDN log entries; the
  // standard layout's state slots from and to.
  kForkSrc, kForkDst, kForkOne, kForkKv, kForkMLog, kForkGLog, kForkStFrom, kForkStTo,
  // options.rewind: b·W, where sequence b's log entries start (B + 1
  // entries); rewind()'s log lengths, which the rebuilt windows roll over.
  kLogBase, kRewindM, kRewindG,
  // recompute: per sequence, a live state ↔ sparse checkpoint copy (1 or
  // 0), its state slots and conv window blocks from and to.
  kCkOne, kCkFrom, kCkTo, kCkWinFrom, kCkWinTo,
  // How far each sequence's checkpoint advances this step (Mamba2, GDN):
  // its fold, or its family's (options.rewind rolls the checkpoint window so far).
  kMRoll, kGRoll,
  // Fork groups (replay, plain steps), Mamba2 and GDN: the decode order
  // (position v is sequence kMSeq[v]) and each group's first position
  // (groups + 1 entries; the groups past the step's count are empty).
  kMSeq, kMGroup, kGSeq, kGGroup,
  // A ragged step: each sequence's first row where the decode kernels take
  // it (one token, room in its log), else −1; and the rows the chunk scans
  // take of each (0 for those).
  kDecRow, kScanRows,
  kPlanFields
};
// clang-format on

// The most sequences a fork group takes (decoder_fork.cpp): a Mamba2
// block's outputs on tensor cores at T = 1 (Mamba2DecodeArgs::max_group);
// a GDN block's 16 sums in registers (GdnDecodeArgs::max_group).
constexpr int kForkGroupMax = 8;

#define RSSM_CU(expr, what) RSSM_RETURN_IF_ERROR(cuda_status((expr), "cuda decode", (what)))


// Buffers of one stateful layer (CacheSpec order).
struct LayerState {
  float* state = nullptr;       // (B, heads, rows, cols): the state (standard) or checkpoint (replay)
  uint16_t* window = nullptr;   // (B, K−1, C) conv window
  uint16_t* log_x = nullptr;    // Mamba2 log (B, W, H·P)
  uint16_t* log_B = nullptr;    //            (B, W, G·N)
  float* log_dt = nullptr;      //            (B, W, H)
  uint16_t* log_k = nullptr;    // GDN log    (B, W, Hk·dk)
  float* log_u = nullptr;       //            (B, W, Hv·dv)
  float* log_g = nullptr;       //            (B, W, Hv)
  uint16_t* pending = nullptr;  // speculation: a verify's pre-conv rows (B·T, C), until accept
  uint16_t* conv_log = nullptr; // options.rewind: each log entry's pre-conv row (B, W, C)
  uint16_t* ck_window = nullptr;//                 the conv window at the checkpoint (B, K−1, C);
                                //   recompute: at the sparse checkpoint, blocks B..2B−1 of window
  oc::PagedKv kv;               // attention
  uint16_t* kv_rows = nullptr;  // sequence b's K/V rows are a block of kv_block rows of kv.row_stride
  int64_t kv_block = 0;
  int64_t slot_bytes = 0, window_seq_bytes = 0;  // one slot's state, one sequence's window
  int64_t conv_row = 0;                          // one pre-conv row (C bf16)
  int64_t log_row[3] = {};                       // the log arrays' entry bytes (x|B|dt or k|u|g)
};

struct Decoder::Impl {
  const DeviceModel& m;
  DecoderOptions opt;
  cudaStream_t stream = nullptr;
  std::unique_ptr<oc::Gemm> gemm = std::make_unique<oc::Gemm>();  // released before the stream it is bound to
  std::vector<void*> allocs;
  std::vector<LayerState> layers;
  int32_t* plan = nullptr;        // device
  int32_t* plan_host = nullptr;   // pinned
  int32_t* next = nullptr;        // device (rows of logits)
  int32_t* next_host = nullptr;   // pinned
  // Activations, batch × max_chunk rows each.
  float* h = nullptr;             // fp32 residual stream (B, hidden)
  uint16_t* xn = nullptr;         // normed input of a block (B, hidden)
  uint16_t* d = nullptr;          // a block's output (B, hidden)
  uint16_t* proj = nullptr;       // fused input projection (B, widest in)
  uint16_t* y = nullptr;          // mixer output before out_proj (B, widest)
  uint16_t *cx = nullptr, *cB = nullptr, *cC = nullptr;  // Mamba2 compact x, B, C
  float* cdt = nullptr;
  uint16_t *gq = nullptr, *gk = nullptr, *gv = nullptr;  // GDN dense q, k, v
  float *gg = nullptr, *gbeta = nullptr;
  uint16_t *aq = nullptr, *ak = nullptr, *av = nullptr;  // attention q, k, v (qk-norm models)
  float* mamba_scratch = nullptr;
  float* gdn_scratch = nullptr;   // replay with forks: the GDN fork groups' checkpoint sums (one token a sequence)
  float* attn_scratch = nullptr;
  float* logits = nullptr;        // (B, B·spec_tokens, or B·max_chunk with all_logits; vocab) fp32
  uint16_t* xconv = nullptr;      // chunked steps: post-conv rows (R, widest conv)
  float* inv_freq = nullptr;
  int32_t* page_table = nullptr;  // (B, pages per sequence): sequence b owns pages b·n .. b·n + n − 1
  int pages_per_seq = 0;
  // graph_key(T, fold, verify, commit, scan, m_groups, g_groups, steps) → the captured step
  std::map<int64_t, cudaGraphExec_t> graphs;
  std::set<int64_t> ran_eager;
  int64_t rows_cap = 0;           // rows a step may have: batch × max(max_chunk, spec_tokens)
  int log_limit = 0;              // tokens a step through the decode kernels takes at most (replay: < window)
  int slots_per_seq = 1;          // standard layout: spec_tokens + 1 with speculation, ≥ 2 with forks
  // State slots per SSM layer: replay's pool; else batch × slots_per_seq,
  // then (recompute) a sparse checkpoint per sequence from sparse_base,
  // then the scratch slot a feed's dropped rows write to.
  int64_t state_slots = 0, sparse_base = 0;
  int32_t scratch_slot = 0;
  bool recompute = false;
  // Each sequence's tokens (recompute; replay with forks — empty otherwise);
  // recompute: its sparse checkpoint's position
  // (−1: none since a fork) and the position whose multiple of W the next
  // checkpoint must pass.
  std::vector<std::vector<int32_t>> toks;
  std::vector<int64_t> ck_pos, ck_mark;
  SlotPool m_pool, g_pool;        // replay: checkpoint slots of the Mamba2 / GDN layers (2 × batch with forks)
  void* fork_temp = nullptr;      // reorder()'s staging: the largest per-layer array a fork copies
  int64_t last_rows = 0;          // logits rows the last step left
  // The step being enqueued: its rows (batch·T, or a ragged step's Σ
  // count) and whether it is ragged (rows by kCuRows; every conv and
  // attention through their prefill kernels, the SSM layers' chunks
  // through the scans and their one-token sequences through the decode
  // kernels; the LM head reads kLastRow).
  int64_t step_rows = 0;
  bool ragged = false;
  // A ragged step's two parts: sequences through the chunk scans (a prompt
  // chunk), through the decode kernels (one token: kDecRow).
  bool ragged_scan = false, ragged_decode = false;
  // Its fork groups (kMSeq, kMGroup; kGSeq, kGGroup): the Mamba2 and GDN
  // replay launches' groups (their grids, padded past their counts so a
  // CUDA graph serves several steps); 0: none.
  int m_groups = 0, g_groups = 0;
  // DecoderOptions::replay_step as it applies to this decoder's kinds: a
  // plain one-token step's Mamba2 / GDN layers fold every token.
  bool m_steps = false, g_steps = false;
  // This launch's: the Mamba2 layers through the standard step (every log
  // empty); the GDN layers 1 through the standard step (likewise), 2
  // through a one-token chunk scan that applies the logs first (some log
  // holds entries: GDN's replay fold cannot take the step's own), 0 the
  // replay kernels.
  bool m_step = false;
  int g_step = 0;
  int32_t* top_ids = nullptr;     // top_logprobs(): rows × k, grown on demand
  double* top_lp = nullptr;
  int64_t top_cap = 0;
  void* sample_buf = nullptr;     // sample(): rows, uniforms, tokens, log-probabilities, grown on demand
  int64_t sample_cap = 0;
  int64_t mamba_log_w = 0, gdn_log_w = 0;  // one sequence's log bytes, all layers
  int64_t pending_w = 0;          // one sequence's verify pre-conv rows, all layers
  int64_t rewind_w = 0;           // one sequence's conv_log and ck_window, all layers
  // Per sequence. Replay: committed log entries (Mamba2, GDN layers);
  // standard: which of its slots holds the state.
  std::vector<int> m_count, g_count, cur;
  // The verify awaiting accept(): whose logs folded their prefix (replay).
  std::vector<char> m_folded, g_folded;
  bool commit_pending = false;    // the next launch first rolls the windows over accepted rows
  int64_t mamba_state_w = 0, gdn_state_w = 0, window_w = 0;  // one sequence's state and window bytes, all layers
  bool has_mamba = false, has_gdn = false;  // a kind without layers never folds

  Impl(const DeviceModel& model, const DecoderOptions& o) : m(model), opt(o) {}
  ~Impl() {
    for (auto& [key, g] : graphs) cudaGraphExecDestroy(g);
    cudaFree(top_ids), cudaFree(top_lp), cudaFree(sample_buf);
    gemm.reset();
    for (void* p : allocs) cudaFree(p);
    if (plan_host != nullptr) cudaFreeHost(plan_host);
    if (next_host != nullptr) cudaFreeHost(next_host);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  template <typename T>
  Status alloc(T** p, int64_t n, const std::string& what, int64_t* account) {
    const size_t bytes = sizeof(T) * size_t(std::max<int64_t>(n, 1));
    void* d = nullptr;
    if (cudaError_t e = cudaMalloc(&d, bytes); e != cudaSuccess) {
      cudaGetLastError();
      return out_of_budget("cuda decode: cannot allocate " + std::to_string(bytes) + " bytes for " + what + " (batch " +
                           std::to_string(opt.batch) + ", context " + std::to_string(opt.max_context) +
                           "): " + cudaGetErrorString(e));
    }
    allocs.push_back(d);
    *account += int64_t(bytes);
    *p = static_cast<T*>(d);
    return {};
  }

  // The activations as the stateless parts of a step (forward.h) take them.
  StepBuffers bufs() const {
    StepBuffers s;
    s.context = "cuda decode", s.gemm = gemm.get(), s.stream = stream;
    s.h = h, s.xn = xn, s.d = d, s.proj = proj, s.aq = aq, s.ak = ak, s.av = av, s.inv_freq = inv_freq;
    return s;
  }

  int64_t field_len() const { return rows_cap + 1; }
  // Replay's conditional flush: a log of c entries that takes T more
  // through the decode kernels folds in that step when it would be left
  // without room for the next (one token, or a whole verify with
  // speculation) — a plain step's rule and a ragged step's one-token
  // sequences' alike.
  bool log_fills(int c, int T) const { return c + T + std::max(opt.spec_tokens, 1) > opt.window; }
  int32_t* field(PlanField f) const { return plan + int64_t(f) * field_len(); }
  int32_t* host_field(PlanField f) const { return plan_host + int64_t(f) * field_len(); }

  // A step of T tokens per sequence (rows = batch·T); scan: the SSM layers
  // take the chunk scan (decoder.h).
  Status enqueue(int T, bool fold, bool verify, bool commit, bool scan);
  // Each block reads xn and ends with its output projection, which adds
  // into h and leaves xn = the next block's input norm (next_norm: its
  // weight, or the final norm's): Gemm::linear_residual_norm.
  Status run_mamba2(const DeviceBlock& blk, LayerState& L, int T, bool fold, bool verify, bool scan,
                    const float* next_norm);
  Status run_gdn(const DeviceBlock& blk, LayerState& L, int T, bool fold, bool verify, bool scan, const float* next_norm);
  // A chunk scan step with options.rewind: the windows after the chunk are
  // the new checkpoint's (its log is empty) — of the sequences that took
  // tokens, in a ragged step.
  Status scan_checkpoint_windows(LayerState& L);
  Status run_attention(const DeviceBlock& blk, LayerState& L, int T, const float* next_norm);
  Status run_mlp(const DeviceBlock& blk, int T, const float* next_norm);
  Status project_out(const DeviceBlock& blk, const uint16_t* y, int64_t ldy, int64_t n_in, int T,
                     const float* next_norm, const char* what);
  // The conv1d arguments over the projection's conv channels at column
  // `off` (x = proj + off; y left to the caller).
  oc::Conv1dArgs conv_args(const DeviceBlock& blk, LayerState& L, int64_t C, int64_t K, int64_t off, int64_t width);
  // Conv1d over the projection's conv channels at column `off`: in place for
  // a one-token step; a chunk writes xconv (the prefill kernel must not
  // alias). *out, *ldo: where the post-conv rows are.
  Status run_conv(const DeviceBlock& blk, LayerState& L, int T, bool verify, int64_t C, int64_t K, int64_t off,
                  int64_t width, const uint16_t** out, int64_t* ldo);
  // The accepted rows of the last verify into every conv window.
  Status commit_windows();
  // A plain step's fork groups for one kind of SSM layer (decoder_fork.cpp):
  // the sequences that read one checkpoint of `pool` and fold nothing
  // (fold_n[b] == 0), up to kForkGroupMax a group, then every other
  // sequence alone, into fields seq and group. Returns the launch's group
  // count (0: no group of two or more, or too few reads saved to pay for
  // the grouped kernels at `heads` heads a layer of that kind, `gdn` or
  // Mamba2) and, in *saved, the checkpoint reads saved.
  int plan_fork_groups(const SlotPool& pool, const std::vector<int>& fold_n, bool gdn, int64_t heads, PlanField seq,
                       PlanField group, int64_t* saved);
  // recompute: state slot and window copies per kCkOne/kCkFrom/kCkTo/
  // kCkWinFrom/kCkWinTo (the plan already on the device).
  Status checkpoint_copies();
  // options.rewind, before a layer's conv: the step's pre-conv rows into
  // its log entries (entry); where the log folds (fold), the checkpoint
  // window rolled over the folded entries (fold_n) and the entries a fold
  // keeps moved to the front (move_from, move_n), as the log's own.
  Status keep_conv_rows(LayerState& L, int T, bool fold, int64_t C, int64_t K, int64_t off, int64_t width,
                        PlanField entry, PlanField fold_n, PlanField move_from, PlanField move_n);
};

}  // namespace replayssm::cuda
