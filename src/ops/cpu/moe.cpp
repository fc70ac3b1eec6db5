// moe (see moe.h). The order of the sums is transformers 5.17's
// (NemotronHExperts / Qwen3_5MoeExperts.forward, the sparse blocks around
// them): a row's output starts at zero and takes y_e · w_e for each chosen
// expert e in ascending index — the order their loop over hit experts
// index_adds in — and the shared expert's output last. Every projection
// is ops::cpu::matmul, whose rows do not depend on one another, so a row's
// result is independent of which rows share the call.
#include "ops/cpu/moe.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "ops/cpu/activation.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/moe_routing.h"

namespace replayssm::ops::cpu {

namespace {

// In place over n rows of width U: gated rows [gate (I) | up (I)] become
// act(gate) ⊙ up in their first I columns; plain rows act(up).
void expert_activation(const MoeParams& p, int64_t I, float* h, int64_t ld, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float* row = h + i * ld;
    if (p.gated)
      for (int64_t j = 0; j < I; ++j) row[j] = activate(p.act, row[j]) * row[I + j];
    else
      for (int64_t j = 0; j < I; ++j) row[j] = activate(p.act, row[j]);
  }
}

// out (rows, D) += the shared expert's output.
void add_shared(const MoeParams& p, const float* x, int64_t ldx, int64_t rows, float* out, int64_t ldo) {
  const int64_t D = p.hidden, Is = p.shared_inter;
  std::vector<float> h(static_cast<size_t>(rows * Is)), s(static_cast<size_t>(rows * D));
  matmul(x, ldx, rows, D, p.shared_up, Is, p.shared_up_b, h.data(), Is);
  if (p.gated) {
    std::vector<float> g(h.size());
    matmul(x, ldx, rows, D, p.shared_gate_proj, Is, p.shared_gate_proj_b, g.data(), Is);
    for (size_t i = 0; i < h.size(); ++i) h[i] = activate(p.act, g[i]) * h[i];
  } else {
    for (float& v : h) v = activate(p.act, v);
  }
  matmul(h.data(), Is, rows, Is, p.shared_down, D, p.shared_down_b, s.data(), D);
  std::vector<float> gate(static_cast<size_t>(rows), 1.0f);
  if (p.shared_gate != nullptr) {
    matmul(x, ldx, rows, D, p.shared_gate, 1, nullptr, gate.data(), 1);
    for (float& v : gate) v = sigmoid(v);
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < D; ++d)
      out[r * ldo + d] += p.shared_gate != nullptr ? gate[r] * s[r * D + d] : s[r * D + d];
}

}  // namespace

void moe(const MoeParams& p, const float* x, int64_t ldx, int64_t rows, float* out, int64_t ldo, int32_t* experts,
         float* weights) {
  const MoeRoutingParams& rp = p.routing;
  const int64_t E = rp.n_experts, K = rp.top_k, D = p.hidden, I = p.inter;
  const int64_t U = p.gated ? 2 * I : I;  // rows of an expert's up matrix
  RSSM_CHECK(D >= 1 && I >= 1 && E >= 1 && K >= 1 && K <= E && ldx >= D && ldo >= D);
  RSSM_CHECK(p.router != nullptr && p.up != nullptr && p.down != nullptr);
  RSSM_CHECK(p.shared_inter == 0 || (p.shared_up != nullptr && p.shared_down != nullptr &&
                                     (!p.gated || p.shared_gate_proj != nullptr)));
  if (rows <= 0) return;

  std::vector<float> logits(static_cast<size_t>(rows * E));
  matmul(x, ldx, rows, D, p.router, E, nullptr, logits.data(), E);
  std::vector<int32_t> chosen(static_cast<size_t>(rows * K));
  std::vector<float> w(chosen.size());
  moe_route(rp, logits.data(), E, rows, chosen.data(), w.data());
  if (experts != nullptr) std::copy(chosen.begin(), chosen.end(), experts);
  if (weights != nullptr) std::copy(w.begin(), w.end(), weights);

  // The (row, slot) pairs grouped by expert, rows ascending within each:
  // a counting sort, so expert e's rows are slots[first[e] .. first[e+1]).
  std::vector<int64_t> first(static_cast<size_t>(E + 1), 0), slots(chosen.size());
  for (int32_t e : chosen) ++first[size_t(e) + 1];
  for (int64_t e = 0; e < E; ++e) first[size_t(e) + 1] += first[size_t(e)];
  std::vector<int64_t> next(first.begin(), first.end() - 1);
  for (int64_t s = 0; s < rows * K; ++s) slots[size_t(next[size_t(chosen[size_t(s)])]++)] = s;

  for (int64_t r = 0; r < rows; ++r) std::fill_n(out + r * ldo, D, 0.0f);
  std::vector<float> xs, h, y;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = first[size_t(e)], n = first[size_t(e) + 1] - b;
    if (n == 0) continue;  // an expert no row chose is never read
    xs.resize(static_cast<size_t>(n * D));
    h.resize(static_cast<size_t>(n * U));
    y.resize(static_cast<size_t>(n * D));
    for (int64_t i = 0; i < n; ++i) std::copy_n(x + slots[size_t(b + i)] / K * ldx, D, xs.data() + i * D);
    matmul(xs.data(), D, n, D, p.up + e * U * D, U, nullptr, h.data(), U);
    expert_activation(p, I, h.data(), U, n);
    matmul(h.data(), U, n, I, p.down + e * D * I, D, nullptr, y.data(), D);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t s = slots[size_t(b + i)];
      float* o = out + s / K * ldo;
      const float wt = w[size_t(s)];
      for (int64_t d = 0; d < D; ++d) o[d] += y[size_t(i * D + d)] * wt;
    }
  }
  if (p.shared_inter > 0) add_shared(p, x, ldx, rows, out, ldo);
}

}  // namespace replayssm::ops::cpu
