// A mixture-of-experts feed-forward's routed part on CUDA: the device
// versions of ops/cpu/moe_routing.h (moe_route) and of ops/cpu/moe.h's
// routed experts, in five launches a block:
//
//   moe_router_cuda          logits = x · routerᵀ in fp32 (bf16 x, fp32 router);
//   moe_route_cuda           each row's K experts and weights (moe_route's math,
//                            ties to the lower index, experts ascending);
//   moe_group_cuda           the (row, j) pairs sorted by expert, rows ascending
//                            within an expert (the CPU's counting sort), and the
//                            tiles the grouped linear runs;
//   moe_grouped_linear_cuda  each expert's rows through its matrix (bf16 stacks
//                            (E, N, Kd), fp32 sums on tensor cores): each chosen
//                            expert's weights are read once a call however many
//                            rows chose it, an expert no row chose not at all;
//   moe_combine_cuda         each row's experts' outputs times their weights in
//                            ascending expert order, plus the shared expert's
//                            output (gated or not), into one bf16 row.
//
// The activation between the up and down projections is
// elementwise.h's mlp_activation_cuda over the sorted rows. Every array is
// on the device; shapes are checked before anything touches it
// (cudaErrorInvalidValue); rows = 0 is a no-op. A step's counts stay on the
// device: no launch here waits for the host, so a step with them can be
// captured in a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "replayssm/op_params.h"

namespace replayssm::ops::cuda {

// The launchers' limits (cudaErrorInvalidValue past them): the routing
// keeps a row's scores and choices on chip. The backend refuses a model
// past them by its config field (num_experts, num_experts_per_tok).
inline constexpr int64_t kMoeMaxExperts = 512;
inline constexpr int64_t kMoeMaxTopK = 16;

// logits: (rows, E) fp32, row stride ldl ≥ E. x: (rows, D) bf16, stride ldx.
// router: (E, D) fp32. Sums in fp32 (transformers routes in fp32 too).
cudaError_t moe_router_cuda(const uint16_t* x, int64_t ldx, int64_t rows, int64_t D, const float* router, int64_t E,
                            float* logits, int64_t ldl, cudaStream_t stream);

// As ops::cpu::moe_route (p.correction_bias on the device, or nullptr).
// experts, weights: (rows, K) each, dense.
cudaError_t moe_route_cuda(const MoeRoutingParams& p, const float* logits, int64_t ld, int64_t rows, int32_t* experts,
                           float* weights, cudaStream_t stream);

// The pairs grouped by expert, and the grouped linear's work list. Sizes:
// first E + 1, src_row and slot_of rows·K, tiles moe_max_tiles(rows·K, E),
// n_tiles 1 (all int32, caller-owned, no initial contents needed).
struct MoeGroups {
  int32_t* first = nullptr;    // expert e's sorted slots are [first[e], first[e + 1])
  int32_t* src_row = nullptr;  // the row of sorted slot i
  int32_t* slot_of = nullptr;  // the sorted slot of pair (r, j), at r·K + j
  int32_t* tiles = nullptr;    // the grouped linear's tiles (opaque to callers)
  int32_t* n_tiles = nullptr;  // how many of them this call has
};

// Sorted rows per grouped-linear tile: a tile is up to this many
// consecutive sorted slots of one expert, so an expert of c rows has
// ceil(c / kMoeTileRows) tiles.
inline constexpr int64_t kMoeTileRows = 64;

// The most tiles `slots` sorted rows over E experts can need:
// slots / kMoeTileRows + min(E, slots).
int64_t moe_max_tiles(int64_t slots, int64_t E);

cudaError_t moe_group_cuda(const int32_t* experts, int64_t rows, int64_t K, int64_t E, const MoeGroups& g,
                           cudaStream_t stream);

struct MoeGroupedLinearArgs {
  int64_t slots = 0;             // rows·K sorted rows
  int64_t E = 0, N = 0, Kd = 0;  // experts; each expert's matrix is (N, Kd)
  const uint16_t* x = nullptr;   // bf16 inputs, row stride ldx
  int64_t ldx = 0;
  const int32_t* x_row = nullptr;  // sorted slot i reads x row x_row[i] (src_row); nullptr: row i
  const uint16_t* w = nullptr;     // (E, N, Kd) bf16 stacks, expert e at w + e·N·Kd
  const int32_t* first = nullptr;  // MoeGroups::first
  const int32_t* tiles = nullptr;  // MoeGroups::tiles, n_tiles
  const int32_t* n_tiles = nullptr;
  uint16_t* out = nullptr;       // (slots, N) bf16, row stride ldo; or
  float* out_f32 = nullptr;      // (slots, N) fp32 (exactly one of the two)
  int64_t ldo = 0;
};

cudaError_t moe_grouped_linear_cuda(const MoeGroupedLinearArgs& a, cudaStream_t stream);

struct MoeCombineArgs {
  int64_t rows = 0, K = 0, D = 0;
  const float* y = nullptr;          // (rows·K, D) fp32 sorted rows' outputs, row stride ldy
  int64_t ldy = 0;
  const int32_t* experts = nullptr;  // (rows, K) ascending: the order of the sum
  const float* weights = nullptr;    // (rows, K)
  const int32_t* slot_of = nullptr;  // MoeGroups::slot_of
  const uint16_t* shared = nullptr;  // (rows, D) bf16 shared expert output, row stride lds; or nullptr
  int64_t lds = 0;
  const float* shared_gate = nullptr;  // (rows) fp32 gate logits (sigmoid applied here); or nullptr: ungated
  uint16_t* out = nullptr;             // (rows, D) bf16, row stride ldo
  int64_t ldo = 0;
};

cudaError_t moe_combine_cuda(const MoeCombineArgs& a, cudaStream_t stream);

}  // namespace replayssm::ops::cuda
