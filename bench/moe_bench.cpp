// The grouped linear of the MoE blocks (ops/cuda/moe.h) at the real
// models' shapes, against the same work as one cuBLAS GEMM per chosen
// expert (the counts known on the host, which a captured step does not
// have): Nemotron 3 Nano (E 128, K 6, D 2688, I 1856, relu² ungated) and
// Qwen3.5-35B-A3B (E 256, K 8, D 2048, I 512, SiLU-gated: up N 1024), up
// and down projections, from decode to prefill row counts, under uniform
// random routing.
//
//   replayssm_moe_bench [--runs 20] [--seed 1]
//
// Bytes counted: each chosen expert's matrix once, each sorted row's input
// once and its output once. Rates are set against the read-only bandwidth
// of the same run (16-byte loads over 1 GB, read_probe.cu). Both paths run
// as CUDA graphs (median of --runs launches after 2 warm-ups), so neither
// pays host launch costs; cuBLAS reads inputs already in sorted order,
// the grouped linear's up projection gathers its rows itself. ratio:
// cuBLAS µs over the grouped linear's (above 1: the grouped linear wins).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_bench.h"  // beside this file
#include "ops/cuda/moe.h"

using namespace replayssm;

namespace {

#define CB(x)                                                                   \
  do {                                                                          \
    if ((x) != CUBLAS_STATUS_SUCCESS) {                                         \
      std::fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #x);       \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

struct Model {
  const char* name;
  int64_t E, K, D, I;
  bool gated;
};

int usage() {
  std::fprintf(stderr, "usage: replayssm_moe_bench [--runs 20] [--seed 1]\n");
  return 2;
}

template <typename T>
T* dev_alloc(size_t n) {
  void* p = nullptr;
  CK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
  return static_cast<T*>(p);
}

// Rows' K distinct experts, uniform, ascending (as moe_route writes them).
std::vector<int32_t> random_routing(std::mt19937& g, int64_t rows, int64_t K, int64_t E) {
  std::vector<int32_t> all(static_cast<size_t>(E)), out;
  for (int64_t r = 0; r < rows; ++r) {
    std::iota(all.begin(), all.end(), 0);
    for (int64_t i = 0; i < K; ++i)
      std::swap(all[size_t(i)], all[size_t(std::uniform_int_distribution<int64_t>(i, E - 1)(g))]);
    std::sort(all.begin(), all.begin() + K);
    out.insert(out.end(), all.begin(), all.begin() + K);
  }
  return out;
}

double time_graph(cudaStream_t s, int runs, const std::function<void()>& body) {
  // Once outside the capture: cuBLAS loads its kernels and the grouped
  // linear raises its shared-memory limit on first use.
  body();
  CK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  body();
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphDestroy(g));
  const double us = bench::median_us(s, runs, [&] { CK(cudaGraphLaunch(ge, s)); });
  CK(cudaGraphExecDestroy(ge));
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 20;
  unsigned seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    if (a == "--runs") runs = std::atoi(argv[++i]);
    else if (a == "--seed") seed = unsigned(std::atoi(argv[++i]));
    else return usage();
  }
  if (runs < 1) return usage();

  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const double read_gbs = bench::read_only_gbs(runs, prop.multiProcessorCount);
  std::printf("%s: read-only bandwidth %.0f GB/s (16-byte loads); median of %d graph launches\n", prop.name, read_gbs,
              runs);

  cublasHandle_t blas;
  CB(cublasCreate(&blas));
  CB(cublasSetStream(blas, s));
  void* workspace;
  const size_t workspace_bytes = size_t(32) << 20;  // fixed, so that capture never allocates
  CK(cudaMalloc(&workspace, workspace_bytes));
  CB(cublasSetWorkspace(blas, workspace, workspace_bytes));

  const Model models[] = {{"Nemotron 3 Nano", 128, 6, 2688, 1856, false},
                          {"Qwen3.5-35B-A3B", 256, 8, 2048, 512, true}};
  const int64_t row_counts[] = {1, 8, 64, 256, 2048};
  std::mt19937 g(seed);
  std::printf("\n%-16s %-4s %5s %6s %4s | %9s %7s %6s %7s | %9s %7s | %6s\n", "model", "proj", "rows", "slots", "exp",
              "µs", "GB/s", "% read", "TFLOP/s", "cuBLAS µs", "TFLOP/s", "ratio");
  for (const Model& m : models) {
    const int64_t U = m.gated ? 2 * m.I : m.I, max_slots = 2048 * m.K;
    // Weights of 0x3c3c (≈ 0.011): finite sums, no upload.
    uint16_t* up = dev_alloc<uint16_t>(size_t(m.E * U * m.D));
    uint16_t* down = dev_alloc<uint16_t>(size_t(m.E * m.D * m.I));
    CK(cudaMemset(up, 0x3c, size_t(m.E * U * m.D) * 2));
    CK(cudaMemset(down, 0x3c, size_t(m.E * m.D * m.I) * 2));
    uint16_t* x = dev_alloc<uint16_t>(size_t(2048 * m.D));
    uint16_t* x_sorted = dev_alloc<uint16_t>(size_t(max_slots * m.D));
    uint16_t* h = dev_alloc<uint16_t>(size_t(max_slots * U));
    float* y = dev_alloc<float>(size_t(max_slots * m.D));
    CK(cudaMemset(x, 0x3c, size_t(2048 * m.D) * 2));
    CK(cudaMemset(x_sorted, 0x3c, size_t(max_slots * m.D) * 2));
    CK(cudaMemset(h, 0x3c, size_t(max_slots * U) * 2));
    int32_t* experts = dev_alloc<int32_t>(size_t(max_slots));
    int32_t* first = dev_alloc<int32_t>(size_t(m.E + 1));
    int32_t* src_row = dev_alloc<int32_t>(size_t(max_slots));
    int32_t* slot_of = dev_alloc<int32_t>(size_t(max_slots));
    int32_t* tiles = dev_alloc<int32_t>(size_t(ops::cuda::moe_max_tiles(max_slots, m.E)));
    int32_t* n_tiles = dev_alloc<int32_t>(1);
    const ops::cuda::MoeGroups groups{first, src_row, slot_of, tiles, n_tiles};

    for (int64_t rows : row_counts) {
      const int64_t slots = rows * m.K;
      const std::vector<int32_t> routing = random_routing(g, rows, m.K, m.E);
      CK(cudaMemcpy(experts, routing.data(), routing.size() * 4, cudaMemcpyHostToDevice));
      CK(ops::cuda::moe_group_cuda(experts, rows, m.K, m.E, groups, s));
      std::vector<int32_t> f(size_t(m.E + 1));
      CK(cudaMemcpyAsync(f.data(), first, f.size() * 4, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      int64_t active = 0;
      for (int64_t e = 0; e < m.E; ++e) active += f[size_t(e) + 1] > f[size_t(e)];

      struct Proj {
        const char* name;
        int64_t N, Kd;
        const uint16_t *w, *in;
        bool gather, f32;
      };
      const Proj projs[] = {{"up", U, m.D, up, x, true, false}, {"down", m.D, m.I, down, h, false, true}};
      for (const Proj& p : projs) {
        ops::cuda::MoeGroupedLinearArgs a;
        a.slots = slots, a.E = m.E, a.N = p.N, a.Kd = p.Kd, a.x = p.in, a.ldx = p.Kd;
        a.x_row = p.gather ? src_row : nullptr, a.w = p.w, a.first = first, a.tiles = tiles, a.n_tiles = n_tiles;
        a.ldo = p.N;
        if (p.f32) a.out_f32 = y;
        else a.out = h;
        const double us = time_graph(s, runs, [&] { CK(ops::cuda::moe_grouped_linear_cuda(a, s)); });

        // cuBLAS: yᵀ (N × c) = W_eᵀ-as-stored (op T) · x_eᵀ for each chosen expert e of c rows.
        const uint16_t* in_sorted = p.gather ? x_sorted : p.in;
        const float one = 1.0f, zero = 0.0f;
        const double blas_us = time_graph(s, runs, [&] {
          for (int64_t e = 0; e < m.E; ++e) {
            const int64_t b = f[size_t(e)], c = f[size_t(e) + 1] - b;
            if (c == 0) continue;
            void* out = p.f32 ? static_cast<void*>(y + b * p.N) : static_cast<void*>(h + b * p.N);
            CB(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, int(p.N), int(c), int(p.Kd), &one,
                            p.w + e * p.N * p.Kd, CUDA_R_16BF, int(p.Kd), in_sorted + b * p.Kd, CUDA_R_16BF,
                            int(p.Kd), &zero, out, p.f32 ? CUDA_R_32F : CUDA_R_16BF, int(p.N), CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
          }
        });
        const double bytes = double(active) * double(p.N) * double(p.Kd) * 2.0 + double(slots) * double(p.Kd) * 2.0 +
                             double(slots) * double(p.N) * (p.f32 ? 4.0 : 2.0);
        const double flops = 2.0 * double(slots) * double(p.N) * double(p.Kd);
        const double gbs = bytes / (us * 1e3);
        std::printf("%-16s %-4s %5lld %6lld %4lld | %9.1f %7.0f %5.1f%% %7.1f | %9.1f %7.1f | %5.2fx\n", m.name, p.name,
                    (long long)rows, (long long)slots, (long long)active, us, gbs, 100.0 * gbs / read_gbs,
                    flops / (us * 1e6), blas_us, flops / (blas_us * 1e6), blas_us / us);
      }
    }
    for (void* q : {static_cast<void*>(up), static_cast<void*>(down), static_cast<void*>(x),
                    static_cast<void*>(x_sorted), static_cast<void*>(h), static_cast<void*>(y),
                    static_cast<void*>(experts), static_cast<void*>(first), static_cast<void*>(src_row),
                    static_cast<void*>(slot_of), static_cast<void*>(tiles), static_cast<void*>(n_tiles)})
      CK(cudaFree(q));
  }
  CB(cublasDestroy(blas));
  CK(cudaFree(workspace));
  CK(cudaStreamDestroy(s));
  return 0;
}
