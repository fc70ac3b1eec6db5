// Attention decode on tensor cores (see attention_decode.h; variant 3, the
// launcher's choice where attention_decode_mma_ok). A warp takes 16
// context rows at a time and computes, with mma.sync m16n8k16 (bf16 in,
// fp32 out), S = Q·Kᵀ for the rep ≤ 8 query heads of its KV head (A's
// rows 0..7; rows 8..15 are zero and their accumulators are not kept:
// mma_bf16_16816_top), updates one online softmax per head in the log2
// domain, splits P into two bf16 terms (hi + lo, 16 bits of mantissa: with
// P rounded to bf16 alone, the embedded model's greedy decode parted from
// its speculative verify's within 40 tokens — H200, 2026-12-04) —
// S's accumulator layout is P's operand layout, as in attention_prefill.cu
// — and adds P·V to fp32 output fragments, one product a term.
// K and V come straight from global memory into fragments, no shared
// memory on the way (only Q, loaded once, waits there: see below), because
// a dot product does not care in which order its dims are summed: lane
// (g, c) loads 16 bytes, dims 32j + 8c .. + 7, of K row g (and of query
// head g) and uses them as k-block 2j's (2c, 2c+1),
// (2c+8, 2c+9) and k-block 2j+1's — a bijection of each 32 dims, the same
// for Q and K. P·V's k (the rows) and n (the dims) are relabelled the same
// way: lane (g, c) loads dims 64h + 8g .. + 7 of rows 2c, 2c+1, 2c+8, 2c+9,
// and one byte permute per register pairs two rows' values of a dim.
// Why: by 16-byte rows on the FMA pipe (attention_decode.cu's vec kernel)
// the step was bound by its instructions — ~700 a lane for 8 rows at
// 8B shapes, 146 registers, 4.65 cycles between a warp's issues — at
// 1.7–1.8 TB/s, 40% of the read bandwidth, however long the context
// (H200, 2026-12-04, c64f132); here 16 rows take 40 HMMA (24 with P as one
// term), 32 PRMT and 16 loads a lane. H200, batch 256 and 4,096 rows: 1,312
// against 2,397 µs a layer at 8B shapes (3.3 TB/s, 74% of the read
// bandwidth), 1,384 against 4,098 at Qwen3.5-27B's (D = 256).
#include <cmath>
#include <type_traits>

#include "ops/cuda/attention_decode.h"
#include "ops/cuda/attention_decode_merge.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/mma_bf16.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kMmaChunk = 16;  // context rows a warp takes at once: one k-block of P·V
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ uint32_t word(const uint4& u, int i) {
  return i == 0 ? u.x : i == 1 ? u.y : i == 2 ? u.z : u.w;
}

// One chunk's rows as this lane loads them: K rows 8n + g (n = 0, 1), V
// rows 2c, 2c+1, 2c+8, 2c+9 of the chunk; zeros past the split's end (a V
// of zeros, not whatever follows, keeps 0·V finite).
template <int kD>
struct ChunkRows {
  static constexpr int kJ = kD / 32, kH = (kD + 63) / 64;
  uint4 k[2][kJ], v[4][kH];
};

// Row i of the chunk at base, at this KV head: with the chunk's rows on
// one page (the usual case: pages of a multiple of 16 rows, splits of
// multiples of 16) one table lookup serves all of them.
struct ChunkPage {
  int64_t base, off, page;
  bool one_page;
  __device__ ChunkPage(const PagedKv& kv, int b, int64_t base_) : base(base_) {
    off = base % kv.page_size;
    one_page = off + kMmaChunk <= kv.page_size;
    page = kv.page_table[int64_t(b) * kv.max_pages + base / kv.page_size];
  }
  __device__ const uint16_t* row(const PagedKv& kv, const uint16_t* const* pages, int b, int i, int64_t head) const {
    return one_page ? pages[page] + (off + i) * kv.row_stride + head : kv_row(pages, kv, b, base + i) + head;
  }
};

