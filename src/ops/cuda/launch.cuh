// Kernel launches with programmatic dependent launch (PDL, sm_90).
//
// A decode step at small batch is ~300 short kernels, and between two of
// them the GPU idles for the launch and the block ramp-up of the next
// (docs/perf: at batch 1 a 5.3 ms step held 4.2 ms of weight reads). Every
// kernel in src/ops/cuda is launched through launch_kernel with the PDL
// attribute and opens with pdl_begin(): the next kernel's blocks are
// scheduled while this one runs and wait in hardware until it has finished
// and its writes are visible. The GEMV issues its first weight loads before
// it waits (weights never depend on the kernel before).
//
// The order inside a kernel is the contract that keeps this exact:
//   1. pdl_wait() before any read of data a kernel of the step may write,
//      and before any write at all (the kernel before may still read it);
//   2. pdl_release() only after pdl_wait(), so that when a kernel starts,
//      every kernel but the one just before it has finished — a kernel may
//      therefore read, before it waits, what no kernel in the same step
//      writes (weights; a step's plan, copied from the host: the SSM
//      kernels' slots, log lengths, folds, rows, fork groups, decode
//      order and paged logs' block tables, log_pages.h), and nothing else. A block leaving before its wait calls
//      pdl_leave(). Two exceptions, each a flag
//      its launcher sets only where the backend's kernel order makes it
//      hold (Mamba2DecodeArgs): `early` — a kernel whose launch before
//      writes none of the state or log it reads reads them before its
//      wait; `release_early` — a kernel whose launch after reads before
//      its wait nothing the launch before writes releases it at its start
//      (that launch may then start while the kernel two back still runs).
//   And one by construction: the Mamba2 replay's per-head pass, whose
//   launch before (its log kernel) writes only a scratch that the pass
//   reads last and reads nothing the pass writes, waits just before
//   reading that scratch; by 2. everything else it reads was finished when
//   it started (mamba2_replay.cu). Likewise the GDN fork groups' log
//   kernel after their sums kernel (gdn_replay_group.cu).
// All are no-ops when a kernel is launched without the attribute.
// REPLAYSSM_PDL=0 in the environment launches without it (for measuring
// the gain, and for ruling PDL out when a result looks wrong).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "ops/cuda/dry_launch.h"

namespace replayssm::ops::cuda {

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void pdl_release() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }
__device__ __forceinline__ void pdl_begin() {
  pdl_wait();
  pdl_release();
}
// A block that leaves before its wait (nothing to do in this launch) waits
// first: a block's exit releases the next launch, so a launch whose blocks
// all left early would let the next one start while the kernel before
// this one still runs (against 2.). Waiting twice is harmless.
__device__ __forceinline__ void pdl_leave() { pdl_wait(); }

// Read once per process: whether launches carry the PDL attribute.
inline bool pdl_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("REPLAYSSM_PDL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

// Multiprocessors of the current device (launchers size grids by them).
inline cudaError_t device_sms(int* sms) {
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  return cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev);
}

// Whether p starts on a multiple of `bytes`: the launchers' test before
// choosing a kernel that moves rows by wider accesses.
inline bool aligned_to(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// kernel<<<grid, block, shm, stream>>>(args...) with the PDL attribute.
// Returns the launch's error (also left for cudaGetLastError); launches
// nothing and succeeds while this thread's launches are dry (dry_launch.h).
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shm, cudaStream_t stream,
                          Args&&... args) {
  if (launches_dry()) return cudaSuccess;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = shm, cfg.stream = stream;
  cfg.attrs = attr, cfg.numAttrs = pdl_enabled() ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace replayssm::ops::cuda
