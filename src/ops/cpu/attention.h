// Causal GQA attention of a segment's queries over a sequence's K/V rows.
#pragma once

#include <cstdint>

#include "replayssm/op_params.h"

namespace replayssm::ops::cpu {

// q: (T, Hq·D) stride ldq, the queries at positions pos0 .. pos0+T-1.
// kv: rows 0 .. pos0+T-1 of K and V, each (Hkv·D), paged; query t attends
//     to rows [0, pos0 + t]. Query head h reads KV head h/(Hq/Hkv).
// out: (T, Hq·D) stride ldo. Softmax in fp32 with max subtraction.
void attention(const AttentionParams& p, const float* q, int64_t ldq, int64_t pos0, int64_t T,
               const KvView& kv, float* out, int64_t ldo);

}  // namespace replayssm::ops::cpu
