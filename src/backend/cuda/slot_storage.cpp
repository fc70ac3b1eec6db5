// SlotStorage (see slot_storage.h): the pools, their growth, storage ops.
#include "backend/cuda/slot_storage.h"

#include <algorithm>
#include <climits>
#include <string>

#include "backend/cuda/cuda_status.h"

namespace replayssm::cuda {

namespace {

constexpr int32_t kMinSlots = 8;

// A pool's new size: what is asked, at least twice the old (amortised
// growth), at least kMinSlots; or the old size where it suffices.
int32_t grown(int64_t need, int32_t cur) {
  if (need <= cur) return cur;
  return int32_t(std::min<int64_t>(std::max<int64_t>({need, 2 * int64_t(cur), kMinSlots}), INT32_MAX / 2));
}

// Device memory taken for a growth: freed unless kept (all or nothing).
class Fresh {
 public:
  ~Fresh() {
    for (void* p : ptrs_) cudaFree(p);
  }
  template <typename T>
  Status alloc(T** p, int64_t bytes, const std::string& what) {
    void* d = nullptr;
    if (cudaError_t e = cudaMalloc(&d, size_t(std::max<int64_t>(bytes, 16))); e != cudaSuccess) {
      cudaGetLastError();
      return out_of_budget("cuda backend: cannot allocate " + std::to_string(bytes) + " bytes for " + what + ": " +
                           cudaGetErrorString(e));
    }
    ptrs_.push_back(d);
    *p = static_cast<T*>(d);
    return {};
  }
  void keep() { ptrs_.clear(); }

 private:
  std::vector<void*> ptrs_;
};

Status copy_rows(void* dst, const void* src, int64_t bytes, cudaStream_t stream, const char* what) {
  if (bytes <= 0) return {};
  return cuda_status(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToDevice, stream), "cuda backend",
                     what);
}

template <typename T>
T* at_bytes(T* base, int64_t bytes) {
  return static_cast<T*>(static_cast<void*>(static_cast<char*>(static_cast<void*>(base)) + bytes));
}

}  // namespace

SsmShape ssm_shape(const CacheLayerSpec& l) {
  SsmShape s;
  s.mamba = l.kind == CacheLayerSpec::kMamba2;
  s.C = l.conv_channels, s.K = l.conv_width;
  s.H = l.n_heads, s.rows = l.state_rows, s.cols = l.state_cols;
  if (s.mamba) {  // conv channels = x (H·P) | B (G·N) | C (G·N)
    s.a_width = s.H * s.rows;
    s.b_width = (s.C - s.a_width) / 2;
    s.c_width = s.H;
  } else {  // conv channels = q (Hk·dk) | k (Hk·dk) | v (Hv·dv)
    s.b_width = s.H * s.cols;
    s.a_width = (s.C - s.b_width) / 2;
    s.c_width = s.H;
  }
  return s;
}

StateUnits SlotStorage::units(const CacheSpec& spec) {
  StateUnits u;
  for (const CacheLayerSpec& l : spec.layers) {
    if (l.kind == CacheLayerSpec::kAttention) {
      u.kv_row += 2 * l.n_kv_heads * l.head_dim * 2;
    } else {
      const SsmShape s = ssm_shape(l);
      u.checkpoint_part.push_back(s.checkpoint_bytes());
      u.log_entry.push_back(s.entry_bytes());
    }
  }
  return u;
}

SlotStorage::SlotStorage(const CacheSpec& spec, int64_t page_size) : spec_(spec), B_(page_size) {
  for (const CacheLayerSpec& l : spec_.layers) {
    ssm_of_.push_back(-1);
    kv_of_.push_back(-1);
    if (l.kind == CacheLayerSpec::kAttention) {
      kv_of_.back() = int(kv_.size());
      KvStore k;
      k.width = l.n_kv_heads * l.head_dim;
      kv_.push_back(k);
    } else {
      ssm_of_.back() = int(ssm_.size());
      SsmStore s;
      s.shape = ssm_shape(l);
      ssm_.push_back(s);
    }
  }
}

