// Decoder::logits_row, Decoder::top_logprobs and Decoder::sample (see
// decoder.h): what the last step's logits say, read on demand after the step.
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

Status Decoder::sample(float temperature, float top_p, std::span<const int32_t> rows, std::span<const double> r,
                       std::span<int32_t> ids, std::span<double> lp) {
  Impl& I = *impl_;
  const int64_t V = I.m.config().vocab_size, n = int64_t(rows.size());
  if (I.last_rows == 0) return invalid_argument("cuda decode: sample before any step");
  if (!(temperature >= 0.0f) || !(top_p > 0.0f && top_p <= 1.0f))
    return invalid_argument("cuda decode: sample needs temperature >= 0 and top_p in (0, 1]");
  if (int64_t(r.size()) != n || int64_t(ids.size()) != n || int64_t(lp.size()) != n)
    return invalid_argument("cuda decode: sample takes a row, a uniform, a token and a log-probability per output");
  for (int64_t i = 0; i < n; ++i) {
    if (rows[size_t(i)] < 0 || rows[size_t(i)] >= I.last_rows)
      return invalid_argument("cuda decode: sample row " + std::to_string(rows[size_t(i)]) + " out of range [0, " +
                              std::to_string(I.last_rows) + ")");
    if (!(r[size_t(i)] >= 0.0 && r[size_t(i)] < 1.0))
      return invalid_argument("cuda decode: a sample's uniform must be in [0, 1)");
  }
  if (n == 0) return {};
  if (n > I.sample_cap) {  // outside any capture: this runs eagerly
    cudaFree(I.sample_buf);
    I.sample_buf = nullptr, I.sample_cap = 0;
    RSSM_CU(cudaMalloc(&I.sample_buf, size_t(n) * 2 * (sizeof(double) + sizeof(int32_t))), "sample");
    I.sample_cap = n;
  }
  double* d_r = static_cast<double*>(I.sample_buf);
  double* d_lp = d_r + n;
  int32_t* d_rows = reinterpret_cast<int32_t*>(d_lp + n);
  int32_t* d_ids = d_rows + n;
  RSSM_CU(cudaMemcpyAsync(d_r, r.data(), sizeof(double) * size_t(n), cudaMemcpyHostToDevice, I.stream), "sample");
  RSSM_CU(cudaMemcpyAsync(d_rows, rows.data(), sizeof(int32_t) * size_t(n), cudaMemcpyHostToDevice, I.stream), "sample");
  oc::SampleArgs a;
  a.logits = I.logits, a.ld = V, a.V = V, a.n = n, a.row = d_rows, a.r = d_r;
  a.temperature = temperature, a.top_p = top_p, a.out = d_ids, a.lp = d_lp;
  RSSM_CU(oc::sample_cuda(a, I.stream), "sample");
  RSSM_CU(cudaMemcpyAsync(ids.data(), d_ids, sizeof(int32_t) * size_t(n), cudaMemcpyDeviceToHost, I.stream), "sample");
  RSSM_CU(cudaMemcpyAsync(lp.data(), d_lp, sizeof(double) * size_t(n), cudaMemcpyDeviceToHost, I.stream), "sample");
  RSSM_CU(cudaStreamSynchronize(I.stream), "sample");
  return {};
}

}  // namespace replayssm::cuda
