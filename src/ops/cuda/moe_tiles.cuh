// The grouped linear's work list, as moe_group_cuda writes it and
// moe_grouped_linear_cuda reads it (moe.h calls it opaque): one int32 per
// tile, the expert in the low kMoeTileExpertBits bits and the tile's index
// among that expert's tiles above them. One word, not a (expert, start)
// pair, so that MoeGroups::tiles holds moe_max_tiles entries and no more;
// the tile's first sorted slot is first[e] + index·kMoeTileRows.
#pragma once

#include <cstdint>

#include "ops/cuda/moe.h"

namespace replayssm::ops::cuda {

constexpr int kMoeTileExpertBits = 10;
static_assert(kMoeMaxExperts <= (int64_t{1} << kMoeTileExpertBits), "an expert fits its bits");
// The most sorted slots a call takes: every tile index fits the 21 bits
// above the expert's.
constexpr int64_t kMoeMaxSlots = int64_t{1} << 26;
static_assert(kMoeMaxSlots / kMoeTileRows < (int64_t{1} << (31 - kMoeTileExpertBits)), "a tile index fits its bits");

__host__ __device__ __forceinline__ int32_t moe_tile_code(int32_t expert, int32_t index) {
  return expert | (index << kMoeTileExpertBits);
}
__host__ __device__ __forceinline__ int32_t moe_tile_expert(int32_t code) {
  return code & ((1 << kMoeTileExpertBits) - 1);
}
__host__ __device__ __forceinline__ int32_t moe_tile_index(int32_t code) { return code >> kMoeTileExpertBits; }

}  // namespace replayssm::ops::cuda
