// Attention decode on CUDA over a paged KV cache: one query token per
// sequence, any context length, GQA, optional output gate — the math of
// ops/cpu/attention.h with T = 1 (query at position seq_len − 1 attends to
// rows [0, seq_len)) followed by forward.cpp's o ⊙= sigmoid(gate) when a
// gate is given (Qwen3.5), fused here because the output is written once.
//
// The paged layout is ops::KvView on the device: the host translates a
// sequence's pages into a row of a page table (indices into arrays of page
// pointers), as the store's KvView lists page pointers per sequence. K and
// V rows are bf16, Hkv·D wide; a row's K may sit beside its V in the same
// page (the store's layout: v_pages[i] = k_pages[i] + Hkv·D, row stride 2·Hkv·D).
//
// Work split (flash-decoding): one block per (KV head, sequence, split of
// its context rows) computes, for the Hq/Hkv query heads sharing
// that KV head, a partial softmax (max, sum, weighted V) — K and V are read
// once per KV head, not once per query head; a second kernel combines the
// splits. By default splits are short enough that the blocks reach
// kAttnTargetBlocks where kAttnMinSplitRows allows
// (attention_decode_split_rows): a warp's rows are a chain of dependent
// softmax updates, so at batch 1 the context is cut into splits of 64 rows
// or more. The grid's splits come from max_seq_len, each sequence's rows a
// split from its own length (AttentionSplits). Without
// scratch the whole context is one split (no second kernel): right when
// batch·Hkv already fills the GPU.
//
// Where D and the row stride are multiples of 8 (attention_decode_vec_ok)
// rows are read by 16-byte loads, and where D is also 32, 64, 96, 128 or 256
// (attention_decode_mma_ok) the products run on tensor cores (P as two
// bf16 terms before P·V, 16 bits of its mantissa): the page pointers (and so
// each row's K and V) must then be 16-byte aligned, as cudaMalloc'd pages
// laid out like the store's are.
//
// Shapes: B sequences, Hq query heads, Hkv KV heads (Hq/Hkv ≤ 8), D ≤ 256.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace replayssm::ops::cuda {

constexpr int kAttnMaxRep = 8;
constexpr int kAttnMaxD = 256;
constexpr int kAttnMaxSplitRows = 512;
// A split's rows: a multiple of kAttnSplitRowsStep (the tensor-core
// kernel's chunk), at least kAttnMinSplitRows. Shorter splits left each
// block too little to do beside its partials and their combine: at batch
// 1 (H200, 2026-12-04, 22196db) 1,024 rows took 15.8 µs at the 8B heads
// in 64 splits of 16 against 12.0 in 16 of 64, and 4,096 rows at the 27B
// heads 39.8 µs in 128 splits of 32 against 29.7 in 64 of 64.
constexpr int kAttnSplitRowsStep = 16;
constexpr int kAttnMinSplitRows = 64;
// Blocks the default split aims for: about four per SM of the H200. At
// batch 1 the 8B model's 8 KV heads as 8 blocks walked 256 rows each, a
// chain of dependent online-softmax updates per warp: ~90 µs per attention
// layer of the step (docs/perf), where splits and a combine take a few.
constexpr int kAttnTargetBlocks = 512;

// Row p of sequence b: K at k_pages[page_table[b·max_pages + p / page_size]]
// + (p % page_size)·row_stride, V likewise; Hkv·D bf16 each.
struct PagedKv {
  uint16_t* const* k_pages = nullptr;   // (n_pages) device pointers
  uint16_t* const* v_pages = nullptr;   // (n_pages)
  const int32_t* page_table = nullptr;  // (B, max_pages) page indices
  int max_pages = 0, page_size = 0;
  int64_t row_stride = 0;               // elements, ≥ Hkv·D
};