template <int kD>
__device__ __forceinline__ void load_k(ChunkRows<kD>& r, const PagedKv& kv, const ChunkPage& cp, int b, int64_t j1,
                                       int64_t head, int g, int c) {
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    const int i = 8 * n + g;
    const bool in = cp.base + i < j1;
    const uint16_t* p = in ? cp.row(kv, kv.k_pages, b, i, head) : nullptr;
#pragma unroll
    for (int j = 0; j < ChunkRows<kD>::kJ; ++j)
      r.k[n][j] = in ? *reinterpret_cast<const uint4*>(p + 32 * j + 8 * c) : make_uint4(0, 0, 0, 0);
  }
}
template <int kD>
__device__ __forceinline__ void load_v(ChunkRows<kD>& r, const PagedKv& kv, const ChunkPage& cp, int b, int64_t j1,
                                       int64_t head, int g, int c) {
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int i = 2 * c + (q & 1) + 8 * (q >> 1);
    const bool in = cp.base + i < j1;
    const uint16_t* p = in ? cp.row(kv, kv.v_pages, b, i, head) : nullptr;
#pragma unroll
    for (int h = 0; h < ChunkRows<kD>::kH; ++h)
      r.v[q][h] =
          in && 64 * h + 8 * g < kD ? *reinterpret_cast<const uint4*>(p + 64 * h + 8 * g) : make_uint4(0, 0, 0, 0);
  }
}

// kD = D (32, 64, 96, 128, 256); kWarps a block. At D = 256 a chunk's V
// is requested after its S, not with its K: both at once are 128
// registers of loads beside the 64 of the output.
template <int kD, int kWarps>
__global__ void __launch_bounds__(32 * kWarps, kWarps == 4 ? 3 : 1)
    attention_decode_mma_kernel(AttentionDecodeArgs a, AttentionSplits s) {
  constexpr int kJ = kD / 32, kH = (kD + 63) / 64;
  constexpr bool kLateV = kD > 128;
  pdl_begin();
  const int kvh = blockIdx.x, b = blockIdx.y, sp = blockIdx.z;
  const int rep = a.Hq / a.Hkv;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  int64_t j0, j1;
  if (!split_span(s, sp, a.seq_len[b], j0, j1)) return;

  extern __shared__ uint4 shm_q[];
  float* sM = reinterpret_cast<float*>(shm_q + kWarps * kJ * 32);  // (nw, rep), after the warps' Q
  float* sL = sM + kWarps * rep;                                   // (nw, rep)
  float* sA = sL + kWarps * rep;                                   // (nw, rep, D)
  // Query head g as A fragments (zero for g ≥ rep), the warp's own copy in
  // shared memory (4 words a lane and 32-dim group j: k-block 2j's a0, a2,
  // then 2j + 1's, in K's order above), read back each chunk by one
  // 16-byte load a group: registers are the kernel's bound (the output's
  // fragments and a chunk's loads).
  uint4* sQ = shm_q + w * kJ * 32;  // (kJ, 32 lanes)
  {
    const uint16_t* qh = a.q + int64_t(b) * a.ldq + int64_t(kvh * rep + (g < rep ? g : 0)) * a.q_head_stride;
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      uint32_t x[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int d = 32 * j + 8 * c + 2 * i;
        x[i] = g < rep ? uint32_t(qh[d]) | uint32_t(qh[d + 1]) << 16 : 0u;
      }
      sQ[j * 32 + lane] = make_uint4(x[0], x[1], x[2], x[3]);
    }
    __syncwarp();
  }
  // Per head g: running max (log2 domain), this lane's part of the sum, and
  // the output's dims 64h + 8(2c + e') + e at acc[h][e][e'].
  const float scale2 = a.scale * kLog2e;
  float m = -INFINITY, l = 0.0f, acc[kH][8][2] = {};
  const int64_t head = int64_t(kvh) * kD;
  for (int64_t base = j0 + int64_t(w) * kMmaChunk; base < j1; base += int64_t(kWarps) * kMmaChunk) {
    ChunkRows<kD> r;
    const ChunkPage cp(a.kv, b, base);
    load_k(r, a.kv, cp, b, j1, head, g, c);
    if constexpr (!kLateV) load_v(r, a.kv, cp, b, j1, head, g, c);
    // S for rows 8n + 2c + e of the chunk (e = 0, 1), head g.
    float s[2][2];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      float d0 = 0.0f, d1 = 0.0f;
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        const uint4 q = sQ[j * 32 + lane];
        mma_bf16_16816_top(d0, d1, q.x, q.y, r.k[n][j].x, r.k[n][j].y);
        mma_bf16_16816_top(d0, d1, q.z, q.w, r.k[n][j].z, r.k[n][j].w);
      }
      const int64_t row = base + 8 * n + 2 * c;
      s[n][0] = row < j1 ? d0 * scale2 : -INFINITY;
      s[n][1] = row + 1 < j1 ? d1 * scale2 : -INFINITY;
    }
    if constexpr (kLateV) load_v(r, a.kv, cp, b, j1, head, g, c);
    // Row base is in the split, so the quad's max is finite.
    const float mn = fmaxf(m, quad_max(fmaxf(fmaxf(s[0][0], s[0][1]), fmaxf(s[1][0], s[1][1]))));
    const float corr = exp2f(m - mn);  // 0 on the first chunk
    float p[2][2];
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) p[n][e] = exp2f(s[n][e] - mn);
    l = l * corr + (p[0][0] + p[0][1]) + (p[1][0] + p[1][1]);
    m = mn;
    // P·V: P's k 2c, 2c+1 are rows 2c, 2c+1 (s[0]), k 2c+8, 2c+9 rows 2c+8,
    // 2c+9 (s[1]); P as two bf16 terms, hi + lo (16 bits of mantissa).
    uint32_t ph[2], pl[2];
