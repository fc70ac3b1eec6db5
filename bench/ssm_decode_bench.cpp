// Mamba2 decode kernels on the GPU: standard (read + write the state every
// token) against replay (read the checkpoint, write it once per W tokens),
// at Nemotron-H-8B shapes (128 heads × 64, state 128, 8 groups, fp32 state,
// bf16 inputs). For each batch it counts the bytes that must move, times
// the kernels with events after warm-up (median of 7 runs), and reports µs,
// GB/s, the fraction of the measured device copy bandwidth, and the
// replay/standard speed ratio from the same run. State slots rotate so the
// working set is far larger than the 60 MB L2.
//
// Usage: replayssm_ssm_bench [JSON_OUT]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "ops/cuda/mamba2_decode.h"

namespace {

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e = (x);                                                               \
    if (e != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

template <typename F>
double median_us(F&& run, int iters) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) run(i);  // warm-up
  CK(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    CK(cudaEventRecord(a));
    for (int i = 0; i < iters; ++i) run(r * iters + i);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(1e3 * ms / iters);
  }
  std::sort(t.begin(), t.end());
  return t[3];
}

}  // namespace

int main(int argc, char** argv) {
  using replayssm::ops::cuda::Mamba2DecodeArgs;
  const int H = 128, P = 64, N = 128, G = 8, W = 16;
  const double state_bytes = 4.0 * H * P * N;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  // Measured copy bandwidth: device-to-device, counting read + write.
  const size_t copy_n = size_t(1) << 30;
  void *src, *dst;
  CK(cudaMalloc(&src, copy_n));
  CK(cudaMalloc(&dst, copy_n));
  const double copy_us = median_us([&](int) { CK(cudaMemcpyAsync(dst, src, copy_n, cudaMemcpyDeviceToDevice)); }, 5);
  const double copy_gbs = 2.0 * copy_n / (copy_us * 1e3);
  CK(cudaFree(src));
  CK(cudaFree(dst));
  std::printf("%s: measured copy bandwidth %.0f GB/s (read + write)\n\n", prop.name, copy_gbs);
  std::printf("%6s | %10s %8s %6s | %12s %8s %6s | %7s | %9s %9s\n", "batch", "std us", "GB/s", "%copy",
              "replay us/tok", "GB/s", "%copy", "ratio", "replay us", "flush us");
  std::string json = "{\"device\": \"" + std::string(prop.name) + "\", \"copy_gbs\": " + std::to_string(copy_gbs) +
                     ", \"shape\": {\"H\": 128, \"P\": 64, \"N\": 128, \"G\": 8, \"W\": 16}, \"rows\": [";
  bool first = true;
  for (int batch : {1, 8, 64, 256, 512}) {
    const int rot = std::max(2, int((512.0 * (1 << 20)) / (batch * state_bytes)) + 1);
    const int slots = batch * rot;
    float* state;
    CK(cudaMalloc(reinterpret_cast<void**>(&state), size_t(slots) * H * P * N * 4));
    CK(cudaMemset(state, 0, size_t(slots) * H * P * N * 4));
    std::vector<int32_t> h_slot(size_t(batch) * rot);
    for (size_t i = 0; i < h_slot.size(); ++i) h_slot[i] = int32_t(i);
    int32_t* slot;
    CK(cudaMalloc(reinterpret_cast<void**>(&slot), h_slot.size() * 4));
    CK(cudaMemcpy(slot, h_slot.data(), h_slot.size() * 4, cudaMemcpyHostToDevice));
    auto zeros = [](size_t bytes) {
      void* p;
      CK(cudaMalloc(&p, bytes));
      CK(cudaMemset(p, 0, bytes));
      return p;
    };
    float* params = static_cast<float*>(zeros(3 * H * 4));
    Mamba2DecodeArgs a;
    a.batch = batch, a.H = H, a.P = P, a.N = N, a.G = G, a.W = W;
    a.A_log = params, a.D = params + H, a.dt_bias = params + 2 * H;
    a.state = state;
    a.x = static_cast<uint16_t*>(zeros(size_t(batch) * H * P * 2));
    a.Bm = static_cast<uint16_t*>(zeros(size_t(batch) * G * N * 2));
    a.Cm = static_cast<uint16_t*>(zeros(size_t(batch) * G * N * 2));
    a.dt_raw = static_cast<float*>(zeros(size_t(batch) * H * 4));
    a.y = static_cast<uint16_t*>(zeros(size_t(batch) * H * P * 2));
    a.log_x = static_cast<uint16_t*>(zeros(size_t(batch) * W * H * P * 2));
    a.log_B = static_cast<uint16_t*>(zeros(size_t(batch) * W * G * N * 2));
    a.log_dt = static_cast<float*>(zeros(size_t(batch) * W * H * 4));
    // n_log tables 0..W for the replay cycle.
    std::vector<int32_t*> n_logs;
    for (int k = 0; k <= W; ++k) {
      std::vector<int32_t> h(batch, k);
      int32_t* d;
      CK(cudaMalloc(reinterpret_cast<void**>(&d), batch * 4));
      CK(cudaMemcpy(d, h.data(), batch * 4, cudaMemcpyHostToDevice));
      n_logs.push_back(d);
    }
    auto at = [&](int i) {
      Mamba2DecodeArgs r = a;
      r.slot = slot + size_t(i % rot) * batch;
      return r;
    };
    const double std_us = median_us([&](int i) { CK(replayssm::ops::cuda::mamba2_step_cuda(at(i), nullptr)); }, 20);
    // A replay cycle: W outputs over a growing log, then one flush.
    const double cycle_us = median_us(
        [&](int i) {
          Mamba2DecodeArgs r = at(i);
          for (int k = 0; k < W; ++k) {
            r.n_log = n_logs[k];
            CK(replayssm::ops::cuda::mamba2_replay_cuda(r, nullptr));
          }
          r.n_log = n_logs[W];
          CK(replayssm::ops::cuda::mamba2_flush_cuda(r, nullptr));
        },
        4);
    const double rep_us = cycle_us / W;
    const double rep_only_us = median_us(
        [&](int i) {
          Mamba2DecodeArgs r = at(i);
          r.n_log = n_logs[W / 2];
          CK(replayssm::ops::cuda::mamba2_replay_cuda(r, nullptr));
        },
        20);
    const double flush_us = median_us(
        [&](int i) {
          Mamba2DecodeArgs r = at(i);
          r.n_log = n_logs[W];
          CK(replayssm::ops::cuda::mamba2_flush_cuda(r, nullptr));
        },
        10);
    // Bytes that must move per token: standard reads and writes the state;
    // replay reads it, reads the log so far, and writes it once per W.
    const double in_bytes = batch * (H * P * 2.0 + 2 * G * N * 2.0 + H * 4.0 + H * P * 2.0);
    const double std_bytes = batch * 2 * state_bytes + in_bytes;
    const double log_entry = H * P * 2.0 + G * N * 2.0 + H * 4.0;
    const double rep_bytes = batch * (state_bytes + (W - 1) / 2.0 * log_entry + (2 * state_bytes + W * log_entry) / W) + in_bytes;
    const double std_gbs = std_bytes / (std_us * 1e3), rep_gbs = rep_bytes / (rep_us * 1e3);
    std::printf("%6d | %10.1f %8.0f %5.0f%% | %12.1f %8.0f %5.0f%% | %6.2fx | %9.1f %9.1f\n", batch, std_us, std_gbs,
                100 * std_gbs / copy_gbs, rep_us, rep_gbs, 100 * rep_gbs / copy_gbs, std_us / rep_us, rep_only_us,
                flush_us);
    char row[400];
    std::snprintf(row, sizeof row,
                  "%s{\"batch\": %d, \"standard_us\": %.2f, \"standard_gbs\": %.1f, \"replay_us_per_token\": %.2f, "
                  "\"replay_gbs\": %.1f, \"replay_over_standard\": %.3f, \"replay_kernel_us\": %.2f, \"flush_us\": %.2f}",
                  first ? "" : ", ", batch, std_us, std_gbs, rep_us, rep_gbs, std_us / rep_us, rep_only_us, flush_us);
    json += row;
    first = false;
    CK(cudaDeviceSynchronize());
    CK(cudaFree(state));
  }
  json += "]}\n";
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "w");
    if (f) {
      std::fputs(json.c_str(), f);
      std::fclose(f);
    }
  }
  return 0;
}