SlotStorage::~SlotStorage() { free_all(); }

void SlotStorage::free_all() {
  for (SsmStore& s : ssm_) {
    for (void* p : {static_cast<void*>(s.log_a), s.log_b, static_cast<void*>(s.log_c), static_cast<void*>(s.log_pre),
                    static_cast<void*>(s.state), static_cast<void*>(s.window)})
      cudaFree(p);
    s.log_a = nullptr, s.log_b = nullptr, s.log_c = nullptr, s.log_pre = nullptr, s.state = nullptr, s.window = nullptr;
  }
  for (KvStore& k : kv_) {
    cudaFree(k.rows), cudaFree(k.k_pages), cudaFree(k.v_pages);
    k.rows = nullptr, k.k_pages = nullptr, k.v_pages = nullptr;
  }
  page_cap_ = log_cap_ = log_scratch_cap_ = ckpt_cap_ = ckpt_scratch_cap_ = 0;
  state_bytes_ = kv_bytes_ = 0;
}

ScheduleSlots SlotStorage::scratch_slots() const {
  ScheduleSlots s;
  s.log_scratch = log_cap_;
  s.zero = ckpt_cap_;
  s.ckpt_scratch = ckpt_cap_ + 1;
  return s;
}

Status SlotStorage::reserve(const SlotsNamed& named, int log_scratch, int ckpt_scratch, cudaStream_t stream) {
  const int32_t pc = grown(named.pages, page_cap_), lc = grown(named.logs, log_cap_);
  const int32_t ls = grown(log_scratch, log_scratch_cap_), cc = grown(named.ckpts, ckpt_cap_);
  const int32_t cs = grown(std::max(ckpt_scratch, 1), ckpt_scratch_cap_);  // read_state's scratch slot at least
  const bool pages = pc != page_cap_, logs = lc != log_cap_ || ls != log_scratch_cap_;
  const bool ckpts = cc != ckpt_cap_ || cs != ckpt_scratch_cap_;
  if (!pages && !logs && !ckpts) return {};
  const int64_t B = B_, log_rows = int64_t(lc + ls) * B, ck_slots = int64_t(cc) + 1 + cs;
  Fresh fresh;
  std::vector<SsmStore> ns = ssm_;
  std::vector<KvStore> nk = kv_;
  for (size_t i = 0; i < ns.size(); ++i) {
    const SsmShape& sh = ns[i].shape;
    const std::string what = "SSM layer " + std::to_string(i) + "'s ";
    if (logs) {
      const std::string pool = " (" + std::to_string(lc + ls) + " log slots of " + std::to_string(B) + ")";
      RSSM_RETURN_IF_ERROR(fresh.alloc(&ns[i].log_a, log_rows * sh.a_width * 2, what + "log" + pool));
      RSSM_RETURN_IF_ERROR(fresh.alloc(&ns[i].log_b, log_rows * sh.b_bytes(), what + "log" + pool));
      RSSM_RETURN_IF_ERROR(fresh.alloc(&ns[i].log_c, log_rows * sh.c_width * 4, what + "log" + pool));
      RSSM_RETURN_IF_ERROR(fresh.alloc(&ns[i].log_pre, log_rows * sh.C * 2, what + "log pre-conv rows" + pool));
    }
    if (ckpts) {
      const std::string pool = " (" + std::to_string(ck_slots) + " checkpoint slots)";
      RSSM_RETURN_IF_ERROR(fresh.alloc(&ns[i].state, ck_slots * sh.state_floats() * 4, what + "states" + pool));
      RSSM_RETURN_IF_ERROR(fresh.alloc(&ns[i].window, ck_slots * sh.window_elems() * 2, what + "conv windows" + pool));
    }
  }
  std::vector<std::vector<uint16_t*>> kp(nk.size()), vp(nk.size());
  for (size_t i = 0; i < nk.size() && pages; ++i) {
    const std::string what = "attention layer " + std::to_string(i) + "'s K/V pages (" + std::to_string(pc) + " of " +
                             std::to_string(B) + " positions)";
    const int64_t page_elems = B * 2 * nk[i].width;
    RSSM_RETURN_IF_ERROR(fresh.alloc(&nk[i].rows, int64_t(pc) * page_elems * 2, what));
    RSSM_RETURN_IF_ERROR(fresh.alloc(&nk[i].k_pages, int64_t(pc) * int64_t(sizeof(uint16_t*)), what));
    RSSM_RETURN_IF_ERROR(fresh.alloc(&nk[i].v_pages, int64_t(pc) * int64_t(sizeof(uint16_t*)), what));
    for (int64_t p = 0; p < pc; ++p) {
      kp[i].push_back(nk[i].rows + p * page_elems);  // K beside V in each row (attention_decode.h)
      vp[i].push_back(nk[i].rows + p * page_elems + nk[i].width);
    }
  }
  // The live slots into the new pools; the zero slot zeroed.
  for (size_t i = 0; i < ns.size(); ++i) {
    const SsmShape& sh = ns[i].shape;
    const SsmStore& o = ssm_[i];
    if (logs && log_cap_ > 0) {
      const int64_t rows = int64_t(log_cap_) * B;
      RSSM_RETURN_IF_ERROR(copy_rows(ns[i].log_a, o.log_a, rows * sh.a_width * 2, stream, "log pool growth"));
      RSSM_RETURN_IF_ERROR(copy_rows(ns[i].log_b, o.log_b, rows * sh.b_bytes(), stream, "log pool growth"));
      RSSM_RETURN_IF_ERROR(copy_rows(ns[i].log_c, o.log_c, rows * sh.c_width * 4, stream, "log pool growth"));
      RSSM_RETURN_IF_ERROR(copy_rows(ns[i].log_pre, o.log_pre, rows * sh.C * 2, stream, "log pool growth"));
    }
    if (ckpts) {
      if (ckpt_cap_ > 0) {
        RSSM_RETURN_IF_ERROR(copy_rows(ns[i].state, o.state, int64_t(ckpt_cap_) * sh.state_floats() * 4, stream,
                                       "checkpoint pool growth"));
        RSSM_RETURN_IF_ERROR(copy_rows(ns[i].window, o.window, int64_t(ckpt_cap_) * sh.window_elems() * 2, stream,
                                       "checkpoint pool growth"));
      }
      RSSM_RETURN_IF_ERROR(cuda_status(
          cudaMemsetAsync(ns[i].state + int64_t(cc) * sh.state_floats(), 0, size_t(sh.state_floats() * 4), stream),
          "cuda backend", "the zero checkpoint"));
      RSSM_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(ns[i].window + int64_t(cc) * sh.window_elems(), 0,
                                                       size_t(sh.window_elems() * 2), stream),
                                       "cuda backend", "the zero checkpoint"));
    }
  }
  for (size_t i = 0; i < nk.size() && pages; ++i) {
    const int64_t page_elems = B * 2 * nk[i].width;
    if (page_cap_ > 0)
      RSSM_RETURN_IF_ERROR(copy_rows(nk[i].rows, kv_[i].rows, int64_t(page_cap_) * page_elems * 2, stream,
                                     "K/V pool growth"));
    RSSM_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(nk[i].k_pages, kp[i].data(), sizeof(uint16_t*) * kp[i].size(),
                                                     cudaMemcpyHostToDevice, stream),
                                     "cuda backend", "K/V page list"));
    RSSM_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(nk[i].v_pages, vp[i].data(), sizeof(uint16_t*) * vp[i].size(),
                                                     cudaMemcpyHostToDevice, stream),
                                     "cuda backend", "K/V page list"));
  }
  // The host page lists and the old pools must outlive the copies.
  RSSM_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(stream), "cuda backend", "pool growth"));
  for (size_t i = 0; i < ns.size(); ++i) {
    SsmStore& o = ssm_[i];
    if (logs) {
      cudaFree(o.log_a), cudaFree(o.log_b), cudaFree(o.log_c), cudaFree(o.log_pre);
      o.log_a = ns[i].log_a, o.log_b = ns[i].log_b, o.log_c = ns[i].log_c, o.log_pre = ns[i].log_pre;
    }
    if (ckpts) {
      cudaFree(o.state), cudaFree(o.window);
      o.state = ns[i].state, o.window = ns[i].window;
    }
  }
  for (size_t i = 0; i < nk.size() && pages; ++i) {
    cudaFree(kv_[i].rows), cudaFree(kv_[i].k_pages), cudaFree(kv_[i].v_pages);
    kv_[i] = nk[i];
  }
  fresh.keep();
  if (pages) page_cap_ = pc;
  if (logs) log_cap_ = lc, log_scratch_cap_ = ls;
  if (ckpts) ckpt_cap_ = cc, ckpt_scratch_cap_ = cs;
  state_bytes_ = kv_bytes_ = 0;
  for (const SsmStore& s : ssm_)
    state_bytes_ += int64_t(log_cap_ + log_scratch_cap_) * B * s.shape.entry_bytes() +
                    (int64_t(ckpt_cap_) + 1 + ckpt_scratch_cap_) * s.shape.checkpoint_bytes();
  for (const KvStore& k : kv_)
    kv_bytes_ += int64_t(page_cap_) * (B * 2 * k.width * 2 + 2 * int64_t(sizeof(uint16_t*)));
  return {};
}