struct AttentionDecodeArgs {
  int batch = 0, Hq = 0, Hkv = 0, D = 0;
  float scale = 1.0f;                 // softmax scale, usually D^-½
  const uint16_t* q = nullptr;        // (B, Hq, D) bf16 after norm and RoPE: head h of
  int64_t ldq = 0, q_head_stride = 0; //   sequence b at q + b·ldq + h·q_head_stride
  const uint16_t* gate = nullptr;     // (B, Hq, D) bf16 or nullptr: out ⊙= sigmoid(gate)
  int64_t ldg = 0, g_head_stride = 0;
  uint16_t* out = nullptr;            // (B, Hq·D) bf16, row stride ldo
  int64_t ldo = 0;
  PagedKv kv;
  const int32_t* seq_len = nullptr;   // (B) rows attended, ≥ 1, new token's row included
  int max_seq_len = 0;                // host bound on seq_len (sizes the splits and scratch)
  float* scratch = nullptr;           // attention_decode_scratch_floats(), or nullptr: one split
  int split_rows = 0;                 // context rows per split (0: each sequence's own, AttentionSplits)
  // Which kernel walks the rows, for A/B runs and tests: 0 the launcher's
  // choice (the first of 3, 2, 1 that the shape allows), 1 by elements (any
  // D), 2 by 16-byte rows on the FMA pipe (refused unless
  // attention_decode_vec_ok), 3 on tensor cores (refused unless
  // attention_decode_mma_ok).
  int variant = 0;
};
constexpr int kAttnDecodeVariants = 4;

#if defined(__CUDACC__)
#define RSSM_ATTN_HOST_DEVICE __host__ __device__
#else
#define RSSM_ATTN_HOST_DEVICE
#endif

// Splits a sequence aims for: enough that batch·Hkv·splits reaches kAttnTargetBlocks.
inline int attention_decode_split_want(int batch, int Hkv) {
  const int64_t heads = int64_t(batch > 0 ? batch : 1) * (Hkv > 0 ? Hkv : 1);
  return int((kAttnTargetBlocks + heads - 1) / heads);
}
// Rows a split of a context of len rows spread over `want` splits: a
// multiple of kAttnSplitRowsStep, from kAttnMinSplitRows to kAttnMaxSplitRows.
RSSM_ATTN_HOST_DEVICE inline int attention_split_rows_for(int len, int want) {
  int rows = len > 1 ? (len - 1) / want + 1 : 1;  // 32-bit (every block of a launch divides), no overflow
  rows = (rows + kAttnSplitRowsStep - 1) / kAttnSplitRowsStep * kAttnSplitRowsStep;
  return rows < kAttnMinSplitRows ? kAttnMinSplitRows : rows > kAttnMaxSplitRows ? kAttnMaxSplitRows : rows;
}
// Context rows per split at the bound max_seq_len: split_rows if given,
// else attention_split_rows_for(max_seq_len, attention_decode_split_want).
inline int attention_decode_split_rows(int batch, int Hkv, int max_seq_len, int split_rows) {
  if (split_rows > 0) return split_rows;
  return attention_split_rows_for(max_seq_len, attention_decode_split_want(batch, Hkv));
}
// Splits a sequence at most: the grid's, sized at the bound (and with it the scratch).
inline int attention_decode_splits(int batch, int Hkv, int max_seq_len, int split_rows) {
  const int s = attention_decode_split_rows(batch, Hkv, max_seq_len, split_rows);
  return max_seq_len <= s ? 1 : (max_seq_len + s - 1) / s;
}
// How a launch cuts each sequence's rows, the host's plan that the kernels
// read (attention_decode_plan): n splits at most (the grid's, from
// max_seq_len); a sequence of L rows takes splits of `rows` where the
// caller fixed them (AttentionDecodeArgs::split_rows), else of
// attention_split_rows_for(L, want) — from its own length, not the
// bound's, so that a short context under a large max_seq_len (a server's)
// still spreads over the GPU instead of walking its rows in one
// bound-sized split; the last split takes every row left.
struct AttentionSplits {
  int n = 1, rows = 0, want = 1;
};
// A sequence of L rows' rows a split under the plan s.
RSSM_ATTN_HOST_DEVICE inline int attention_split_rows_of(const AttentionSplits& s, int L) {
  return s.rows > 0 ? s.rows : attention_split_rows_for(L, s.want);
}
// Whether split sp of a sequence of L rows surely has none, without the
// division that gives its rows: past the end even at the shortest split,
// or (rows from the length) past the splits the sequence aims for and past
// the end at the longest split — a length's rows are either
// kAttnMaxSplitRows or at least ⌈L / want⌉, so from split `want` on this
// is exact. Most of a grid sized for a large bound is such blocks. (H200,
// 2026-12-04, d02e924: at batch 64 under a 32,768-row bound, where
// 56–63 of a head's 64 blocks are empty, rows from each length took 2–9 µs
// a launch more than fixed rows with the first test alone.)
RSSM_ATTN_HOST_DEVICE inline bool attention_split_past_end(const AttentionSplits& s, int sp, int L) {
  if (int64_t(sp) * (s.rows > 0 ? s.rows : kAttnMinSplitRows) >= L) return true;
  return s.rows == 0 && sp >= s.want && int64_t(sp) * kAttnMaxSplitRows >= L;
}
// The plan of a launch with scratch. A sequence aims for no more splits
// than the grid has: the bound's rows round up, so the grid can have fewer
// than the target, and a sequence cut for more would leave its last split
// the rest (at a bound of 4,097, 832 rows against 64).
inline AttentionSplits attention_decode_plan(int batch, int Hkv, int max_seq_len, int split_rows) {
  AttentionSplits s;
  s.n = attention_decode_splits(batch, Hkv, max_seq_len, split_rows);
  s.rows = split_rows;
  const int want = attention_decode_split_want(batch, Hkv);
  s.want = want < s.n ? want : s.n;
  return s;
}
inline int64_t attention_decode_scratch_floats(int batch, int Hq, int Hkv, int D, int max_seq_len, int split_rows = 0) {
  return int64_t(batch) * Hq * attention_decode_splits(batch, Hkv, max_seq_len, split_rows) * (int64_t(D) + 2);
}

