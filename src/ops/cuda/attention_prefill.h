// Attention prefill on CUDA over the paged KV cache: many new query rows
// per sequence, causal, GQA, optional output gate — the math of
// ops/cpu/attention.h (T rows at positions pos .. pos+T−1, row t attending
// to KV rows [0, pos + t]) followed by forward.cpp's o ⊙= sigmoid(gate),
// for a ragged batch: prompt chunks and the T drafts of a speculative
// verify go through the same call. With T = 1 it computes what
// attention_decode_cuda computes (that kernel, with its context splits,
// is the faster one for decode).
//
// The new rows' K and V must already be in the pages: kv_append_rows_cuda
// writes them, one (sequence, position) per row.
//
// Work split (FlashAttention-2 style): one block per (KV head, sequence,
// tile of 64 query-head rows). A tile's rows are the pairs (t, r) — query
// row t, query head kvh·rep + r — so the rep query heads of a KV head share
// every K/V tile brought into shared memory; bf16 tensor-core products for
// QKᵀ and PV, fp32 online softmax and accumulation.
//
// Shapes: B sequences, Hq query heads, Hkv KV heads (rep = Hq/Hkv ≤
// kAttnPrefillMaxRep), D ≤ 256, T_b new rows of sequence b (ragged, rows of
// q/gate/out).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/cuda/attention_decode.h"

namespace replayssm::ops::cuda {

// A tile's rows are (row, head) pairs whatever rep is, so this kernel takes
// more query heads a KV head than the decode kernels' kAttnMaxRep (8): the
// CUDA backend runs it for decode steps too where rep is larger (Nemotron 3
// Nano: 32 query heads over 2 KV heads).
constexpr int kAttnPrefillMaxRep = 64;

struct AttentionPrefillArgs {
  int batch = 0, Hq = 0, Hkv = 0, D = 0;
  float scale = 1.0f;                 // softmax scale, usually D^-½
  const uint16_t* q = nullptr;        // (rows, Hq, D) bf16 after norm and RoPE: head h of
  int64_t ldq = 0, q_head_stride = 0; //   row i at q + i·ldq + h·q_head_stride
  const uint16_t* gate = nullptr;     // (rows, Hq, D) bf16 or nullptr: out ⊙= sigmoid(gate)
  int64_t ldg = 0, g_head_stride = 0;
  uint16_t* out = nullptr;            // (rows, Hq·D) bf16, row stride ldo; must not alias q or gate
  int64_t ldo = 0;
  PagedKv kv;                         // rows [0, pos[b] + T_b) of sequence b present
  // Sequence b's query rows are [cu_rows[b], cu_rows[b+1]) of q, gate and
  // out; its row cu_rows[b] + t sits at position pos[b] + t.
  const int32_t* cu_rows = nullptr;   // (B + 1), ascending, cu_rows[0] = 0
  const int32_t* pos = nullptr;       // (B) ≥ 0: rows already in the cache before the new ones
  int max_rows = 0;                   // host bound on cu_rows[b+1] − cu_rows[b] (sizes the grid;
                                      //   rows past it are not computed)
};

cudaError_t attention_prefill_cuda(const AttentionPrefillArgs& a, cudaStream_t stream);

// New K and V rows into the pages, any number per sequence: row i of k and
// v (Hkv·D bf16 each, row strides ldk, ldv) goes to position pos[i] of
// sequence seq[i] (its page must already be in that sequence's table row).
// Rows whose position lies outside the table are skipped.
struct KvAppendRowsArgs {
  int rows = 0, width = 0;  // width = Hkv·D
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  int64_t ldk = 0, ldv = 0;
  const int32_t* seq = nullptr;  // (rows) sequence: row of the page table
  const int32_t* pos = nullptr;  // (rows)
  PagedKv kv;
};

cudaError_t kv_append_rows_cuda(const KvAppendRowsArgs& a, cudaStream_t stream);

}  // namespace replayssm::ops::cuda