Status SlotStorage::apply(std::span<const StorageOp> ops, cudaStream_t stream) {
  const int64_t B = B_;
  for (const StorageOp& op : ops) {
    auto in = [&](int32_t slot, int32_t cap) { return slot >= 0 && slot < cap; };
    switch (op.kind) {
      case StorageOp::kCopyPage:
        if (!in(op.src, page_cap_) || !in(op.dst, page_cap_)) break;
        for (KvStore& k : kv_) {
          const int64_t bytes = B * 2 * k.width * 2;
          RSSM_RETURN_IF_ERROR(copy_rows(at_bytes(k.rows, op.dst * bytes), at_bytes(k.rows, op.src * bytes), bytes,
                                         stream, "page copy"));
        }
        continue;
      case StorageOp::kCopyLog:
        if (!in(op.src, log_cap_) || !in(op.dst, log_cap_)) break;
        for (SsmStore& s : ssm_) {
          const SsmShape& sh = s.shape;
          for (auto [base, row_bytes] : {std::pair<void*, int64_t>{s.log_a, sh.a_width * 2}, {s.log_b, sh.b_bytes()},
                                         {s.log_c, sh.c_width * 4}, {s.log_pre, sh.C * 2}})
            RSSM_RETURN_IF_ERROR(copy_rows(at_bytes(base, op.dst * B * row_bytes), at_bytes(base, op.src * B * row_bytes),
                                           B * row_bytes, stream, "log copy"));
        }
        continue;
      case StorageOp::kCopyCheckpoint:
        if (!in(op.src, ckpt_cap_) || !in(op.dst, ckpt_cap_)) break;
        for (SsmStore& s : ssm_) {
          const int64_t sb = s.shape.state_floats() * 4, wb = s.shape.window_elems() * 2;
          RSSM_RETURN_IF_ERROR(copy_rows(at_bytes(s.state, op.dst * sb), at_bytes(s.state, op.src * sb), sb, stream,
                                         "checkpoint copy"));
          RSSM_RETURN_IF_ERROR(copy_rows(at_bytes(s.window, op.dst * wb), at_bytes(s.window, op.src * wb), wb, stream,
                                         "checkpoint copy"));
        }
        continue;
      case StorageOp::kFreePage:
      case StorageOp::kFreeLog:
      case StorageOp::kFreeCheckpoint: continue;  // the slot's memory waits in its pool for its next owner
    }
    return invalid_argument("cuda backend: a storage copy between slots " + std::to_string(op.src) + " and " +
                            std::to_string(op.dst) + " outside the reserved pools");
  }
  return {};
}

}  // namespace replayssm::cuda
