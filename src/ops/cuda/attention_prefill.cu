// Attention prefill (see attention_prefill.h). A block of 4 warps holds 64
// query-head rows m = t·rep + r of one (KV head, sequence) in shared memory
// and walks the KV rows its last row can see in tiles of 64: the whole
// block loads a K and a V tile (zero past the end), then each warp, for its
// 16 rows, computes S = Q·Kᵀ with mma.sync m16n8k16 (bf16 in, fp32 out),
// masks it causally, updates its online softmax (row max and sum in
// registers: a thread holds rows g and g + 8 of its warp's 16, g = lane/4),
// rounds P to bf16 in registers — the accumulator layout of S is the
// operand layout of P — and adds P·V to its fp32 output fragments.
// The head dim is padded to a multiple of 16 with zeros in shared memory.
// Rows are padded by 8 bf16 so the fragment loads hit distinct banks.
//
// Not done yet: cp.async double buffering of the K/V tiles (a block waits
// on its loads; other blocks on the SM fill the gap) and context splits for
// few query rows over long contexts (attention_decode_cuda has them).
#include "ops/cuda/attention_prefill.h"

#include <cmath>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/mma_bf16.cuh"
#include "ops/cuda/row_reduce.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kPfWarps = 4;
constexpr int kPfRowsM = 16 * kPfWarps;  // query-head rows per block
constexpr int kPfRowsN = 64;             // KV rows per tile
constexpr int kPfPad = 8;                // bf16 of padding per shared-memory row

__device__ __forceinline__ uint32_t ld_pair(const uint16_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
__device__ __forceinline__ uint32_t pack_pair(uint16_t lo, uint16_t hi) { return uint32_t(lo) | (uint32_t(hi) << 16); }

// n bf16 from src to dst: one 16-byte move when n = 8 and both are aligned.
__device__ __forceinline__ void copy_bf(uint16_t* dst, const uint16_t* src, int n) {
  if (n == 8 && (reinterpret_cast<uintptr_t>(src) & 15) == 0) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  } else {
    for (int e = 0; e < n; ++e) dst[e] = src[e];
  }
}

