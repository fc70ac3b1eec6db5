// Attention decode over the paged KV cache alone (ops/cuda/attention_decode.h):
// one query token per sequence against every row of its context, at the
// attention shapes of a preset model — Nemotron-H-8B (32 query / 8 KV heads
// × 128) and Qwen3.5-27B (24 / 4 × 256, gated) by default — for batch 1, 8,
// 64, 256 and contexts of 128, 1,024 and 4,096 rows (every sequence the same
// length). At batch 256 and 129 rows the 8B step's four attention layers were
// its fifth-largest kernel class (H200, 2026-12-03, 332d983); at long contexts
// the K and V rows outweigh the weights, so this kernel's rate is the step's.
//
//   replayssm_attn_bench [--preset nemotron-h-8b,qwen3.5-27b] [--batches 1,8,64,256]
//                        [--contexts 128,1024,4096] [--max-context N] [--split-rows N]
//                        [--variant 0..N] [--runs 7] [--json FILE]
//
// Pages are laid out as the decoder lays them (K beside V in each row, 64
// rows a page), each sequence's pages drawn shuffled from a pool; the launches
// rotate over pools of ≥ 512 MB in all, well past the 60 MB L2, as
// successive layers' caches do. The launches (with the split combine where
// the launcher splits) run back to back in one CUDA graph, as in a step;
// median of --runs graph launches after 2 warm-ups, per attention call.
// Bytes counted: every K and V row of every context once, the query (and
// gate) rows read and the output written — not the splits' partials, which
// are the kernel's choice. Rates are set against the read-only bandwidth of
// the same run (16-byte loads, read_probe.cu) and its copy bandwidth.
// --variant: AttentionDecodeArgs::variant (0 the launcher's), for A/B runs.
// --max-context: the bound the launch is sized for (max_seq_len: the
// decoder passes its max_context), where larger than the context; by
// default each context is its own bound. --split-rows: a fixed split
// (AttentionDecodeArgs::split_rows; 0 the launcher's).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/presets.h"
#include "cuda_bench.h"  // beside this file
#include "ops/cuda/attention_decode.h"
#include "backend/cuda/device_fill.h"

using namespace replayssm;

namespace {

constexpr int kPageRows = 64;  // the decoder's default kv_page
constexpr size_t kRotateBytes = size_t(512) << 20;

int usage() {
  std::fprintf(stderr,
               "usage: replayssm_attn_bench [--preset NAME[,NAME]] [--batches 1,8,64,256] [--contexts 128,1024,4096]\n"
               "                            [--max-context N] [--split-rows N] [--variant 0..%d] [--runs 7]\n"
               "                            [--json FILE]\n",
               ops::cuda::kAttnDecodeVariants - 1);
  return 2;
}

// "1,8,64" → {1, 8, 64}, each in [lo, hi]; false on anything else.
bool parse_ints(const std::string& s, int lo, int hi, std::vector<int>* out) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long x = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || x < lo || x > hi) return false;
    v.push_back(int(x));
  }
  if (v.empty()) return false;
  *out = v;
  return true;
}

