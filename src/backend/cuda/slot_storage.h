// SlotStorage: the CUDA backend's device memory behind the state manager's
// slots, in pools indexed by slot number, one set per stateful layer.
//
//   page slot        per attention layer, B positions' K and V rows, bf16:
//                    (page slots, B, 2, Hkv·D) — K beside V in each row,
//                    as attention_decode.h's PagedKv reads them (v_pages[i]
//                    = k_pages[i] + Hkv·D, row stride 2·Hkv·D).
//   log slot         per SSM layer, B entries in four arrays of rows
//                    slot·B + p % B (log_pages.h):
//                      Mamba2  x (H·P) bf16 | B (G·N) bf16 | dt (H) fp32
//                      GDN     k (Hk·dk) bf16 | u (Hv·dv) fp32 | g (Hv) fp32
//                    — what the replay kernels and the chunk scans read,
//                    post-conv, dt after softplus and clamp, k normalised,
//                    u the corrected value — and the entry's pre-conv row
//                    (C) bf16, from which conv windows are read
//                    (conv1d.h's paged window) and gathered.
//   checkpoint slot  per SSM layer, the state (H, rows, cols) fp32 and the
//                    conv window (K−1, C) bf16 (the K−1 pre-conv rows
//                    before the checkpoint's position: bf16 loses nothing,
//                    those rows arrive as bf16).
//
// Against the CPU reference (fp32 everywhere): a Mamba2 entry is
// 4·H·P + 6·G·N + 4·H bytes (CPU 4·H·P + 8·G·N + 4·H), a GDN entry
// 6·Hk·dk + 6·Hv·dv + 4·Hv (CPU 8·Hk·dk + 8·Hv·dv + 4·Hv), a checkpoint's
// window half the CPU's, a token's K/V rows half. units() reports these,
// so the manager's budgets count what this device holds.
//
// Pools grow as plans name higher slots: to the larger of what is named
// and twice the pool (at least 8 slots), every live slot copied into the
// new pool, never shrinking until the storage is reset (a new session).
// After the plan's slots each log pool keeps scratch slots (a step's new
// entries whose page has no log in the plan) and each checkpoint pool a
// slot of zeros (the state at position 0) and scratch slots (states the
// kernels must write that the plan does not keep); their contents live
// for one step. What a pool holds is memory().
//
// Frees are bookkeeping only: a freed slot's memory stays in its pool for
// the slot's next owner. Not thread-safe.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cuda/step_schedule.h"
#include "replayssm/cache_spec.h"
#include "replayssm/state.h"
#include "replayssm/status.h"
#include "replayssm/step_plan.h"

namespace replayssm::cuda {

// One SSM layer's shapes, from its CacheLayerSpec.
struct SsmShape {
  bool mamba = true;
  int64_t C = 0, K = 0;           // conv channels, width
  int64_t H = 0, rows = 0, cols = 0;  // state (H, rows, cols): Mamba2 (H, P, N), GDN (Hv, dk, dv)
  int64_t a_width = 0;            // bf16: Mamba2 x = H·P, GDN k = Hk·dk
  int64_t b_width = 0;            // Mamba2 B = G·N (bf16), GDN u = Hv·dv (fp32)
  int64_t c_width = 0;            // fp32: Mamba2 dt = H, GDN g = Hv
  int64_t state_floats() const { return H * rows * cols; }
  int64_t window_elems() const { return (K - 1) * C; }
  int64_t b_bytes() const { return b_width * (mamba ? 2 : 4); }
  int64_t entry_bytes() const { return 2 * a_width + b_bytes() + 4 * c_width + 2 * C; }
  int64_t checkpoint_bytes() const { return 4 * state_floats() + 2 * window_elems(); }
};
SsmShape ssm_shape(const CacheLayerSpec& l);

// One SSM layer's pools.
struct SsmStore {
  SsmShape shape;
  uint16_t* log_a = nullptr;    // (log rows, a_width) bf16
  void* log_b = nullptr;        // (log rows, b_width) bf16 (Mamba2) or fp32 (GDN)
  float* log_c = nullptr;       // (log rows, c_width) fp32
  uint16_t* log_pre = nullptr;  // (log rows, C) bf16 pre-conv rows
  float* state = nullptr;       // (checkpoint slots, H, rows, cols) fp32
  uint16_t* window = nullptr;   // (checkpoint slots, K−1, C) bf16
};

// One attention layer's pages.
struct KvStore {
  int64_t width = 0;               // Hkv·D
  uint16_t* rows = nullptr;        // (page slots, B, 2·width) bf16
  uint16_t** k_pages = nullptr;    // (page slots) device pointers to each page's first K row
  uint16_t** v_pages = nullptr;    // (page slots) ... V row
};

class SlotStorage {
 public:
  // Nothing is allocated until reserve().
  SlotStorage(const CacheSpec& spec, int64_t page_size);
  ~SlotStorage();
  SlotStorage(const SlotStorage&) = delete;
  SlotStorage& operator=(const SlotStorage&) = delete;

  // The units the manager counts for this layout (see the top).
  static StateUnits units(const CacheSpec& spec);

  // Room for the slots below `named` and the scratch slots after them.
  // Grows pools on `stream` (and waits for it); out_of_budget, with
  // nothing changed, where the device cannot hold the larger pools.
  Status reserve(const SlotsNamed& named, int log_scratch, int ckpt_scratch, cudaStream_t stream);
  // Copies on `stream`; frees change nothing on the device. The slots must
  // be reserved.
  Status apply(std::span<const StorageOp> ops, cudaStream_t stream);
  // Where scratch slots start (valid until the next reserve()).
  ScheduleSlots scratch_slots() const;

  int64_t page_size() const { return B_; }
  // Per cache layer: its pools (nullptr for the other kind).
  SsmStore* ssm(int layer) { return ssm_of_[size_t(layer)] >= 0 ? &ssm_[size_t(ssm_of_[size_t(layer)])] : nullptr; }
  KvStore* kv(int layer) { return kv_of_[size_t(layer)] >= 0 ? &kv_[size_t(kv_of_[size_t(layer)])] : nullptr; }
  const std::vector<SsmStore>& ssm_layers() const { return ssm_; }
  // Device bytes the pools hold: logs and checkpoints; K/V pages.
  int64_t state_bytes() const { return state_bytes_; }
  int64_t kv_bytes() const { return kv_bytes_; }

 private:
  void free_all();
  CacheSpec spec_;
  int64_t B_ = 1;
  std::vector<SsmStore> ssm_;
  std::vector<KvStore> kv_;
  std::vector<int> ssm_of_, kv_of_;  // cache layer → index, −1
  int32_t page_cap_ = 0, log_cap_ = 0, log_scratch_cap_ = 0, ckpt_cap_ = 0, ckpt_scratch_cap_ = 0;
  int64_t state_bytes_ = 0, kv_bytes_ = 0;
};

}  // namespace replayssm::cuda
