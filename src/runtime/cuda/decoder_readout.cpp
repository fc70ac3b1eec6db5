// Decoder::logits_row and Decoder::top_logprobs (see decoder.h): what the
// last step's logits say, read on demand after the step.
#include "runtime/cuda/decoder_impl.h"

namespace replayssm::cuda {

Status Decoder::logits_row(int64_t row, std::span<float> out) {
  Impl& I = *impl_;
  const int64_t V = I.m.config().vocab_size;
  if (row < 0 || row >= I.last_rows)
    return invalid_argument("cuda decode: logits row " + std::to_string(row) + " out of range [0, " +
                            std::to_string(I.last_rows) + ")");
  if (int64_t(out.size()) != V)
    return invalid_argument("cuda decode: a logits row is " + std::to_string(V) + " floats, got room for " +
                            std::to_string(out.size()));
  RSSM_CU(cudaMemcpyAsync(out.data(), I.logits + row * V, sizeof(float) * size_t(V), cudaMemcpyDeviceToHost, I.stream),
          "logits row");
  RSSM_CU(cudaStreamSynchronize(I.stream), "logits row");
  return {};
}

Status Decoder::top_logprobs(int k, std::span<int32_t> ids, std::span<double> lp) {
  Impl& I = *impl_;
  const int64_t V = I.m.config().vocab_size, rows = I.last_rows;
  if (rows == 0) return invalid_argument("cuda decode: top_logprobs before any step");
  if (k < 1 || k > std::min<int64_t>(V, oc::kTopLogprobsMaxK))
    return invalid_argument("cuda decode: top_logprobs k = " + std::to_string(k) + " out of range [1, " +
                            std::to_string(std::min<int64_t>(V, oc::kTopLogprobsMaxK)) + "]");
  if (int64_t(ids.size()) != rows * k || int64_t(lp.size()) != rows * k)
    return invalid_argument("cuda decode: top_logprobs fills " + std::to_string(rows * k) + " entries, got room for " +
                            std::to_string(std::min(ids.size(), lp.size())));
  if (rows * k > I.top_cap) {  // outside any capture: this runs eagerly
    cudaFree(I.top_ids), cudaFree(I.top_lp);
    I.top_ids = nullptr, I.top_lp = nullptr, I.top_cap = 0;
    RSSM_CU(cudaMalloc(reinterpret_cast<void**>(&I.top_ids), sizeof(int32_t) * size_t(rows * k)), "top_logprobs");
    RSSM_CU(cudaMalloc(reinterpret_cast<void**>(&I.top_lp), sizeof(double) * size_t(rows * k)), "top_logprobs");
    I.top_cap = rows * k;
  }
  RSSM_CU(oc::top_logprobs_cuda(I.logits, V, rows, V, k, I.top_ids, I.top_lp, I.stream), "top_logprobs");
  RSSM_CU(cudaMemcpyAsync(ids.data(), I.top_ids, sizeof(int32_t) * size_t(rows * k), cudaMemcpyDeviceToHost, I.stream),
          "top_logprobs");
  RSSM_CU(cudaMemcpyAsync(lp.data(), I.top_lp, sizeof(double) * size_t(rows * k), cudaMemcpyDeviceToHost, I.stream),
          "top_logprobs");
  RSSM_CU(cudaStreamSynchronize(I.stream), "top_logprobs");
  return {};
}

}  // namespace replayssm::cuda
