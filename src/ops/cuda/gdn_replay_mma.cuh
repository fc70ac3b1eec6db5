// The Gated DeltaNet replay pass on tensor cores (gdn_replay.cu, kMma):
// the two products that touch every checkpoint element — the outputs'
// S_cᵀx for up to 8 vectors x (a verify's k_t and q_t, T ≤ 4) and a fold's
// Σ_s F_s·k_s ⊗ u_s — as TF32 mma at fp32 accuracy (mma_tf32.cuh) instead
// of FMAs. Why (H200, Qwen3-Next shapes): the FMA verify pass held 8
// vectors × 4 columns of partials a thread (96–128 registers, 4 blocks an
// SM) and was issue- and occupancy-bound at half the read bandwidth; a fold
// cost an FMA per element and entry.
//
// Layout: a block's 128-column slice, warp w owning columns 32w … 32w + 31
// over every row (so its sums need no other warp), lane 4g + t holding, in
// each 8-row step of a pass, rows t and t + 4 at columns 32w + 4g … + 3 —
// two 16-byte loads, 128 bytes of a row per 8 lanes. One layout serves
//   outputs  D[c][x] += S[i][c]·x[i]      A = the state (m = column, k = row),
//                                          B = the vectors (bf16: exact in TF32);
//   fold     Sᵀ[c][i] += F_s·u_s[c]·k_s[i]  D = the state itself (m = column,
//                                          n = row), A = F_s·u_s (split hi + lo),
//                                          B = the keys (bf16).
// The rows a lane holds are k t and t + 4 of A in the first and n 2t and
// 2t + 1 of D in the second: both are the same two registers. The key
// dots k_s·x (gdn_mma_key_dots) are mma too, the keys as A.
#pragma once

#include <cstdint>

#include "ops/cuda/mma_tf32.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

// A pass of 16 rows of a 128-column slice (row stride ld, a multiple of 4
// floats: dv % 128 == 0), this lane's part: v[j][h][e] is row 8j + t + 4h,
// column 32w + 4g + e.
struct GdnMmaTile {
  static constexpr int kSteps = 2, kPassRows = 8 * kSteps, kVectors = 8;
  float v[kSteps][2][4];

  __device__ static int row(int j, int h, int t) { return 8 * j + t + 4 * h; }
  __device__ static int col(int w, int lane) { return 32 * w + 4 * (lane / 4); }

  // m: the pass's first row; a whole pass (rows ≥ 16) loads unmasked.
  __device__ void load(const float* m, int rows, int64_t ld, int w, int lane) {
    const int t = lane % 4;
    const float* p = m + t * ld + col(w, lane);
#pragma unroll
    for (int j = 0; j < kSteps; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (rows >= kPassRows || row(j, h, t) < rows) x = *reinterpret_cast<const float4*>(p + (8 * j + 4 * h) * ld);
        v[j][h][0] = x.x, v[j][h][1] = x.y, v[j][h][2] = x.z, v[j][h][3] = x.w;
      }
  }
  __device__ void store(float* m, int rows, int64_t ld, int w, int lane) const {
    const int t = lane % 4;
    float* p = m + t * ld + col(w, lane);
#pragma unroll
    for (int j = 0; j < kSteps; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        if (rows >= kPassRows || row(j, h, t) < rows)
          *reinterpret_cast<float4*>(p + (8 * j + 4 * h) * ld) = make_float4(v[j][h][0], v[j][h][1], v[j][h][2], v[j][h][3]);
  }

  __device__ void scale(float x) {
#pragma unroll
    for (int j = 0; j < kSteps; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 4; ++e) v[j][h][e] *= x;
  }

  // d[k] += this pass's S_cᵀx over its rows for the 8 vectors x: xt
  // (rows, 8) in shared memory, rows ≥ p0 + 16 (zero past dk and past the
  // vectors in use). d[k] is the mma tile of columns 4g + 2k (m = g) and
  // 4g + 2k + 1 (m = g + 8) × vectors (n).
  __device__ void outputs(float (&d)[2][4], const float* xt, int p0, int lane) const {
    const float* x = xt + (p0 + lane % 4) * kVectors + lane / 4;
#pragma unroll
    for (int j = 0; j < kSteps; ++j) {
      const float b0 = x[8 * j * kVectors], b1 = x[(8 * j + 4) * kVectors];
#pragma unroll
      for (int k = 0; k < 2; ++k)
        mma_f32_split(d[k], v[j][0][2 * k], v[j][0][2 * k + 1], v[j][1][2 * k], v[j][1][2 * k + 1], b0, b1);
    }
  }

  // The fold's sum over entries s < f into the rows held, after the decay:
  // u (W, ldu) and F (W) in shared memory, key(s, i) the bf16 key. Entries
  // by 8 (one k step), the coefficients F_s·u_s split once per step for
  // both row steps; past f, A and B are zero (the log's rows there are
  // not loaded, and 0·NaN would poison the sum).
  template <typename Key>
  __device__ void fold(const float* u, int ldu, const float* F, int f, Key&& key, int p0, int dk, int w, int lane) {
    const int g = lane / 4, t = lane % 4, c = col(w, lane);
    for (int s0 = 0; s0 < f; s0 += 8) {
      Tf32Pair a[2][4];  // [h: entry t or t + 4][column e]
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int s = s0 + t + 4 * h;
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        float Fs = 0.0f;
        if (s < f) x = *reinterpret_cast<const float4*>(u + s * ldu + c), Fs = F[s];
        a[h][0] = tf32_split(Fs * x.x), a[h][1] = tf32_split(Fs * x.y);
        a[h][2] = tf32_split(Fs * x.z), a[h][3] = tf32_split(Fs * x.w);
      }
      const int sa = s0 + t, sb = s0 + t + 4;
#pragma unroll
      for (int j = 0; j < kSteps; ++j) {
        // n = g ↔ row 8j + g/2 + 4·(g%2): D's n 2t, 2t + 1 are rows t, t + 4.
        const int i = min(p0 + row(j, g % 2, g / 2), dk - 1);
        const float b0 = sa < f ? key(sa, i) : 0.0f, b1 = sb < f ? key(sb, i) : 0.0f;
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          float dd[4] = {v[j][0][2 * k], v[j][1][2 * k], v[j][0][2 * k + 1], v[j][1][2 * k + 1]};
          mma_tf32(dd, a[0][2 * k].hi, a[0][2 * k + 1].hi, a[1][2 * k].hi, a[1][2 * k + 1].hi, b0, b1);
          mma_tf32(dd, a[0][2 * k].lo, a[0][2 * k + 1].lo, a[1][2 * k].lo, a[1][2 * k + 1].lo, b0, b1);
          v[j][0][2 * k] = dd[0], v[j][1][2 * k] = dd[1], v[j][0][2 * k + 1] = dd[2], v[j][1][2 * k + 1] = dd[3];
        }
      }
    }
  }
};

