// Elementwise ops (see elementwise.h). The MLP activation gives a thread
// eight adjacent columns of a row where alignment allows; GDN's prepare
// gives each (row, q-or-k, key head) vector one warp — dk is a head
// dimension (≤ a few hundred), so one warp sum per vector — and each row's
// value heads to the block's threads.
#include "ops/cuda/elementwise.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ops/cuda/activation.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/row_reduce.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kEltThreads = 256;

// A thread takes kVec adjacent columns of one row (blockIdx.y, striding
// over rows past the grid's 65535): with kVec 8 each of up, gate and out
// moves by one 16-byte access. The element-per-thread loop this replaces,
// with its 64-bit division per element, took 29 µs at 256 rows of 21504
// on the H200 (ncu) for 22 MB: 0.8 TB/s.
template <int kVec>
__global__ void __launch_bounds__(kEltThreads) mlp_activation_kernel(Activation act, const uint16_t* gate, int64_t ldg,
                                                                     const uint16_t* up, int64_t ldu, int64_t rows,
                                                                     int64_t n, uint16_t* out, int64_t ldo) {
  pdl_begin();
  const int64_t c = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  if (c >= n) return;
  using Pack = std::conditional_t<kVec == 8, uint4, uint16_t>;
  static_assert(sizeof(Pack) == kVec * sizeof(uint16_t), "kVec is 1 or 8");
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const Pack u = *reinterpret_cast<const Pack*>(up + r * ldu + c);
    Pack g{};
    if (gate != nullptr) g = *reinterpret_cast<const Pack*>(gate + r * ldg + c);
    const uint16_t* ue = reinterpret_cast<const uint16_t*>(&u);
    const uint16_t* ge = reinterpret_cast<const uint16_t*>(&g);
    Pack o;
    uint16_t* oe = reinterpret_cast<uint16_t*>(&o);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float uf = bf(ue, e);
      put_bf(oe, e, gate != nullptr ? uf * activate_f(act, bf(ge, e)) : activate_f(act, uf));
    }
    *reinterpret_cast<Pack*>(out + r * ldo + c) = o;
  }
}

__global__ void __launch_bounds__(kEltThreads) gdn_prepare_kernel(GdnPrepareArgs p) {
  pdl_begin();
  const int64_t r = blockIdx.x;
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32, dk = p.dk;
  const float q_scale = 1.0f / sqrtf(static_cast<float>(dk));
  for (int v = w; v < 2 * p.Hk; v += nw) {  // v < Hk: q heads, then k heads
    const bool is_q = v < p.Hk;
    const int h = is_q ? v : v - p.Hk;
    const uint16_t* src = (is_q ? p.q + r * p.ldq : p.k + r * p.ldk) + int64_t(h) * dk;
    uint16_t* dst = (is_q ? p.q_out : p.k_out) + (r * p.Hk + h) * dk;
    float ss = 0.0f;
    for (int i = lane; i < dk; i += 32) ss += bf(src, i) * bf(src, i);
    ss = warp_sum(ss);
    const float inv = 1.0f / sqrtf(ss + p.l2_eps), scale = is_q ? q_scale : 1.0f;
    for (int i = lane; i < dk; i += 32) put_bf(dst, i, (bf(src, i) * inv) * scale);
  }
  for (int h = threadIdx.x; h < p.Hv; h += blockDim.x) {
    p.g[r * p.Hv + h] = -expf(p.A_log[h]) * softplus_f(bf(p.a, r * p.lda + h) + p.dt_bias[h]);
    p.beta[r * p.Hv + h] = sigmoid_f(bf(p.b, r * p.ldb + h));
  }
}

}  // namespace

cudaError_t mlp_activation_cuda(Activation act, const uint16_t* gate, int64_t ldg, const uint16_t* up, int64_t ldu,
                                int64_t rows, int64_t n, uint16_t* out, int64_t ldo, cudaStream_t stream) {
  if (!known_activation(act) || rows < 0 || n < 1 || up == nullptr || out == nullptr || ldu < n || ldo < n ||
      (gate != nullptr && ldg < n))
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  // Eight columns a thread where every row of up, gate and out starts on
  // 16 bytes and n is a multiple of 8 (the real models' widths); else one.
  auto aligned = [](const void* p, int64_t ld) { return aligned_to(p, 16) && ld % 8 == 0; };
  const bool vec = n % 8 == 0 && aligned(up, ldu) && aligned(out, ldo) && (gate == nullptr || aligned(gate, ldg));
  const int64_t per_block = int64_t(kEltThreads) * (vec ? 8 : 1);
  const int64_t col_blocks = (n + per_block - 1) / per_block;
  if (col_blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(unsigned(col_blocks), unsigned(std::min<int64_t>(rows, 65535)));
  launch_kernel(vec ? mlp_activation_kernel<8> : mlp_activation_kernel<1>, grid, kEltThreads, 0, stream, act, gate, ldg,
                up, ldu, rows, n, out, ldo);
  return cudaGetLastError();
}

cudaError_t gdn_prepare_cuda(const GdnPrepareArgs& p, cudaStream_t stream) {
  const int64_t dqk = int64_t(p.Hk) * p.dk;
  if (p.rows < 0 || p.Hk < 1 || p.dk < 1 || p.Hv < 1 || p.Hv % p.Hk != 0 || p.A_log == nullptr ||
      p.dt_bias == nullptr || p.q == nullptr || p.k == nullptr || p.a == nullptr || p.b == nullptr ||
      p.q_out == nullptr || p.k_out == nullptr || p.g == nullptr || p.beta == nullptr || p.ldq < dqk ||
      p.ldk < dqk || p.lda < p.Hv || p.ldb < p.Hv || p.rows > 0x7fffffff)
    return cudaErrorInvalidValue;
  // In place only over the same dense rows (a warp reads its whole vector before writing it).
  if ((p.q_out == p.q && p.ldq != dqk) || (p.k_out == p.k && p.ldk != dqk)) return cudaErrorInvalidValue;
  if (p.rows == 0) return cudaSuccess;
  launch_kernel(gdn_prepare_kernel, unsigned(p.rows), kEltThreads, 0, stream, p);
  return cudaGetLastError();
}

}  // namespace replayssm::ops::cuda
