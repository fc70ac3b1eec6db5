// The prefix workload of `replayssm bench`: streams of requests that
// resend prefixes, through the Engine, under four prefix-cache rules —
// none, block-aligned (a state only at multiples of 512 tokens and at the
// ends of cached entries: vLLM's align mode), per node (a state per radix
// node: SGLang), and any token (this engine) — in the same engine, so only
// where a hit may start differs.
//
// Scenarios (token ids at random; replies of `reply` tokens, EOS ignored;
// `in_flight` requests at once):
//   chat    — conversations of 8 turns, each turn the whole history plus
//             50–200 new tokens (64 conversations at scale 1);
//   system  — a 2,000-token system prompt shared by requests with
//             different questions of 20–100 tokens (256 at scale 1);
//   fewshot — an instruction and the first j of 8 examples (j at random,
//             prefixes of varied lengths, many under 528 tokens), then a
//             question (256 at scale 1).
// Reported per scenario and rule: token hit rate (reused / prompt tokens)
// and its ratio to the ideal (each prompt's longest common prefix with any
// earlier request's tokens, all but its last token), time to first token
// p50/p95 under load, cache bytes at the end, log entries replayed and
// tokens re-run per hit, and a latency probe: hits sent alone against a
// cold prefill of their uncached suffix alone (median ratio).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replayssm/backend.h"
#include "replayssm/engine.h"
#include "replayssm/status.h"

namespace replayssm::bench {

struct PrefixBenchOptions {
  std::vector<std::string> scenarios = {"chat", "system", "fewshot"};
  std::vector<std::string> modes = {"none", "block", "node", "any"};
  double scale = 1.0;          // request counts (and the system prompt's length) × scale
  int64_t reply = 32;          // tokens per reply
  int64_t in_flight = 16;      // requests submitted at once
  int64_t cache_bytes = 0;     // the cache's byte cap (0: none of its own)
  int64_t replay_limit = 256;  // PrefixCacheOptions::replay_limit
  int64_t probes = 8;          // hits measured alone
  uint64_t seed = 0;
  StateOptions state;
  int64_t prefill_chunk = 512, max_batch_tokens = 1024;
};
Status check_prefix_bench_options(const PrefixBenchOptions& o);

struct PrefixBenchRow {
  std::string scenario, mode;
  int64_t requests = 0, prompt_tokens = 0, reused_tokens = 0, ideal_tokens = 0, hits = 0;
  double hit_rate = 0, ideal_ratio = 0;   // reused / prompt; reused / ideal
  double ttft_p50 = 0, ttft_p95 = 0;      // seconds, under load
  int64_t cache_state_bytes = 0, cache_kv_bytes = 0, cache_entries = 0;
  double replayed_per_hit = 0, rerun_per_hit = 0;
  double probe_ratio = 0;                 // median hit TTFT alone / cold suffix prefill alone (0: no probe)
  double seconds = 0;
};

// Runs every scenario under every rule on `backend` (one engine at a time).
Result<std::vector<PrefixBenchRow>> run_prefix_bench(Backend& backend, const PrefixBenchOptions& o);
std::string prefix_bench_table(const std::vector<PrefixBenchRow>& rows);

}  // namespace replayssm::bench
