// What the CUDA benches share: CK, which ends the bench on a CUDA error and
// names the call, the read-only bandwidth probes of read_probe.cu and the
// write-heavy one of fanout_probe.cu.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>

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
// legacy stream; `out` is a 4-byte sink, `sms` the device's SM count.
cudaError_t read_ld(const void* p, size_t bytes, float* out, int sms);
cudaError_t read_bulk(const void* p, size_t bytes, float* out, int sms);
// Reads `bytes` at src once and writes them `copies` times, copy c at
// dst + c·bytes (fanout_probe.cu); bytes a multiple of 16, copies 4 (the
// verify's T; other counts are refused).
cudaError_t fanout_copy(const void* src, void* dst, size_t bytes, int copies, int sms);
}  // namespace replayssm::bench