// Whether attention_decode_cuda reads K and V rows by 16-byte loads (8
// dims a lane) rather than by elements.
inline bool attention_decode_vec_ok(int D, int64_t row_stride) { return D % 8 == 0 && row_stride % 8 == 0; }
// Whether it can take the tensor-core kernel: D of 32, 64, 96, 128 or 256 and
// 16-byte rows (the page pointers 16-byte aligned, as for the vec kernel).
inline bool attention_decode_mma_ok(int D, int64_t row_stride) {
  return (D == 256 || (D % 32 == 0 && D <= 128)) && row_stride % 8 == 0;
}

// Warps a block of the tensor-core kernel: 4 where there are two waves
// of its blocks or more (3 an SM) and each walks ≥ 256 rows, else 2 — with
// fewer rows a block's extra warps idle, with fewer blocks an SM's last
// slots stay empty. At D = 256 always 2 (234 registers a lane). H200
// trials (2026-12-04, 8cfd453): at 8B shapes 2 warps took 0.64–0.84× the
// time of 4 at batch 1–8 (1.05× at batch 1 and 128 rows), 4 warps 0.89–0.92×
// of 2's at batch 64–256 and 1,024–4,096 rows; at D = 256, 2 warps within
// 8% of the best of 1, 2 and 4.
inline int attention_decode_mma_warps(int D, int64_t blocks, int rows_per_block, int sms) {
  return D <= 128 && rows_per_block >= 256 && blocks >= int64_t(6) * sms ? 4 : 2;
}

cudaError_t attention_decode_cuda(const AttentionDecodeArgs& a, cudaStream_t stream);

// The new token's K and V rows into the pages, before attention_decode:
// k, v: (B, Hkv·D) bf16 (row strides ldk, ldv) written at row pos[b] of
// sequence b (its page must already be in the table).
struct KvAppendArgs {
  int batch = 0, width = 0;  // width = Hkv·D
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  int64_t ldk = 0, ldv = 0;
  const int32_t* pos = nullptr;  // (B)
  PagedKv kv;
};

cudaError_t kv_append_cuda(const KvAppendArgs& a, cudaStream_t stream);

}  // namespace replayssm::ops::cuda

#undef RSSM_ATTN_HOST_DEVICE
