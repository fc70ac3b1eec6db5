// The ends of a decode step on CUDA: the embedding gather that starts it
// and the greedy pick that ends it.
//
//   embedding_cuda — h[r] = table[token[r]] into the fp32 residual stream
//                    (forward.cpp copies the row likewise);
//   argmax_cuda    — per row of logits, the index of the largest value,
//                    the lowest index on ties (decode/sampler.h argmax);
//   top_logprobs_cuda — per row, the k largest log-softmax values and
//                    their ids, largest first, lower id on ties, the
//                    log-sum-exp in fp64 (decode/beam_search.h
//                    top_logprobs): what a beam step ranks, without
//                    copying the rows back;
//   logprob_of_cuda — per output, one token's log-softmax value (the
//                    CPU's log_prob), with top_logprobs_cuda's sum;
//   sample_cuda    — per output, the token decode/sampler.h sample_at
//                    draws from a logits row with a given uniform
//                    (temperature, top-p nucleus with ties by id), and
//                    its log-softmax at temperature 1 (log_prob): what a
//                    sampled step needs, without copying the rows back.
//                    The masses are summed in another order than the
//                    CPU's, so a cut or a uniform within rounding of a
//                    boundary (top_p × an equal row's size a whole number)
//                    may land one token apart.
//
// Shapes are checked before anything touches the device
// (cudaErrorInvalidValue); rows = 0 is a no-op.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace replayssm::ops::cuda {

// token: (rows) ids; table: (V, H) bf16, row stride ldt; h: (rows, H) fp32,
// row stride ldh. Ids are validated by the host at the boundary
// (Model::forward); a row whose id is outside [0, V) is written as zeros
// rather than read out of bounds.
cudaError_t embedding_cuda(const int32_t* token, int64_t rows, const uint16_t* table, int64_t V, int64_t H,
                           int64_t ldt, float* h, int64_t ldh, cudaStream_t stream);

// logits: (rows, V) fp32, row stride ld; out: (rows). One block per row.
// NaN never wins, except that a NaN at index 0 gives 0 as on the CPU
// (whose running best then compares false against everything).
cudaError_t argmax_cuda(const float* logits, int64_t ld, int64_t rows, int64_t V, int32_t* out, cudaStream_t stream);

// logits: (rows, V) fp32, row stride ld; ids, lp: (rows, k), 1 ≤ k ≤
// min(V, kTopLogprobsMaxK). One block per row, k passes over it.
constexpr int kTopLogprobsMaxK = 1024;
cudaError_t top_logprobs_cuda(const float* logits, int64_t ld, int64_t rows, int64_t V, int k, int32_t* ids,
                              double* lp, cudaStream_t stream);

// logits: (rows, V) fp32, row stride ld; row, token, out: (n). out[i] is
// the log-softmax at temperature 1 of row row[i] at token[i] (0 ≤ token <
// V, checked by the caller), its log-sum-exp summed in the order
// top_logprobs_cuda sums it (the same block and loop), so a token's number
// is bit for bit the one top_logprobs_cuda reports for it — as on the CPU,
// where log_prob and top_logprobs share one formula. One block per output.
cudaError_t logprob_of_cuda(const float* logits, int64_t ld, int64_t V, int64_t n, const int32_t* row,
                            const int32_t* token, double* out, cudaStream_t stream);

// One block per output i: row[i] names its logits row, r[i] ∈ [0, 1) its
// uniform. temperature 0 takes the argmax; top_p in (0, 1].
struct SampleArgs {
  const float* logits = nullptr;  // (rows, V) fp32, row stride ld
  int64_t ld = 0, V = 0;
  int64_t n = 0;                  // outputs
  const int32_t* row = nullptr;   // (n)
  const double* r = nullptr;      // (n)
  float temperature = 1.0f, top_p = 1.0f;
  int32_t* out = nullptr;         // (n) tokens
  double* lp = nullptr;           // (n) log-softmax of the token at temperature 1
};
cudaError_t sample_cuda(const SampleArgs& a, cudaStream_t stream);

}  // namespace replayssm::ops::cuda
