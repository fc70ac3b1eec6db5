// Session 29 probe (docs/perf/README.md, "Batch 256 end to end"): built with
//   nvcc -O2 -std=c++17 -arch=sm_90 gemm_probe.cu -o gemm_probe -lcublasLt -lcublas
// and run as ./gemm_probe 64 256 512. Not part of the build.
// Probe: cublasGemmEx default vs cublasLt heuristic algos at 8B shapes.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cuda_bf16.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define CK(x) do { auto e_ = (x); if (e_ != 0) { std::printf("fail %s:%d %d\n", __FILE__, __LINE__, int(e_)); std::exit(1);} } while (0)

__global__ void fill(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    p[i] = __float2bfloat16((float(h & 0xffff) / 65536.0f - 0.5f) * 0.05f);
  }
}

int main(int argc, char** argv) {
  const int reps = 20;
  struct Shape { int n_out, n_in; bool f32; int count; const char* name; };
  std::vector<Shape> shapes = {{18560, 4096, false, 24, "mamba in"}, {4096, 8192, false, 24, "mamba out"},
                               {21504, 4096, false, 24, "mlp up"},   {4096, 21504, false, 24, "mlp down"},
                               {6144, 4096, false, 4, "attn qkv"},   {4096, 4096, false, 4, "attn o"},
                               {131072, 4096, true, 1, "lm head"}};
  std::vector<int> rowss = {64, 256, 512};
  if (argc > 1) { rowss.clear(); for (int i = 1; i < argc; ++i) rowss.push_back(std::atoi(argv[i])); }
  cudaStream_t s; CK(cudaStreamCreate(&s));
  cublasHandle_t h; CK(cublasCreate(&h)); CK(cublasSetStream(h, s));
  cublasLtHandle_t lt; CK(cublasLtCreate(&lt));
  size_t ws_bytes = size_t(32) << 20; void* ws; CK(cudaMalloc(&ws, ws_bytes));
  CK(cublasSetWorkspace(h, ws, ws_bytes));
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int rows : rowss) {
    double tot_def = 0, tot_best = 0, tot_h0 = 0, flops_tot = 0;
    for (const Shape& sh : shapes) {
      size_t wn = size_t(sh.n_out) * sh.n_in;
      int copies = std::max<int>(1, int((size_t(240) << 20) / (wn * 2)));
      copies = std::min(copies, 8);
      std::vector<__nv_bfloat16*> W(copies);
      for (auto& w : W) { CK(cudaMalloc(&w, wn * 2)); fill<<<1024, 256, 0, s>>>(w, wn, 7); }
      __nv_bfloat16* x; CK(cudaMalloc(&x, size_t(rows) * sh.n_in * 2)); fill<<<256, 256, 0, s>>>(x, size_t(rows) * sh.n_in, 3);
      void* y; CK(cudaMalloc(&y, size_t(rows) * sh.n_out * 4));
      const float one = 1, zero = 0;
      const double flops = 2.0 * rows * sh.n_out * sh.n_in;
      auto time = [&](auto&& launch) {
        for (int i = 0; i < 3; ++i) launch(W[i % copies]);
        std::vector<float> v;
        for (int r = 0; r < 5; ++r) {
          CK(cudaEventRecord(a, s));
          for (int i = 0; i < reps; ++i) launch(W[i % copies]);
          CK(cudaEventRecord(b, s)); CK(cudaEventSynchronize(b));
          float ms; CK(cudaEventElapsedTime(&ms, a, b)); v.push_back(ms * 1e3f / reps);
        }
        std::sort(v.begin(), v.end()); return double(v[2]);
      };
      cudaDataType_t yt = sh.f32 ? CUDA_R_32F : CUDA_R_16BF;
      double t_def = time([&](__nv_bfloat16* w) {
        CK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, sh.n_out, rows, sh.n_in, &one, w, CUDA_R_16BF, sh.n_in, x,
                        CUDA_R_16BF, sh.n_in, &zero, y, yt, sh.n_out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      });
      cublasLtMatmulDesc_t op; CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
      CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
      cublasLtMatrixLayout_t LA, LB, LC;
      CK(cublasLtMatrixLayoutCreate(&LA, CUDA_R_16BF, sh.n_in, sh.n_out, sh.n_in));
      CK(cublasLtMatrixLayoutCreate(&LB, CUDA_R_16BF, sh.n_in, rows, sh.n_in));
      CK(cublasLtMatrixLayoutCreate(&LC, yt, sh.n_out, rows, sh.n_out));
      cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
      uint64_t wsb = ws_bytes;
      CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
      cublasLtMatmulHeuristicResult_t res[64]; int n = 0;
      CK(cublasLtMatmulAlgoGetHeuristic(lt, op, LA, LB, LC, LC, pref, 64, res, &n));
      double best = 1e30, h0 = 0; int bi = -1;
      for (int i = 0; i < n; ++i) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
        double t = time([&](__nv_bfloat16* w) {
          CK(cublasLtMatmul(lt, op, &one, w, LA, x, LB, &zero, y, LC, y, LC, &res[i].algo, ws, ws_bytes, s));
        });
        if (i == 0) h0 = t;
        if (t < best) best = t, bi = i;
      }
      std::printf("rows %4d %-10s %6dx%-6d default %8.1f us (%5.0f TF/s)  lt[0] %8.1f  best lt[%2d/%2d] %8.1f us (%5.0f TF/s)  x%.3f\n",
                  rows, sh.name, sh.n_out, sh.n_in, t_def, flops / t_def / 1e6, h0, bi, n, best, flops / best / 1e6, t_def / best);
      std::fflush(stdout);
      tot_def += sh.count * t_def; tot_best += sh.count * best; tot_h0 += sh.count * h0; flops_tot += sh.count * flops;
      cublasLtMatmulPreferenceDestroy(pref); cublasLtMatrixLayoutDestroy(LA); cublasLtMatrixLayoutDestroy(LB);
      cublasLtMatrixLayoutDestroy(LC); cublasLtMatmulDescDestroy(op);
      for (auto& w : W) CK(cudaFree(w));
      CK(cudaFree(x)); CK(cudaFree(y));
    }
    std::printf("rows %4d step GEMMs: default %.3f ms (%.0f TF/s), lt[0] %.3f ms, best %.3f ms (%.0f TF/s)\n\n", rows,
                tot_def / 1e3, flops_tot / tot_def / 1e6, tot_h0 / 1e3, tot_best / 1e3, flops_tot / tot_best / 1e6);
  }
  return 0;
}