// kD: a bound on the padded head dim (64, 128, 256) sizing the output
// fragments; the loops stop at the actual one.
template <int kD>
__global__ void __launch_bounds__(32 * kPfWarps) attention_prefill_kernel(AttentionPrefillArgs a) {
  pdl_begin();
  const int kvh = blockIdx.x, b = blockIdx.y;
  const int m0 = (gridDim.z - 1 - blockIdx.z) * kPfRowsM;  // the heaviest (latest) tiles start first
  const int rep = a.Hq / a.Hkv, D = a.D, Dp = (D + 15) & ~15, ld = Dp + kPfPad;
  const int64_t row0 = a.cu_rows[b], pos0 = a.pos[b];
  const int M = int(a.cu_rows[b + 1] - row0) * rep;
  if (m0 >= M) return;
  const int64_t kv_end = pos0 + (min(M, m0 + kPfRowsM) - 1) / rep + 1;  // rows the block's last row sees
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;

  extern __shared__ uint4 pf_smem[];
  uint16_t* sQ = reinterpret_cast<uint16_t*>(pf_smem);  // (kPfRowsM, ld)
  uint16_t* sK = sQ + kPfRowsM * ld;                      // (kPfRowsN, ld)
  uint16_t* sV = sK + kPfRowsN * ld;                      // (kPfRowsN, ld)

  // Q rows (zero past the sequence's rows and in the padding), and K/V
  // zeroed once: the tile loads below never write the padding columns.
  for (int i = threadIdx.x; i < kPfRowsM * Dp; i += blockDim.x) {
    const int m = i / Dp, d = i % Dp, mm = m0 + m;
    uint16_t x = 0;
    if (mm < M && d < D) x = a.q[(row0 + mm / rep) * a.ldq + int64_t(kvh * rep + mm % rep) * a.q_head_stride + d];
    sQ[m * ld + d] = x;
  }
  for (int i = threadIdx.x; i < 2 * kPfRowsN * ld; i += blockDim.x) sK[i] = 0;

  // This thread's two rows: the last KV row each may see (−1 past the end).
  int64_t lim[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int mm = m0 + w * 16 + g + 8 * i;
    lim[i] = mm < M ? pos0 + mm / rep : -1;
  }
  const bool warp_active = m0 + w * 16 < M;  // a warp wholly past the end only helps load
  float o[kD / 8][4], mx[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int dt = 0; dt < kD / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;

  const int cw = D % 8 == 0 && a.kv.row_stride % 8 == 0 ? 8 : 1, chunks = D / cw;
  const int32_t* table = a.kv.page_table + int64_t(b) * a.kv.max_pages;
  for (int64_t j0 = 0; j0 < kv_end; j0 += kPfRowsN) {
    __syncthreads();  // the previous tile's readers are done (and the zeroing above)
    for (int i = threadIdx.x; i < kPfRowsN * chunks; i += blockDim.x) {
      const int r = i / chunks, d = (i % chunks) * cw;
      const int64_t j = j0 + r;
      uint16_t *dk = sK + r * ld + d, *dv = sV + r * ld + d;
      if (j < kv_end) {
        const int32_t page = table[j / a.kv.page_size];
        const int64_t off = (j % a.kv.page_size) * a.kv.row_stride + int64_t(kvh) * D + d;
        copy_bf(dk, a.kv.k_pages[page] + off, cw);
        copy_bf(dv, a.kv.v_pages[page] + off, cw);
      } else {
        for (int e = 0; e < cw; ++e) dk[e] = 0, dv[e] = 0;
      }
    }
    __syncthreads();
    if (!warp_active) continue;

    // S = Q·Kᵀ for the warp's 16 rows × 64 KV rows.
    float s[kPfRowsN / 8][4];
#pragma unroll
    for (int nt = 0; nt < kPfRowsN / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll 4
    for (int kk = 0; kk < kD / 16; ++kk) {
      if (kk * 16 >= Dp) break;
      const uint16_t* qp = sQ + (w * 16 + g) * ld + kk * 16 + 2 * c;
      const uint32_t qa[4] = {ld_pair(qp), ld_pair(qp + 8 * ld), ld_pair(qp + 8), ld_pair(qp + 8 * ld + 8)};
#pragma unroll
      for (int nt = 0; nt < kPfRowsN / 8; ++nt) {
        const uint16_t* kp = sK + (nt * 8 + g) * ld + kk * 16 + 2 * c;
        mma_bf16_16816(s[nt], qa, ld_pair(kp), ld_pair(kp + 8));
      }
    }

    // Causal mask, online softmax; P replaces S.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float tmax = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kPfRowsN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[nt][2 * i + e];
          x = j0 + nt * 8 + 2 * c + e <= lim[i] ? x * a.scale : -INFINITY;
          tmax = fmaxf(tmax, x);
        }
      const float mn = fmaxf(mx[i], quad_max(tmax));
      const float base = mn == -INFINITY ? 0.0f : mn;  // nothing seen yet: every p is 0
      const float corr = expf(mx[i] - base);
      mx[i] = mn;
      float rs = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kPfRowsN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[nt][2 * i + e];
          x = expf(x - base);
          rs += x;
        }
      l[i] = l[i] * corr + rs;  // this thread's columns only; the quad's sum at the end
#pragma unroll
      for (int dt = 0; dt < kD / 8; ++dt) o[dt][2 * i] *= corr, o[dt][2 * i + 1] *= corr;
    }

    // O += P·V: P's fragments straight from S's accumulators.
#pragma unroll
    for (int kk = 0; kk < kPfRowsN / 16; ++kk) {
      const uint32_t pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                              pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const uint16_t* vk = sV + (kk * 16 + 2 * c) * ld + g;
#pragma unroll
      for (int dt = 0; dt < kD / 8; ++dt) {
        if (dt * 8 >= Dp) break;
        const uint16_t* vp = vk + dt * 8;
        mma_bf16_16816(o[dt], pa, pack_pair(vp[0], vp[ld]), pack_pair(vp[8 * ld], vp[9 * ld]));
      }
    }
  }
  if (!warp_active) return;

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float ls = quad_sum(l[i]);
    const int mm = m0 + w * 16 + g + 8 * i;
    if (mm >= M) continue;
    const int64_t row = row0 + mm / rep;
    const int h = kvh * rep + mm % rep;
    const float inv = ls > 0.0f ? 1.0f / ls : 0.0f;
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int d = dt * 8 + 2 * c + e;
        if (d >= D) continue;
        float x = o[dt][2 * i + e] * inv;
        if (a.gate != nullptr) x *= sigmoid_f(bf(a.gate, row * a.ldg + int64_t(h) * a.g_head_stride + d));
        put_bf(a.out, row * a.ldo + int64_t(h) * D + d, x);
      }
  }
}

