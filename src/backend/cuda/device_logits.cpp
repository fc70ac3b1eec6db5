// DeviceLogits (see device_logits.h).
#include "backend/cuda/device_logits.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_status.h"
#include "ops/cpu/sampling.h"
#include "ops/cuda/sampling.h"

namespace replayssm::cuda {

namespace oc = replayssm::ops::cuda;

#define RSSM_LG_CU(expr, what) RSSM_RETURN_IF_ERROR(cuda_status((expr), "cuda backend", (what)))

DeviceLogits::~DeviceLogits() {
  cudaFree(rows_);
  cudaFree(scratch_);
}

Status DeviceLogits::reserve(int64_t rows) {
  kept_ = 0;
  if (rows <= cap_) return {};
  const int64_t cap = std::max(rows, 2 * cap_);
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, size_t(cap * V_ * 4)); e != cudaSuccess) {
    cudaGetLastError();
    return out_of_budget("cuda backend: cannot allocate " + std::to_string(cap * V_ * 4) + " bytes for " +
                         std::to_string(cap) + " logits rows: " + cudaGetErrorString(e));
  }
  cudaFree(rows_);
  rows_ = static_cast<float*>(p), cap_ = cap;
  return {};
}

Status DeviceLogits::scratch(int64_t bytes, void** out) {
  if (bytes > scratch_bytes_) {
    cudaFree(scratch_);
    scratch_ = nullptr, scratch_bytes_ = 0;
    RSSM_LG_CU(cudaMalloc(&scratch_, size_t(bytes)), "logits reads' scratch");
    scratch_bytes_ = bytes;
  }
  *out = scratch_;
  return {};
}

Status DeviceLogits::load(std::span<const float> rows, int64_t n, cudaStream_t stream) {
  if (int64_t(rows.size()) != n * V_) return invalid_argument("cuda backend: logits rows of the wrong size");
  RSSM_RETURN_IF_ERROR(reserve(n));
  RSSM_LG_CU(cudaMemcpyAsync(rows_, rows.data(), sizeof(float) * rows.size(), cudaMemcpyHostToDevice, stream),
             "logits rows");
  RSSM_LG_CU(cudaStreamSynchronize(stream), "logits rows");
  kept_ = n;
  return {};
}

Status DeviceLogits::check_rows(std::span<const int64_t> rows) const {
  for (int64_t r : rows)
    if (r < 0 || r >= kept_)
      return invalid_argument("cuda backend: logits row " + std::to_string(r) + " was not kept (the last step kept " +
                              std::to_string(kept_) + ")");
  return {};
}

Status DeviceLogits::logits(std::span<const int64_t> rows, float* out, cudaStream_t stream) {
  RSSM_RETURN_IF_ERROR(check_rows(rows));
  for (size_t i = 0; i < rows.size(); ++i)
    RSSM_LG_CU(cudaMemcpyAsync(out + int64_t(i) * V_, rows_ + rows[i] * V_, sizeof(float) * size_t(V_),
                               cudaMemcpyDeviceToHost, stream),
               "logits");
  RSSM_LG_CU(cudaStreamSynchronize(stream), "logits");
  return {};
}

Status DeviceLogits::argmax(std::span<const int64_t> rows, int32_t* out, cudaStream_t stream) {
  RSSM_RETURN_IF_ERROR(check_rows(rows));
  if (rows.empty()) return {};
  // Every kept row in one launch (a row's argmax costs one pass over it),
  // then the rows asked for.
  void* d = nullptr;
  RSSM_RETURN_IF_ERROR(scratch(kept_ * 4, &d));
  int32_t* ids = static_cast<int32_t*>(d);
  RSSM_LG_CU(oc::argmax_cuda(rows_, V_, kept_, V_, ids, stream), "argmax");
  std::vector<int32_t> all(static_cast<size_t>(kept_));
  RSSM_LG_CU(cudaMemcpyAsync(all.data(), ids, sizeof(int32_t) * all.size(), cudaMemcpyDeviceToHost, stream), "argmax");
  RSSM_LG_CU(cudaStreamSynchronize(stream), "argmax");
  for (size_t i = 0; i < rows.size(); ++i) out[i] = all[size_t(rows[i])];
  return {};
}