#pragma unroll
    for (int n = 0; n < 2; ++n) split_bf16(p[n][0], p[n][1], ph[n], pl[n]);
#pragma unroll
    for (int h = 0; h < kH; ++h)
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const unsigned sel = e % 2 ? 0x7632u : 0x5410u;  // the high or low halves of a word
        const uint32_t b0 = __byte_perm(word(r.v[0][h], e / 2), word(r.v[1][h], e / 2), sel);
        const uint32_t b1 = __byte_perm(word(r.v[2][h], e / 2), word(r.v[3][h], e / 2), sel);
        acc[h][e][0] *= corr, acc[h][e][1] *= corr;
        mma_bf16_16816_top(acc[h][e][0], acc[h][e][1], ph[0], ph[1], b0, b1);
        mma_bf16_16816_top(acc[h][e][0], acc[h][e][1], pl[0], pl[1], b0, b1);
      }
  }
  // The warp's partials, in merge_warps' natural-log domain.
  l = quad_sum(l);
  if (g < rep) {
    if (c == 0) sM[w * rep + g] = m * (1.0f / kLog2e), sL[w * rep + g] = l;
#pragma unroll
    for (int h = 0; h < kH; ++h)
#pragma unroll
      for (int e = 0; e < 8; ++e)
#pragma unroll
        for (int x = 0; x < 2; ++x) {
          const int d = 64 * h + 8 * (2 * c + x) + e;
          if (d < kD) sA[(w * rep + g) * kD + d] = acc[h][e][x];
        }
  }
  merge_warps(a, b, kvh, sp, s.n, kWarps, sM, sL, sA);
}

}  // namespace

// Called by attention_decode_cuda with its arguments checked and
// attention_decode_mma_ok(a.D, a.kv.row_stride).
cudaError_t attention_decode_mma(const AttentionDecodeArgs& a, const AttentionSplits& s, cudaStream_t stream) {
  const dim3 grid(a.Hkv, a.batch, s.n);
  int sms = 0;
  if (cudaError_t e = device_sms(&sms); e != cudaSuccess) return e;
  // From the bound: the lengths are the device's (a captured graph replays this choice).
  const int bound_rows = s.n == 1 ? a.max_seq_len : attention_decode_split_rows(a.batch, a.Hkv, a.max_seq_len, s.rows);
  const int warps = attention_decode_mma_warps(a.D, int64_t(a.Hkv) * a.batch * s.n, bound_rows, sms);
  // The block's warps from the kernel's own template argument, so that the
  // shared memory cannot be sized for another count.
  auto go = [&](auto d, auto w) {
    constexpr int kD = decltype(d)::value, kWarps = decltype(w)::value;
    auto kernel = attention_decode_mma_kernel<kD, kWarps>;
    // The warps' Q fragments (4·D floats each), then merge_warps' partials.
    const size_t shm = sizeof(float) * size_t(kWarps) * (4 * kD + (a.Hq / a.Hkv) * (2 + kD));
    if (cudaError_t e = allow_dynamic_smem(kernel, shm); e != cudaSuccess) return e;  // 25 KB at most today
    launch_kernel(kernel, grid, 32 * kWarps, shm, stream, a, s);
    return cudaGetLastError();
  };
  auto by_warps = [&](auto d) {
    using Two = std::integral_constant<int, 2>;
    if constexpr (decltype(d)::value > 128)
      return go(d, Two{});  // the rule's 2 (234 registers): no 4-warp instance to build
    else
      return warps == 4 ? go(d, std::integral_constant<int, 4>{}) : go(d, Two{});
  };
  switch (a.D) {
    case 32:
      return by_warps(std::integral_constant<int, 32>{});
    case 64:
      return by_warps(std::integral_constant<int, 64>{});
    case 96:
      return by_warps(std::integral_constant<int, 96>{});
    case 128:
      return by_warps(std::integral_constant<int, 128>{});
    case 256:
      return by_warps(std::integral_constant<int, 256>{});
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace replayssm::ops::cuda
