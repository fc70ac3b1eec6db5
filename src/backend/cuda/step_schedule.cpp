// build_schedule (see step_schedule.h): the plan checked, each slice's
// block table and scratch slots, then each kind's passes.
#include "backend/cuda/step_schedule.h"

#include <algorithm>
#include <climits>
#include <map>
#include <string>

namespace replayssm::cuda {

namespace {

std::string seq_name(const PlanSlice& ps) { return "sequence " + std::to_string(ps.seq); }

// One slice as the schedule sees it.
struct Slice {
  int plan_index = 0;
  int64_t c = 0, p = 0, n = 0, e = 0, row = 0;  // base_pos, pos, n, pos + n, first row
  int32_t base = -1;                            // the plan's base slot (−1: zeros at position 0)
  int32_t state = 0;                            // the slot the kernels read for the base
  int64_t first_page = 0;                       // c / B
  std::vector<int32_t> table;                   // log slots of pages first_page .. (e − 1) / B
  bool real_new_log = false;                    // a page holding new positions has a plan log slot
  std::vector<std::pair<int64_t, int32_t>> writes;  // (position, slot), ascending
  bool reuse = false;
  bool rebuild = false;
  // The log's block table from position `from` (≥ c): its pages and the
  // first entry's offset.
  std::vector<int32_t> table_from(int64_t from, int64_t B) const {
    return std::vector<int32_t>(table.begin() + (from / B - first_page), table.end());
  }
};

// Appends arrays to the schedule's buffer.
struct Buf {
  std::vector<int32_t>& v;
  Span32 put(const std::vector<int32_t>& a) {
    Span32 s{int64_t(v.size()), int64_t(a.size())};
    v.insert(v.end(), a.begin(), a.end());
    return s;
  }
  // Rows of tables padded to one stride (the padding is never read: a
  // kernel reads the entries its counts name; slot 0 keeps it in range).
  Span32 put_tables(const std::vector<std::vector<int32_t>>& rows, int* stride) {
    size_t w = 1;
    for (const auto& r : rows) w = std::max(w, r.size());
    *stride = int(w);
    std::vector<int32_t> a(rows.size() * w, 0);
    for (size_t i = 0; i < rows.size(); ++i) std::copy(rows[i].begin(), rows[i].end(), a.begin() + int64_t(i * w));
    return put(a);
  }
};

// Where a slice's kernels start, and what the first pass wrote: a state
// at a position (the base, or a write) and its slot.
struct State {
  int64_t pos = 0;
  int32_t slot = 0;
};

// One kind's passes over the slices (mamba: Mamba2's fold rules, else GDN's).
void schedule_kind(const std::vector<Slice>& slices, const StepPlan& plan, bool mamba, const ScheduleLimits& lim,
                   const ScheduleSlots& slots, int64_t R, const std::vector<int32_t>& entry, int* ckpt_scratch, Buf& b,
                   KindSchedule* out) {
  const int64_t B = plan.page_size;
  enum Path { kDecode, kStep, kScan };
  struct Choice {
    Path path = kScan;
    int fold_write = -1;       // decode: the write folded in the first pass
    int32_t scan_out = -1;     // scan: where the state after the rows goes
    int32_t step_scratch = -1; // step: where token states without a write go
    std::vector<char> produced;  // per write: written by the first pass
  };
  std::vector<Choice> ch(slices.size());
  for (size_t i = 0; i < slices.size(); ++i) {
    const Slice& s = slices[i];
    Choice& c = ch[i];
    c.produced.assign(s.writes.size(), 0);
    const bool several = s.writes.size() > 1;
    bool writes_after_pos = true;  // and each at its own position: one token's state each
    for (size_t w = 0; w < s.writes.size(); ++w)
      writes_after_pos = writes_after_pos && s.writes[w].first > s.p && (w == 0 || s.writes[w].first > s.writes[w - 1].first);
    if (!mamba && lim.gdn_step && s.c == s.p && s.n <= lim.decode_tokens && !s.real_new_log && writes_after_pos &&
        (!s.reuse || s.n == 1)) {
      c.path = kStep;
      std::fill(c.produced.begin(), c.produced.end(), 1);
      if (int64_t(s.writes.size()) < s.n) c.step_scratch = slots.ckpt_scratch + (*ckpt_scratch)++;
    } else if (s.n <= lim.decode_tokens && s.e - s.c <= lim.decode_log) {
      c.path = kDecode;
      // The largest write this pass can fold: Mamba2's fold may take the
      // new tokens; GDN's only the entries before them.
      if (!(s.reuse && several))
        for (size_t w = 0; w < s.writes.size(); ++w) {
          const int64_t at = s.writes[w].first;
          if (at > s.c && at <= (mamba ? s.e : s.p)) c.fold_write = int(w);
        }
      if (c.fold_write >= 0) c.produced[size_t(c.fold_write)] = 1;
    } else {
      c.path = kScan;
      if (!s.writes.empty() && s.writes.back().first == s.e && !(s.reuse && several)) {
        c.scan_out = s.writes.back().second;
        c.produced.back() = 1;
      } else {
        c.scan_out = slots.ckpt_scratch + (*ckpt_scratch)++;
      }
    }
  }

  // Reuse slices after every other (see the header), each group its passes.
  for (int group = 0; group < 2; ++group) {
    auto in_group = [&](size_t i) { return slices[i].reuse == (group == 1); };
    // First pass: decode launches by token count, step launches likewise,
    // one scan launch.
    std::map<int64_t, std::vector<size_t>> decode_by_t, step_by_t;
    std::vector<size_t> scans;
    for (size_t i = 0; i < slices.size(); ++i) {
      if (!in_group(i)) continue;
      if (ch[i].path == kDecode) decode_by_t[slices[i].n].push_back(i);
      else if (ch[i].path == kStep) step_by_t[slices[i].n].push_back(i);
      else scans.push_back(i);
    }
    for (const auto& [T, members] : decode_by_t) {
      SsmLaunch L;
      L.kind = SsmLaunch::kDecode;
      L.batch = int(members.size());
      L.T = int(T);
      std::vector<int32_t> slot, n_log, row, fold, fold_slot, first;
      std::vector<std::vector<int32_t>> pages;
      for (size_t i : members) {
        const Slice& s = slices[i];
        const Choice& c = ch[i];
        slot.push_back(s.state);
        n_log.push_back(int32_t(s.e - s.c));
        row.push_back(int32_t(s.row));
        const int32_t f = c.fold_write >= 0 ? int32_t(s.writes[size_t(c.fold_write)].first - s.c) : 0;
        fold.push_back(f);
        fold_slot.push_back(c.fold_write >= 0 ? s.writes[size_t(c.fold_write)].second : s.state);
        L.max_fold = std::max(L.max_fold, int(f));
        pages.push_back(s.table);
        first.push_back(int32_t(s.c % B));
      }
      L.slot = b.put(slot), L.n_log = b.put(n_log), L.row = b.put(row);
      if (L.max_fold > 0) L.fold = b.put(fold), L.fold_slot = b.put(fold_slot);
      L.page = b.put_tables(pages, &L.page_stride), L.first = b.put(first);
      out->state_reads += L.batch;
      out->launches.push_back(L);
    }
    for (const auto& [T, members] : step_by_t) {
      SsmLaunch L;
      L.kind = SsmLaunch::kStep;
      L.batch = int(members.size());
      L.T = int(T);
      std::vector<int32_t> slot, row, out_slot(size_t(R), 0);
      for (size_t i : members) {
        const Slice& s = slices[i];
        slot.push_back(s.state);
        row.push_back(int32_t(s.row));
        for (int64_t t = 0; t < s.n; ++t) {
          int32_t to = ch[i].step_scratch;
          for (const auto& w : s.writes)
            if (w.first == s.p + t + 1) to = w.second;
          out_slot[size_t(s.row + t)] = to;
        }
      }
      L.slot = b.put(slot), L.row = b.put(row), L.out_slot = b.put(out_slot);
      out->state_reads += L.batch;
      out->launches.push_back(L);
    }
    if (!scans.empty()) {
      SsmLaunch L;
      L.kind = SsmLaunch::kScan;
      L.batch = int(scans.size());
      std::vector<int32_t> slot, out_slot, cu, n_rows, n_log, first, u_entry(size_t(R), -1);
      std::vector<std::vector<int32_t>> pages;
      for (size_t i : scans) {
        const Slice& s = slices[i];
        slot.push_back(s.state);
        out_slot.push_back(ch[i].scan_out);
        cu.push_back(int32_t(s.row));
        n_rows.push_back(int32_t(s.n));
        n_log.push_back(int32_t(s.p - s.c));
        pages.push_back(s.table);
        first.push_back(int32_t(s.c % B));
        L.T = std::max(L.T, int(s.n));
        for (int64_t t = 0; t < s.n; ++t) u_entry[size_t(s.row + t)] = entry[size_t(s.row + t)];
      }
      cu.push_back(int32_t(R));
      L.slot = b.put(slot), L.out_slot = b.put(out_slot), L.cu_rows = b.put(cu), L.n_rows = b.put(n_rows);
      L.n_log = b.put(n_log), L.page = b.put_tables(pages, &L.page_stride), L.first = b.put(first);
      if (!mamba) L.u_entry = b.put(u_entry);
      out->state_reads += L.batch;
      out->launches.push_back(L);
    }

    // Second pass: every write the first did not make, ascending a slice,
    // the k-th of every slice in one launch, from the nearest state below.
    std::vector<std::vector<size_t>> pending(slices.size());
    for (size_t i = 0; i < slices.size(); ++i)
      if (in_group(i))
        for (size_t w = 0; w < slices[i].writes.size(); ++w)
          if (!ch[i].produced[w]) pending[i].push_back(w);
    for (size_t k = 0;; ++k) {
      SsmLaunch L;
      L.kind = SsmLaunch::kScan;
      L.log_alone = true;
      L.T = 1;
      std::vector<int32_t> slot, out_slot, cu, n_rows, n_log, first;
      std::vector<std::vector<int32_t>> pages;
      bool any = false;
      for (size_t i = 0; i < slices.size(); ++i) {
        if (k >= pending[i].size()) continue;
        any = true;
        const Slice& s = slices[i];
        const auto& [w_pos, w_slot] = s.writes[pending[i][k]];
        // The nearest state at or below the write: the base, a write of
        // the first pass, or an earlier one of this pass (written already).
        State from{s.c, s.state};
        for (size_t w = 0; w < s.writes.size(); ++w) {
          const bool ready = ch[i].produced[w] || std::find(pending[i].begin(), pending[i].begin() + int64_t(k), w) !=
                                                      pending[i].begin() + int64_t(k);
          if (ready && s.writes[w].first <= w_pos && s.writes[w].first >= from.pos)
            from = {s.writes[w].first, s.writes[w].second};
        }
        if (from.pos == w_pos) {
          SsmLaunch cp;
          cp.kind = SsmLaunch::kCopy;
          cp.copy_src = from.slot, cp.copy_dst = w_slot;
          if (cp.copy_src != cp.copy_dst) out->launches.push_back(cp);
          continue;
        }
        slot.push_back(from.slot);
        out_slot.push_back(w_slot);
        cu.push_back(0);
        n_rows.push_back(0);
        n_log.push_back(int32_t(w_pos - from.pos));
        pages.push_back(s.table_from(from.pos, B));
        first.push_back(int32_t(from.pos % B));
      }
      if (!any) break;
      if (slot.empty()) continue;
      L.batch = int(slot.size());
      cu.push_back(0);
      L.slot = b.put(slot), L.out_slot = b.put(out_slot), L.cu_rows = b.put(cu), L.n_rows = b.put(n_rows);
      L.n_log = b.put(n_log), L.page = b.put_tables(pages, &L.page_stride), L.first = b.put(first);
      out->state_reads += L.batch;
      out->launches.push_back(L);
    }
  }

  // The windows of every write, from each slice's base.
  WindowGather& g = out->windows;
  std::vector<int32_t> first, ckpt, upto, idx;
  std::vector<std::vector<int32_t>> pages;
  for (const Slice& s : slices)
    for (const auto& [w_pos, w_slot] : s.writes) {
      pages.push_back(s.table);
      first.push_back(int32_t(s.c % B));
      ckpt.push_back(s.base);
      upto.push_back(int32_t(w_pos - s.c));
      idx.push_back(int32_t(g.n++));
      g.write_slot.push_back(w_slot);
    }
  if (g.n > 0) {
    g.page = b.put_tables(pages, &g.page_stride), g.first = b.put(first), g.ckpt_slot = b.put(ckpt);
    g.n_upto = b.put(upto), g.out = b.put(idx), g.write = b.put(g.write_slot);
  }
}

}  // namespace

SlotsNamed slots_named(std::span<const StorageOp> ops) {
  SlotsNamed n;
  for (const StorageOp& op : ops) {
    const int32_t hi = std::max(op.src, op.dst) + 1;
    switch (op.kind) {
      case StorageOp::kCopyPage:
      case StorageOp::kFreePage: n.pages = std::max(n.pages, hi); break;
      case StorageOp::kCopyLog:
      case StorageOp::kFreeLog: n.logs = std::max(n.logs, hi); break;
      case StorageOp::kCopyCheckpoint:
      case StorageOp::kFreeCheckpoint: n.ckpts = std::max(n.ckpts, hi); break;
    }
  }
  return n;
}

SlotsNamed slots_named(const StepPlan& plan) {
  SlotsNamed n = slots_named(plan.ops);
  for (int32_t s : plan.pages) n.pages = std::max(n.pages, s + 1);
  for (int32_t s : plan.logs) n.logs = std::max(n.logs, s + 1);
  for (int32_t s : plan.folded_logs) n.logs = std::max(n.logs, s + 1);
  for (int32_t s : plan.write_slot) n.ckpts = std::max(n.ckpts, s + 1);
  for (const PlanSlice& ps : plan.slices) n.ckpts = std::max(n.ckpts, ps.base + 1);
  return n;
}

Result<StepSchedule> build_schedule(const StepPlan& plan, std::span<const int64_t> logit_rows, bool has_mamba,
                                    bool has_gdn, const ScheduleLimits& limits, const ScheduleSlots& slots) {
  const int64_t B = plan.page_size, R = plan.rows();
  if (B < 1) return invalid_argument("cuda backend: a plan's page size must be >= 1");
  StepSchedule out;
  out.rows = R;
  out.exact = plan.exact;
  std::vector<Slice> slices;
  int log_scratch = 0;
  for (size_t i = 0; i < plan.slices.size(); ++i) {
    const PlanSlice& ps = plan.slices[i];
    Slice s;
    s.plan_index = int(i);
    s.c = ps.base_pos, s.p = ps.pos, s.n = ps.n, s.e = ps.pos + ps.n, s.row = ps.row;
    s.base = ps.base, s.reuse = ps.reuse >= 0, s.rebuild = ps.rebuild;
    const std::string who = "cuda backend: plan: " + seq_name(ps);
    if (s.n < 1 || s.p < 0 || s.row < 0 || s.row + s.n > R)
      return invalid_argument(who + ": slice of " + std::to_string(s.n) + " tokens at position " +
                              std::to_string(s.p) + ", rows from " + std::to_string(s.row) + " of " +
                              std::to_string(R));
    if (s.c < 0 || s.c > s.p || s.base < -1 || (s.base < 0 && s.c != 0))
      return invalid_argument(who + ": base checkpoint " + std::to_string(s.base) + " at " + std::to_string(s.c) +
                              " for a slice at " + std::to_string(s.p));
    if (s.e > (int64_t{1} << 30)) return invalid_argument(who + ": position " + std::to_string(s.e) + " out of range");
    s.state = s.base >= 0 ? s.base : slots.zero;
    const int64_t n_pages = (s.e + B - 1) / B;
    if (ps.table_begin < 0 || int64_t(ps.table_begin) + n_pages > int64_t(plan.pages.size()) ||
        int64_t(ps.table_begin) + n_pages > int64_t(plan.logs.size()))
      return invalid_argument(who + ": its block table of " + std::to_string(n_pages) + " pages is outside the plan's");
    for (int64_t pi = 0; pi < n_pages; ++pi)
      if (plan.pages[size_t(ps.table_begin + pi)] < 0)
        return invalid_argument(who + ": page " + std::to_string(pi) + " has no K/V slot");
    s.first_page = s.c / B;
    for (int64_t pi = s.first_page; pi < n_pages; ++pi) {
      int32_t slot = plan.logs[size_t(ps.table_begin + pi)];
      const bool logged = std::max(s.c, pi * B) < std::min(s.p, (pi + 1) * B);  // holds entries of [c, p) read
      if (slot < 0 && logged)
        return invalid_argument(who + ": page " + std::to_string(pi) + " holds log entries of [" +
                                std::to_string(s.c) + ", " + std::to_string(s.p) + ") but has no log slot");
      if (slot >= 0 && (pi + 1) * B > s.p) s.real_new_log = true;
      if (slot < 0) slot = slots.log_scratch + log_scratch++;  // new entries only
      if ((int64_t(slot) + 1) * B > INT32_MAX)  // the appends address log rows by int32
        return out_of_budget(who + ": log slot " + std::to_string(slot) + " of " + std::to_string(B) +
                             " rows is past the kernels' 2^31 log rows");
      s.table.push_back(slot);
    }
    if (ps.write_begin < 0 || ps.write_begin > ps.write_end || size_t(ps.write_end) > plan.write_pos.size() ||
        size_t(ps.write_end) > plan.write_slot.size())
      return invalid_argument(who + ": its writes are outside the plan's");
    for (int32_t w = ps.write_begin; w < ps.write_end; ++w) {
      const int64_t at = plan.write_pos[size_t(w)];
      const int32_t slot = plan.write_slot[size_t(w)];
      if (at < s.c || at > s.e || slot < 0 || (!s.writes.empty() && at < s.writes.back().first))
        return invalid_argument(who + ": a state written after " + std::to_string(at) + " tokens into slot " +
                                std::to_string(slot) + " (the slice spans [" + std::to_string(s.c) + ", " +
                                std::to_string(s.e) + "], writes ascending)");
      s.writes.push_back({at, slot});
    }
    if (ps.reuse >= 0 && (ps.reuse >= ps.write_end - ps.write_begin || s.base < 0 ||
                          plan.write_slot[size_t(ps.write_begin + ps.reuse)] != s.base))
      return invalid_argument(who + ": write " + std::to_string(ps.reuse) + " reuses a slot that is not its base's");
    slices.push_back(std::move(s));
  }
  if (int64_t(plan.tokens.size()) != R) return invalid_argument("cuda backend: plan tokens and rows differ");
  std::vector<size_t> order(slices.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return slices[a].row < slices[b].row; });
  int64_t covered = 0;
  for (size_t i : order) {
    if (slices[i].row != covered)
      return invalid_argument("cuda backend: plan: the slices must cover the step's rows in order without gaps");
    covered += slices[i].n;
  }
  if (covered != R)
    return invalid_argument("cuda backend: plan: slices cover " + std::to_string(covered) + " rows of " +
                            std::to_string(R));
  for (int64_t r : logit_rows)
    if (r < 0 || r >= R) return invalid_argument("cuda backend: logit row " + std::to_string(r) + " out of range");

