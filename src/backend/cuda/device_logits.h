// DeviceLogits: a step's kept logits rows on the device and the reads the
// Backend interface names, each by the host rule of ops/cpu/sampling.h
// (the specification every backend follows): argmax lowest id on ties
// (argmax_cuda), the k largest log-probabilities largest first with the
// lower id on ties and the log-sum-exp in fp64 (top_logprobs_cuda; a k over
// its limit on the host, from the row copied back), a draw at a given
// uniform — the first token in id order whose cumulative probability passes
// r at the request's temperature and top-p (sample_cuda) — and a token's
// log-probability at temperature 1 (logprob_of_cuda, whose sum is
// top_logprobs_cuda's, so the numbers agree bit for bit whichever read
// asks). Only the rows read come back to the host.
//
// sample_cuda sums its masses in another order than the CPU, so a cut or a
// uniform within rounding of a boundary may land one token apart (as its
// header says); the parity tests draw random rows and uniforms.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "replayssm/backend.h"
#include "replayssm/sampling.h"
#include "replayssm/status.h"

namespace replayssm::cuda {

class DeviceLogits {
 public:
  explicit DeviceLogits(int64_t vocab) : V_(vocab) {}
  ~DeviceLogits();
  DeviceLogits(const DeviceLogits&) = delete;
  DeviceLogits& operator=(const DeviceLogits&) = delete;

  // Room for `rows` rows of the next step (grown, never shrunk); until
  // set_kept() no row is readable.
  Status reserve(int64_t rows);
  float* rows() { return rows_; }  // (capacity, V) fp32, row-major
  void set_kept(int64_t n) { kept_ = n; }
  int64_t kept() const { return kept_; }
  // For tests: n rows from the host become the kept rows.
  Status load(std::span<const float> rows, int64_t n, cudaStream_t stream);

  Status logits(std::span<const int64_t> rows, float* out, cudaStream_t stream);
  Status argmax(std::span<const int64_t> rows, int32_t* out, cudaStream_t stream);
  Status top_logprobs(std::span<const int64_t> rows, int64_t k, TokenLogprob* out, cudaStream_t stream);
  Status sample(std::span<const SampleRequest> requests, int32_t* ids, double* lp, cudaStream_t stream);
  Status logprobs_of(std::span<const int64_t> rows, std::span<const int32_t> tokens, double* out,
                     cudaStream_t stream);

  int64_t bytes() const { return cap_ * V_ * 4 + scratch_bytes_; }

 private:
  Status check_rows(std::span<const int64_t> rows) const;
  // Device scratch of at least `bytes` (the reads' index and output arrays).
  Status scratch(int64_t bytes, void** out);
  int64_t V_ = 0;
  float* rows_ = nullptr;
  int64_t cap_ = 0, kept_ = 0;
  void* scratch_ = nullptr;
  int64_t scratch_bytes_ = 0;
};

}  // namespace replayssm::cuda
