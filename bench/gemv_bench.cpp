// The GEMVs of one decode step at batch 1–2: every projection of a preset
// model (random bf16 weights on the device, as the e2e bench places them)
// in step order, the LM head last, launched back to back in one CUDA graph
// as a step launches them — per GEMV block shape (gemv.h's knobs), and per
// distinct matrix shape alone. At batch 1 these reads are ~95% of a step's
// bytes, so their rate bounds tokens/s (issue #4: 230 tok/s at 8B).
//
//   replayssm_gemv_bench [--preset nemotron-h-8b] [--rows 1] [--runs 7]
//
// Bytes counted: each weight matrix once (x and y are KB). Rates are set
// against the read-only bandwidth of the same run (16-byte loads over
// 1 GB, read_probe.cu). Median of --runs timed graph launches after 2
// warm-ups.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/presets.h"
#include "cuda_bench.h"  // beside this file
#include "ops/cuda/gemv.h"
#include "replayssm/model.h"
#include "backend/cuda/device_model.h"

using namespace replayssm;

namespace {

int usage() {
  std::fprintf(stderr, "usage: replayssm_gemv_bench [--preset nemotron-h-8b] [--rows 1] [--runs 7]\n");
  return 2;
}

double time_graph(cudaGraphExec_t graph, cudaStream_t s, int runs) {
  return bench::median_us(s, runs, [&] { CK(cudaGraphLaunch(graph, s)); });
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "nemotron-h-8b";
  int rows = 1, runs = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    if (a == "--preset") preset = argv[++i];
    else if (a == "--rows") rows = std::atoi(argv[++i]);
    else if (a == "--runs") runs = std::atoi(argv[++i]);
    else return usage();
  }
  if (rows < 1 || rows > ops::cuda::kGemvMaxRows || runs < 1) return usage();
  auto c = bench::preset_config(preset);
  if (!c.ok()) return std::fprintf(stderr, "error: %s\n", c.status().message().c_str()), 1;
  auto m = Model::random_without_matrices(*c, 1);
  if (!m.ok()) return std::fprintf(stderr, "error: %s\n", m.status().message().c_str()), 1;
  auto dm = cuda::DeviceModel::create(**m, 1);
  if (!dm.ok()) return std::fprintf(stderr, "error: %s\n", dm.status().message().c_str()), 1;

  // The step's projections in launch order.
  std::vector<cuda::DeviceLinear> step;
  for (const cuda::DeviceBlock& b : (*dm)->blocks()) step.push_back(b.in), step.push_back(b.out);
  step.push_back((*dm)->lm_head());
  int64_t max_in = 0, max_out = 0;
  for (const auto& l : step) max_in = std::max(max_in, l.n_in), max_out = std::max(max_out, l.n_out);
  uint16_t *x, *y;
  CK(cudaMalloc(reinterpret_cast<void**>(&x), size_t(rows * max_in) * 2));
  CK(cudaMalloc(reinterpret_cast<void**>(&y), size_t(rows * max_out) * 2));
  CK(cudaMemset(x, 0x3c, size_t(rows * max_in) * 2));  // ~0.01 in bf16

  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const double read_gbs = bench::read_only_gbs(runs, prop.multiProcessorCount);

  auto graph_of = [&](const std::vector<cuda::DeviceLinear>& ls, const ops::cuda::GemvTuning& t) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (const auto& l : ls) CK(ops::cuda::gemv_cuda(x, l.n_in, rows, l.w, l.n_out, l.n_in, l.b, y, l.n_out, false, s, t));
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphDestroy(g));
    return ge;
  };
  auto bytes_of = [](const std::vector<cuda::DeviceLinear>& ls) {
    double b = 0.0;
    for (const auto& l : ls) b += double(l.n_out) * double(l.n_in) * 2.0;
    return b;
  };

  const std::vector<std::pair<const char*, ops::cuda::GemvTuning>> shapes = {
      {"launcher's choice", {}}, {"1 warp/row, 4 loads", {1, 4}}, {"1 warp/row, 8 loads", {1, 8}},
      {"2 warps/row, 4 loads", {2, 4}}, {"2 warps/row, 8 loads", {2, 8}}, {"4 warps/row, 8 loads", {4, 8}}};
  const char* pdl = std::getenv("REPLAYSSM_PDL");
  std::printf("%s, preset %s, %d input row%s, PDL %s: read-only bandwidth %.0f GB/s (16-byte loads)\n", prop.name,
              preset.c_str(), rows, rows == 1 ? "" : "s", pdl != nullptr && std::string(pdl) == "0" ? "off" : "on",
              read_gbs);
  const double step_gb = bytes_of(step) / 1e9;
  std::printf("\nthe step's %zu GEMVs in one graph (%.2f GB of weights)\n", step.size(), step_gb);
  std::printf("%-24s %10s %8s %8s\n", "block shape", "µs", "GB/s", "% read");
  for (const auto& [name, t] : shapes) {
    cudaGraphExec_t ge = graph_of(step, t);
    const double us = time_graph(ge, s, runs);
    CK(cudaGraphExecDestroy(ge));
    const double gbs = step_gb * 1e6 / us;
    std::printf("%-24s %10.1f %8.0f %7.1f%%\n", name, us, gbs, 100.0 * gbs / read_gbs);
  }

  // Each distinct (n_out, n_in) alone: all its matrices back to back.
  std::map<std::pair<int64_t, int64_t>, std::vector<cuda::DeviceLinear>> by_shape;
  for (const auto& l : step) by_shape[{l.n_out, l.n_in}].push_back(l);
  std::printf("\nper matrix shape, its matrices back to back (µs per matrix; GB/s)\n%-16s %4s", "n_out x n_in", "n");
  for (const auto& sh : shapes) std::printf(" | %-22s", sh.first);
  std::printf("\n");
  for (const auto& [dims, ls] : by_shape) {
    std::printf("%7lld x %-6lld %4zu", (long long)dims.first, (long long)dims.second, ls.size());
    const double gb = bytes_of(ls) / 1e9;
    for (const auto& sh : shapes) {
      cudaGraphExec_t ge = graph_of(ls, sh.second);
      const double us = time_graph(ge, s, runs);
      CK(cudaGraphExecDestroy(ge));
      std::printf(" | %9.1f µs %6.0f GB/s", us / double(ls.size()), gb * 1e6 / us);
    }
    std::printf("\n");
  }
  CK(cudaFree(x));
  CK(cudaFree(y));
  CK(cudaStreamDestroy(s));
  return 0;
}