  Buf b{out.buf};
  // Per row: token, position, log row of its entry, K/V append target.
  const size_t rows = static_cast<size_t>(R);
  std::vector<int32_t> row_pos(rows), entry(rows), kv_seq(rows), kv_pos(rows);
  for (size_t j = 0; j < order.size(); ++j) {
    const Slice& s = slices[order[j]];
    for (int64_t t = 0; t < s.n; ++t) {
      const int64_t q = s.p + t, r = s.row + t;
      row_pos[size_t(r)] = int32_t(q);
      entry[size_t(r)] = int32_t(int64_t(s.table[size_t(q / B - s.first_page)]) * B + q % B);
      kv_seq[size_t(r)] = int32_t(j);
      kv_pos[size_t(r)] = s.rebuild ? -1 : int32_t(q);  // a rebuild reads its K/V rows, never writes them
    }
    out.max_rows = std::max(out.max_rows, int(s.n));
    out.max_len = std::max(out.max_len, int(s.e));
    out.all_single = out.all_single && s.n == 1;
  }
  out.tokens = b.put(plan.tokens);
  out.row_pos = b.put(row_pos), out.entry = b.put(entry), out.kv_seq = b.put(kv_seq), out.kv_pos = b.put(kv_pos);
  // Per sequence, in row order.
  std::vector<int32_t> cu, pos, len, logged, ckpt, first;
  std::vector<std::vector<int32_t>> conv_pages, kv_pages;
  for (size_t i : order) {
    const Slice& s = slices[i];
    const PlanSlice& ps = plan.slices[size_t(s.plan_index)];
    cu.push_back(int32_t(s.row));
    pos.push_back(int32_t(s.p));
    len.push_back(int32_t(s.e));
    logged.push_back(int32_t(s.p - s.c));
    ckpt.push_back(s.base);
    first.push_back(int32_t(s.c % B));
    conv_pages.push_back(s.table);
    kv_pages.emplace_back(plan.pages.begin() + ps.table_begin, plan.pages.begin() + ps.table_begin + (s.e + B - 1) / B);
  }
  cu.push_back(int32_t(R));
  out.n_seqs = int(order.size());
  out.cu_rows = b.put(cu), out.seq_pos = b.put(pos), out.seq_len = b.put(len);
  out.conv_logged = b.put(logged), out.conv_ckpt = b.put(ckpt);
  out.conv_page = b.put_tables(conv_pages, &out.conv_page_stride), out.conv_first = b.put(first);
  out.kv_table = b.put_tables(kv_pages, &out.kv_max_pages);
  std::vector<int32_t> kept;
  for (int64_t r : logit_rows) kept.push_back(int32_t(r));
  out.logit_rows = b.put(kept);

  int ckpt_scratch = 0;
  if (has_mamba) schedule_kind(slices, plan, true, limits, slots, R, entry, &ckpt_scratch, b, &out.mamba);
  if (has_gdn) schedule_kind(slices, plan, false, limits, slots, R, entry, &ckpt_scratch, b, &out.gdn);
  for (const Slice& s : slices) out.total_writes += int(s.writes.size());
  out.log_scratch = log_scratch;
  out.ckpt_scratch = ckpt_scratch;
  return out;
}

}  // namespace replayssm::cuda