Status DeviceLogits::top_logprobs(std::span<const int64_t> rows, int64_t k, TokenLogprob* out, cudaStream_t stream) {
  RSSM_RETURN_IF_ERROR(check_rows(rows));
  if (k < 1 || k > V_)
    return invalid_argument("top_logprobs: k must be in [1, " + std::to_string(V_) + "], got " + std::to_string(k));
  if (rows.empty()) return {};
  if (k > oc::kTopLogprobsMaxK) {  // past the kernel's passes: the host's rule on the rows copied back
    std::vector<float> row(static_cast<size_t>(V_));
    for (size_t i = 0; i < rows.size(); ++i) {
      RSSM_RETURN_IF_ERROR(logits({&rows[i], 1}, row.data(), stream));
      const std::vector<TokenLogprob> t = ops::cpu::top_logprobs(row, k);
      std::copy(t.begin(), t.end(), out + int64_t(i) * k);
    }
    return {};
  }
  const int64_t n = int64_t(rows.size()) * k;
  void* d = nullptr;
  RSSM_RETURN_IF_ERROR(scratch(n * 12, &d));
  double* lp = static_cast<double*>(d);
  int32_t* ids = reinterpret_cast<int32_t*>(lp + n);
  for (size_t i = 0; i < rows.size(); ++i)
    RSSM_LG_CU(oc::top_logprobs_cuda(rows_ + rows[i] * V_, V_, 1, V_, int(k), ids + int64_t(i) * k,
                                     lp + int64_t(i) * k, stream),
               "top_logprobs");
  std::vector<int32_t> hid(static_cast<size_t>(n));
  std::vector<double> hlp(static_cast<size_t>(n));
  RSSM_LG_CU(cudaMemcpyAsync(hid.data(), ids, sizeof(int32_t) * size_t(n), cudaMemcpyDeviceToHost, stream),
             "top_logprobs");
  RSSM_LG_CU(cudaMemcpyAsync(hlp.data(), lp, sizeof(double) * size_t(n), cudaMemcpyDeviceToHost, stream),
             "top_logprobs");
  RSSM_LG_CU(cudaStreamSynchronize(stream), "top_logprobs");
  for (int64_t i = 0; i < n; ++i) out[i] = {hid[size_t(i)], hlp[size_t(i)]};
  return {};
}