// The key dots k_s·x for the log entries s < n and the 8 vectors x (xt as
// in GdnMmaTile::outputs), this warp's share: the rows' k steps w,
// w + nw, …, into part (8, ld) by vector, zeros where the warp has none.
// A = the keys (m = entry, k = row; bf16, so exact), B = the vectors: one
// mma per 16 entries and 8 rows, where FMAs took a product per entry, row
// and vector (H200, ncu: an eighth of a verify block's instructions).
template <typename Key>
__device__ void gdn_mma_key_dots(float* part, int ld, const float* xt, int n, int dk, Key&& key, int w, int nw,
                                 int lane) {
  const int g = lane / 4, t = lane % 4;
  for (int s0 = 0; s0 < n; s0 += 16) {
    // Entries past n read entry n − 1 and rows past dk row dk − 1 (finite;
    // xt is zero there): their sums are not stored.
    const int sa = min(s0 + g, n - 1), sb = min(s0 + g + 8, n - 1);
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    for (int i0 = 8 * w; i0 < dk; i0 += 8 * nw) {
      const int ia = min(i0 + t, dk - 1), ib = min(i0 + t + 4, dk - 1);
      const float b0 = xt[(i0 + t) * GdnMmaTile::kVectors + g], b1 = xt[(i0 + t + 4) * GdnMmaTile::kVectors + g];
      mma_tf32(d, __float_as_uint(key(sa, ia)), __float_as_uint(key(sb, ia)), __float_as_uint(key(sa, ib)),
               __float_as_uint(key(sb, ib)), b0, b1);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int s = s0 + g + 8 * (e / 2);  // c0..c3: (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)
      if (s < n) part[(2 * t + e % 2) * ld + s] = d[e];
    }
  }
}

// The sums d (GdnMmaTile::outputs) into out (n, ld): vector q's columns
// 32w + 4g … + 3 as one 16-byte store, for the vectors q < n.
__device__ __forceinline__ void gdn_mma_write_sums(const float (&d)[2][4], float* out, int ld, int n, int w, int lane) {
  const int t = lane % 4, c = GdnMmaTile::col(w, lane);
  if (2 * t < n) *reinterpret_cast<float4*>(out + 2 * t * ld + c) = make_float4(d[0][0], d[0][2], d[1][0], d[1][2]);
  if (2 * t + 1 < n)
    *reinterpret_cast<float4*>(out + (2 * t + 1) * ld + c) = make_float4(d[0][1], d[0][3], d[1][1], d[1][3]);
}

}  // namespace replayssm::ops::cuda