__global__ void kv_append_rows_kernel(KvAppendRowsArgs a) {
  pdl_begin();
  const int64_t i = blockIdx.x, p = a.pos[i];
  if (p < 0 || a.seq[i] < 0 || p / a.kv.page_size >= a.kv.max_pages) return;
  const int64_t page = a.kv.page_table[int64_t(a.seq[i]) * a.kv.max_pages + p / a.kv.page_size];
  const int64_t off = (p % a.kv.page_size) * a.kv.row_stride;
  for (int x = threadIdx.x; x < a.width; x += blockDim.x) {
    a.kv.k_pages[page][off + x] = a.k[i * a.ldk + x];
    a.kv.v_pages[page][off + x] = a.v[i * a.ldv + x];
  }
}

bool paged_kv_ok(const PagedKv& kv, int64_t width) {
  return kv.k_pages != nullptr && kv.v_pages != nullptr && kv.page_table != nullptr && kv.max_pages >= 1 &&
         kv.page_size >= 1 && kv.row_stride >= width;
}

template <int kD>
cudaError_t launch_prefill(const AttentionPrefillArgs& a, unsigned tiles, cudaStream_t stream) {
  const int ld = ((a.D + 15) & ~15) + kPfPad;
  const size_t shm = sizeof(uint16_t) * size_t(kPfRowsM + 2 * kPfRowsN) * ld;
  if (cudaError_t e = allow_dynamic_smem(attention_prefill_kernel<kD>, shm); e != cudaSuccess) return e;
  launch_kernel(attention_prefill_kernel<kD>, dim3(a.Hkv, a.batch, tiles), 32 * kPfWarps, shm, stream, a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t attention_prefill_cuda(const AttentionPrefillArgs& a, cudaStream_t stream) {
  if (a.batch < 0 || a.batch > 65535 || a.Hkv < 1 || a.Hq < a.Hkv || a.Hq % a.Hkv != 0 ||
      a.Hq / a.Hkv > kAttnPrefillMaxRep || a.D < 1 || a.D > kAttnMaxD || !std::isfinite(a.scale) || a.q == nullptr ||
      a.out == nullptr || a.cu_rows == nullptr || a.pos == nullptr || a.max_rows < 0 || a.q_head_stride < a.D ||
      a.ldq < int64_t(a.Hq) * a.q_head_stride || a.ldo < int64_t(a.Hq) * a.D ||
      !paged_kv_ok(a.kv, int64_t(a.Hkv) * a.D))
    return cudaErrorInvalidValue;
  if (a.gate != nullptr && (a.g_head_stride < a.D || a.ldg < int64_t(a.Hq) * a.g_head_stride))
    return cudaErrorInvalidValue;
  const int64_t tiles = (int64_t(a.max_rows) * (a.Hq / a.Hkv) + kPfRowsM - 1) / kPfRowsM;
  if (tiles > 65535) return cudaErrorInvalidValue;  // grid z
  if (a.batch == 0 || a.max_rows == 0) return cudaSuccess;
  const int Dp = (a.D + 15) & ~15;
  if (Dp <= 64) return launch_prefill<64>(a, unsigned(tiles), stream);
  if (Dp <= 128) return launch_prefill<128>(a, unsigned(tiles), stream);
  return launch_prefill<256>(a, unsigned(tiles), stream);
}

cudaError_t kv_append_rows_cuda(const KvAppendRowsArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.width < 1 || a.k == nullptr || a.v == nullptr || a.seq == nullptr || a.pos == nullptr ||
      a.ldk < a.width || a.ldv < a.width || !paged_kv_ok(a.kv, a.width))
    return cudaErrorInvalidValue;
  if (a.rows == 0) return cudaSuccess;
  launch_kernel(kv_append_rows_kernel, a.rows, 128, 0, stream, a);
  return cudaGetLastError();
}

}  // namespace replayssm::ops::cuda
