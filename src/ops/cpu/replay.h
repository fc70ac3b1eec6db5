// Replay kernels (CPU reference): an SSM layer's outputs for new tokens from
// a checkpoint and a log of inputs, without a per-sequence state being read
// and written every step. See ReplayArgs in op_params.h for the contract.
#pragma once

#include <cstdint>
#include <vector>

#include "replayssm/op_params.h"

namespace replayssm::ops::cpu {

// xbc: (n, C) pre-conv rows, stride ldxbc; dt_raw: (n, H), stride lddt;
// y: (n, H·P) outputs incl. the D skip, stride ldy.
void mamba2_replay(const Conv1dParams& conv, const Mamba2Params& p, const ReplayArgs& a,
                   const float* xbc, int64_t ldxbc, const float* dt_raw, int64_t lddt, float* y,
                   int64_t ldy, std::vector<float>* scratch);

// qkv: (n, C) pre-conv rows; a_in, b_in: (n, Hv); o: (n, Hv·dv).
void gdn_replay(const Conv1dParams& conv, const GdnParams& p, const ReplayArgs& a, const float* qkv,
                int64_t ldqkv, const float* a_in, int64_t lda, const float* b_in, int64_t ldb,
                float* o, int64_t ldo, std::vector<float>* scratch);

}  // namespace replayssm::ops::cpu