Status DeviceLogits::sample(std::span<const SampleRequest> requests, int32_t* ids, double* lp, cudaStream_t stream) {
  // Requests at one temperature and top-p go in one launch (the kernel
  // takes one of each).
  std::map<std::pair<float, float>, std::vector<size_t>> groups;
  for (size_t i = 0; i < requests.size(); ++i) {
    const SampleRequest& q = requests[i];
    RSSM_RETURN_IF_ERROR(check_rows({&q.row, 1}));
    RSSM_RETURN_IF_ERROR(check_sampling(q.params, "sample"));
    if (!(q.r >= 0.0 && q.r < 1.0))
      return invalid_argument("sample: the uniform must be in [0, 1), got " + std::to_string(q.r));
    groups[{q.params.temperature, q.params.top_p}].push_back(i);
  }
  for (const auto& [params, members] : groups) {
    const int64_t n = int64_t(members.size());
    std::vector<int32_t> row(static_cast<size_t>(n));
    std::vector<double> r(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      row[size_t(j)] = int32_t(requests[members[size_t(j)]].row);
      r[size_t(j)] = requests[members[size_t(j)]].r;
    }
    void* d = nullptr;
    RSSM_RETURN_IF_ERROR(scratch(n * 24, &d));
    double* d_r = static_cast<double*>(d);
    double* d_lp = d_r + n;
    int32_t* d_row = reinterpret_cast<int32_t*>(d_lp + n);
    int32_t* d_ids = d_row + n;
    RSSM_LG_CU(cudaMemcpyAsync(d_r, r.data(), sizeof(double) * size_t(n), cudaMemcpyHostToDevice, stream), "sample");
    RSSM_LG_CU(cudaMemcpyAsync(d_row, row.data(), sizeof(int32_t) * size_t(n), cudaMemcpyHostToDevice, stream),
               "sample");
    oc::SampleArgs a;
    a.logits = rows_, a.ld = V_, a.V = V_, a.n = n, a.row = d_row, a.r = d_r;
    a.temperature = params.first, a.top_p = params.second, a.out = d_ids, a.lp = d_lp;
    RSSM_LG_CU(oc::sample_cuda(a, stream), "sample");
    // The drawn token's log-probability by top_logprobs' sum, as the host's
    // log_prob gives top_logprobs' number.
    RSSM_LG_CU(oc::logprob_of_cuda(rows_, V_, V_, n, d_row, d_ids, d_lp, stream), "sample log-probability");
    std::vector<int32_t> hid(static_cast<size_t>(n));
    std::vector<double> hlp(static_cast<size_t>(n));
    RSSM_LG_CU(cudaMemcpyAsync(hid.data(), d_ids, sizeof(int32_t) * size_t(n), cudaMemcpyDeviceToHost, stream),
               "sample");
    RSSM_LG_CU(cudaMemcpyAsync(hlp.data(), d_lp, sizeof(double) * size_t(n), cudaMemcpyDeviceToHost, stream),
               "sample");
    RSSM_LG_CU(cudaStreamSynchronize(stream), "sample");
    for (int64_t j = 0; j < n; ++j) {
      ids[members[size_t(j)]] = hid[size_t(j)];
      if (lp != nullptr) lp[members[size_t(j)]] = hlp[size_t(j)];
    }
  }
  return {};
}

Status DeviceLogits::logprobs_of(std::span<const int64_t> rows, std::span<const int32_t> tokens, double* out,
                                 cudaStream_t stream) {
  RSSM_RETURN_IF_ERROR(check_rows(rows));
  if (rows.size() != tokens.size())
    return invalid_argument("logprobs_of: " + std::to_string(rows.size()) + " rows but " +
                            std::to_string(tokens.size()) + " tokens");
  for (int32_t t : tokens)
    if (t < 0 || t >= V_)
      return invalid_argument("logprobs_of: token id " + std::to_string(t) + " out of range [0, " +
                              std::to_string(V_) + ")");
  const int64_t n = int64_t(rows.size());
  if (n == 0) return {};
  std::vector<int32_t> idx(static_cast<size_t>(2 * n));
  for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = int32_t(rows[size_t(i)]), idx[size_t(n + i)] = tokens[size_t(i)];
  void* d = nullptr;
  RSSM_RETURN_IF_ERROR(scratch(n * 16, &d));
  double* d_out = static_cast<double*>(d);
  int32_t* d_idx = reinterpret_cast<int32_t*>(d_out + n);
  RSSM_LG_CU(cudaMemcpyAsync(d_idx, idx.data(), sizeof(int32_t) * idx.size(), cudaMemcpyHostToDevice, stream),
             "logprobs_of");
  RSSM_LG_CU(oc::logprob_of_cuda(rows_, V_, V_, n, d_idx, d_idx + n, d_out, stream), "logprobs_of");
  RSSM_LG_CU(cudaMemcpyAsync(out, d_out, sizeof(double) * size_t(n), cudaMemcpyDeviceToHost, stream), "logprobs_of");
  RSSM_LG_CU(cudaStreamSynchronize(stream), "logprobs_of");
  return {};
}

}  // namespace replayssm::cuda
