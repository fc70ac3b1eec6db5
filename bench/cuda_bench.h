// What the CUDA benches share: CK, which ends the bench on a CUDA error and
// names the call, the read-only bandwidth probes of read_probe.cu and the
// write-heavy one of fanout_probe.cu, and a timer of launches on a stream.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

namespace replayssm::bench {
// Reads `bytes` at p once (16-byte loads / the bulk copy engine) on the
// legacy stream (read_ld: on `stream` where given); `out` is a 4-byte
// sink, `sms` the device's SM count.
cudaError_t read_ld(const void* p, size_t bytes, float* out, int sms, cudaStream_t stream = nullptr);
cudaError_t read_bulk(const void* p, size_t bytes, float* out, int sms);
// Reads `bytes` at src once and writes them `copies` times, copy c at
// dst + c·bytes (fanout_probe.cu); bytes a multiple of 16, copies 4 (the
// verify's T; other counts are refused).
cudaError_t fanout_copy(const void* src, void* dst, size_t bytes, int copies, int sms);

// Median µs of launch() on stream s over `runs` timed calls after 2 warm-ups.
inline double median_us(cudaStream_t s, int runs, const std::function<void()>& launch) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 2; ++i) launch();
  std::vector<double> us;
  for (int i = 0; i < runs; ++i) {
    CK(cudaEventRecord(a, s));
    launch();
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, a, b));
    us.push_back(ms * 1e3);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// The device's read-only bandwidth in GB/s: the median of `runs` reads of a
// 1 GB buffer by 16-byte loads (read_ld, on the legacy stream: timed there).
inline double read_only_gbs(int runs, int sms) {
  const size_t n = size_t(1) << 30;
  void* probe;
  float* sink;
  CK(cudaMalloc(&probe, n));
  CK(cudaMalloc(reinterpret_cast<void**>(&sink), 4));
  CK(cudaMemset(probe, 0, n));
  const double us = median_us(nullptr, runs, [&] { CK(read_ld(probe, n, sink, sms)); });
  CK(cudaFree(probe));
  CK(cudaFree(sink));
  return double(n) / (us * 1e3);
}

}  // namespace replayssm::bench
