// The launches of a CUDA backend step's stateful layers, between a layer's
// input projection and its output norm: attention over each slice's pages,
// and an SSM layer's conv, log appends, schedule (step_schedule.h) and
// checkpoint windows. Free functions over plain device pointers, so that
// the arguments every launcher receives can be checked over stand-in
// pointers: with check_only every launcher is called with its launches dry
// (ops/cuda/dry_launch.h) and no copy made, and only a launcher's refusal of
// its arguments (cudaErrorInvalidValue, which every launcher returns before
// it touches the device) is an error — what tests/cuda/step_schedule_test.cpp
// runs over the emulated scripts' schedules.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/device_model.h"
#include "backend/cuda/slot_storage.h"
#include "backend/cuda/step_schedule.h"
#include "replayssm/model_config.h"
#include "replayssm/status.h"

namespace replayssm::cuda {

// What one stateful layer's launches read and write. Activations hold the
// step's rows (at most max_step_rows each); `sched` is the device copy of
// StepSchedule::buf.
struct LayerArgs {
  const ModelConfig* config = nullptr;
  const DeviceBlock* blk = nullptr;
  int64_t page_size = 1;
  const int32_t* sched = nullptr;
  cudaStream_t stream = nullptr;
  // true: launchers called, nothing launched or copied (host tests).
  bool check_only = false;
  // SSM layers.
  SsmStore* ssm = nullptr;
  uint16_t* proj = nullptr;            // (rows, blk->in.n_out) the fused input projection
  uint16_t* xconv = nullptr;           // (rows, C) post-conv rows
  uint16_t* y = nullptr;               // (rows, H·P or Hv·dv) the mixer's output
  uint16_t* cC = nullptr;              // Mamba2: (rows, G·N) C
  float* mamba_scratch = nullptr;      // Mamba2: mamba2_replay_scratch_floats(rows, 1, H, P)
  uint16_t *gq = nullptr, *gk = nullptr, *gv = nullptr;  // GDN: (rows, Hk·dk), (rows, Hk·dk), (rows, Hv·dv)
  float *gg = nullptr, *gbeta = nullptr, *gu = nullptr;  // GDN: (rows, Hv), (rows, Hv), (rows, Hv·dv)
  uint16_t* win_stage = nullptr;       // (the step's writes, K−1, C) staging for their windows
  // Attention layers.
  KvStore* kv = nullptr;
  const uint16_t *q = nullptr, *k = nullptr, *v = nullptr;  // attention_qkv's rows (AttentionRows)
  int64_t ldq = 0, ldk = 0, ldv = 0, q_head_stride = 0;
  float* attn_scratch = nullptr;       // attention_decode_scratch_floats() when every slice has one token
  bool decode_attention = true;        // one-token steps take attention_decode_cuda (else attention_prefill_cuda)
};

// An SSM layer (Mamba2 or GDN, as a.blk says) from its input projection in
// a.proj to its mixer output in a.y: the conv, the log appends, the
// schedule's launches for its kind, the windows of the states it writes.
Status ssm_layer(const LayerArgs& a, const StepSchedule& s);

// An attention layer from its q, k, v rows to its output in a.y: the step's
// K/V rows into their pages (a rebuild's skipped), then attention over
// each slice's pages.
Status attention_layer(const LayerArgs& a, const StepSchedule& s);

}  // namespace replayssm::cuda