struct Row {
  std::string preset;
  int batch, context, splits;
  double us, bytes;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> preset_list = {"nemotron-h-8b", "qwen3.5-27b"};
  std::vector<int> batches = {1, 8, 64, 256}, contexts = {128, 1024, 4096};
  int variant = 0, runs = 7, max_context = 0, split_rows = 0;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const std::string v = argv[++i];
    if (a == "--preset") {
      preset_list.clear();
      std::stringstream ss(v);
      for (std::string p; std::getline(ss, p, ',');) preset_list.push_back(p);
      if (preset_list.empty()) return usage();
    } else if (a == "--batches") {
      if (!parse_ints(v, 1, 65535, &batches)) return usage();
    } else if (a == "--contexts") {
      if (!parse_ints(v, 1, 1 << 20, &contexts)) return usage();
    } else if (a == "--max-context" || a == "--split-rows") {
      std::vector<int> x;
      if (!parse_ints(v, 1, 1 << 20, &x) || x.size() != 1) return usage();
      (a == "--max-context" ? max_context : split_rows) = x[0];
    } else if (a == "--variant") {
      std::vector<int> x;
      if (!parse_ints(v, 0, ops::cuda::kAttnDecodeVariants - 1, &x) || x.size() != 1) return usage();
      variant = x[0];
    } else if (a == "--runs") {
      std::vector<int> x;
      if (!parse_ints(v, 1, 1000, &x) || x.size() != 1) return usage();
      runs = x[0];
    } else if (a == "--json") {
      json_path = v;
      FILE* f = std::fopen(v.c_str(), "w");  // refused now, not after the sweep
      if (f == nullptr) return std::fprintf(stderr, "error: cannot write %s\n", v.c_str()), 1;
      std::fclose(f);
    } else {
      return usage();
    }
  }
  std::vector<ModelConfig> configs;
  for (const std::string& p : preset_list) {
    auto c = bench::preset_config(p);
    if (!c.ok()) return std::fprintf(stderr, "error: %s\n", c.status().message().c_str()), 1;
    if (c->attn.n_heads < 1) return std::fprintf(stderr, "error: preset %s has no attention layers\n", p.c_str()), 1;
    configs.push_back(*c);
  }

  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // Read-only and copy bandwidth over 1 GB.
  const size_t probe_n = size_t(1) << 30;
  void *probe, *probe2;
  float* sink;
  CK(cudaMalloc(&probe, probe_n));
  CK(cudaMalloc(&probe2, probe_n));
  CK(cudaMalloc(reinterpret_cast<void**>(&sink), 4));
  CK(cudaMemset(probe, 0, probe_n));
  // read_ld runs on the legacy stream: timed there.
  const double read_gbs =
      probe_n /
      (bench::median_us(nullptr, runs, [&] { CK(bench::read_ld(probe, probe_n, sink, prop.multiProcessorCount)); }) *
       1e3);
  const double copy_gbs =
      2.0 * probe_n /
      (bench::median_us(s, runs, [&] { CK(cudaMemcpyAsync(probe2, probe, probe_n, cudaMemcpyDeviceToDevice, s)); }) *
       1e3);
  CK(cudaFree(probe));
  CK(cudaFree(probe2));
  CK(cudaFree(sink));
  std::printf("%s: read-only bandwidth %.0f GB/s (16-byte loads), copy %.0f GB/s (read + write); variant %d", prop.name,
              read_gbs, copy_gbs, variant);
  if (max_context > 0) std::printf(", bound %d rows", max_context);
  if (split_rows > 0) std::printf(", splits of %d rows", split_rows);
  std::printf("\n");
  std::printf("%-14s %4s %4s %3s %6s %7s | %6s %8s %9s %8s %6s %6s\n", "preset", "Hq", "Hkv", "D", "batch", "context",
              "splits", "MB", "us", "GB/s", "%read", "%copy");

  std::vector<Row> rows;
  std::mt19937 rng(7);
  for (size_t pi = 0; pi < configs.size(); ++pi) {
    const AttentionConfig& ac = configs[pi].attn;
    const int Hq = int(ac.n_heads), Hkv = int(ac.n_kv_heads), D = int(ac.head_dim);
    const int64_t w = int64_t(Hkv) * D, row_stride = 2 * w, page_elems = kPageRows * row_stride;
    const int64_t qhs = ac.output_gate ? 2 * D : D, ldq = Hq * qhs, ldo = int64_t(Hq) * D;
    for (int B : batches)
      for (int ctx : contexts) {
        const int n_pages = (ctx + kPageRows - 1) / kPageRows;
        const double kv_bytes = double(B) * ctx * 2.0 * double(w) * 2.0;
        const size_t inst_bytes = size_t(B) * n_pages * page_elems * 2;
        if (inst_bytes > size_t(16) << 30) {
          std::printf("%-14s %4d %4d %3d %6d %7d | (skipped: %.1f GB of pages)\n", preset_list[pi].c_str(), Hq, Hkv, D,
                      B, ctx, inst_bytes / 1e9);
          continue;
        }
        // Enough instances (pools) to pass kRotateBytes; each a shuffled table into its own pool.
        const int rot = int(std::max<size_t>(1, (kRotateBytes + inst_bytes - 1) / inst_bytes));
        const int64_t pool_pages = int64_t(rot) * B * n_pages;
        uint16_t* pool;
        CK(cudaMalloc(reinterpret_cast<void**>(&pool), size_t(pool_pages) * page_elems * 2));
        CK(cuda::fill_uniform_bf16(pool, pool_pages * page_elems, 1.0f, 11 + B + ctx, s));
        std::vector<uint16_t*> kp(static_cast<size_t>(pool_pages)), vp(static_cast<size_t>(pool_pages));
        for (int64_t p = 0; p < pool_pages; ++p)
          kp[size_t(p)] = pool + p * page_elems, vp[size_t(p)] = kp[size_t(p)] + w;
        std::vector<int32_t> tables(static_cast<size_t>(pool_pages));
        for (int r = 0; r < rot; ++r) {
          int32_t* t = tables.data() + size_t(r) * B * n_pages;
          std::iota(t, t + int64_t(B) * n_pages, int32_t(int64_t(r) * B * n_pages));
          std::shuffle(t, t + int64_t(B) * n_pages, rng);
        }
        uint16_t **dkp, **dvp, *q, *out;
        int32_t *dtables, *dlen;
        CK(cudaMalloc(reinterpret_cast<void**>(&dkp), sizeof(uint16_t*) * kp.size()));
        CK(cudaMalloc(reinterpret_cast<void**>(&dvp), sizeof(uint16_t*) * vp.size()));
        CK(cudaMalloc(reinterpret_cast<void**>(&dtables), sizeof(int32_t) * tables.size()));
        CK(cudaMalloc(reinterpret_cast<void**>(&dlen), sizeof(int32_t) * B));
        CK(cudaMemcpy(dkp, kp.data(), sizeof(uint16_t*) * kp.size(), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dvp, vp.data(), sizeof(uint16_t*) * vp.size(), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dtables, tables.data(), sizeof(int32_t) * tables.size(), cudaMemcpyHostToDevice));
        const std::vector<int32_t> lens(size_t(B), ctx);
        CK(cudaMemcpy(dlen, lens.data(), sizeof(int32_t) * B, cudaMemcpyHostToDevice));
        CK(cudaMalloc(reinterpret_cast<void**>(&q), size_t(B) * ldq * 2));
        CK(cudaMalloc(reinterpret_cast<void**>(&out), size_t(B) * ldo * 2));
        CK(cuda::fill_uniform_bf16(q, int64_t(B) * ldq, 1.0f, 5, s));
        float* scratch;
        const int bound = std::max(ctx, max_context);
        const int64_t scratch_n = ops::cuda::attention_decode_scratch_floats(B, Hq, Hkv, D, bound, split_rows);
        CK(cudaMalloc(reinterpret_cast<void**>(&scratch), sizeof(float) * size_t(std::max<int64_t>(scratch_n, 1))));

        ops::cuda::AttentionDecodeArgs a;
        a.batch = B, a.Hq = Hq, a.Hkv = Hkv, a.D = D, a.scale = 1.0f / std::sqrt(float(D));
        a.q = q, a.ldq = ldq, a.q_head_stride = qhs;
        if (ac.output_gate) a.gate = q + D, a.ldg = ldq, a.g_head_stride = qhs;
        a.out = out, a.ldo = ldo, a.seq_len = dlen, a.max_seq_len = bound, a.scratch = scratch, a.variant = variant;
        a.split_rows = split_rows;
        a.kv.k_pages = dkp, a.kv.v_pages = dvp, a.kv.max_pages = n_pages, a.kv.page_size = kPageRows;
        a.kv.row_stride = row_stride;
        // At least 8 calls a graph, so the graph's own start is a small share.
        const int calls = std::max(rot, 8);
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < calls; ++i) {
          a.kv.page_table = dtables + size_t(i % rot) * B * n_pages;
          CK(ops::cuda::attention_decode_cuda(a, s));
        }
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphDestroy(g));
        const double us = bench::median_us(s, runs, [&] { CK(cudaGraphLaunch(ge, s)); }) / calls;
        CK(cudaGraphExecDestroy(ge));
        const double bytes = kv_bytes + double(B) * ldq * 2.0 + double(B) * ldo * 2.0;  // + q (and gate), out
        const int splits = ops::cuda::attention_decode_splits(B, Hkv, bound, split_rows);  // the grid's
        const double gbs = bytes / (us * 1e3);
        std::printf("%-14s %4d %4d %3d %6d %7d | %6d %8.1f %9.1f %8.0f %5.1f%% %5.1f%%\n", preset_list[pi].c_str(), Hq,
                    Hkv, D, B, ctx, splits, bytes / 1e6, us, gbs, 100.0 * gbs / read_gbs, 100.0 * gbs / copy_gbs);
        std::fflush(stdout);
        rows.push_back({preset_list[pi], B, ctx, splits, us, bytes});
        for (void* p :
             {static_cast<void*>(pool), static_cast<void*>(dkp), static_cast<void*>(dvp), static_cast<void*>(dtables),
              static_cast<void*>(dlen), static_cast<void*>(q), static_cast<void*>(out), static_cast<void*>(scratch)})
          CK(cudaFree(p));
      }
  }
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (f == nullptr) return std::fprintf(stderr, "error: cannot write %s\n", json_path.c_str()), 1;
    std::fprintf(f,
                 "{\"device\": \"%s\", \"read_gbs\": %.1f, \"copy_gbs\": %.1f, \"variant\": %d, \"max_context\": %d, "
                 "\"split_rows\": %d, \"rows\": [",
                 prop.name, read_gbs, copy_gbs, variant, max_context, split_rows);
    for (size_t i = 0; i < rows.size(); ++i)
      std::fprintf(f,
                   "%s\n  {\"preset\": \"%s\", \"batch\": %d, \"context\": %d, \"splits\": %d, \"us\": %.2f, "
                   "\"bytes\": %.0f, \"gbs\": %.1f}",
                   i ? "," : "", rows[i].preset.c_str(), rows[i].batch, rows[i].context, rows[i].splits, rows[i].us,
                   rows[i].bytes, rows[i].bytes / (rows[i].us * 1e3));
    std::fprintf(f, "\n]}\n");
    std::fclose(f);
  }
  CK(cudaStreamDestroy(s));
  return 0;
}
