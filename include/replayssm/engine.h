// Engine: continuous batching of many requests over one backend — the C++
// API a serving loop drives, the same on every backend.
//
// Requests join (submit) and leave (finish, cancel) between steps. Each
// step is one batched forward over the backend: the next token of every
// running completion (a verify of its drafts, under speculation), then
// prompt chunks (at most prefill_chunk tokens per request) for the
// requests still prefilling, up to max_batch_tokens rows. A waiting
// request is admitted while its estimated state fits the state budget (or
// when nothing else runs). When a step does not fit the budget, the most
// recently admitted requests are parked — taken out of the batch, their
// sequences kept but their state left to eviction — and resumed later by
// restore (checkpoint + log replay, or a re-prefill), never failed while
// another request still runs; a request that cannot fit alone fails with
// kOutOfBudget.
//
// A request carries what a server asks for: sampling (temperature, top-p,
// seed), stop conditions (EOS unless ignored, stop token sequences,
// max_new_tokens), n completions — sampled independently, or the n best of
// best_of samples by mean log-probability, or the n best beams of a beam
// search — n-gram or draft-model speculation, and the top log-probabilities
// of each token. Completions of one request share the prompt's state
// (forks: under replay its pages and checkpoints).
//
// Tokens are reported through the request's callback as they are chosen:
// streaming completions (plain n) token by token; best_of and beam search,
// whose winners are known only at the end, all at once when they finish.
// Each completion ends with one event with finished = true (carrying its
// last token, if one was just chosen); a request ends when all of its
// completions have. Callbacks run on the thread that calls step().
//
// Thread safety: submit, cancel, step, run and the readers are called from
// one thread, except cancel_async(), which any thread may call at any time
// (a server's connection threads): the request ends at the next step.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "replayssm/backend.h"
#include "replayssm/sampling.h"
#include "replayssm/state.h"

namespace replayssm {

class Session;
class PrefixCache;

enum class FinishReason {
  kNone,       // not finished
  kStop,       // EOS or a stop sequence
  kLength,     // max_new_tokens
  kCancelled,  // cancel() or cancel_async()
  kError,      // TokenEvent::error says why (e.g. kOutOfBudget)
};
const char* finish_reason_name(FinishReason r);

struct RequestParams {
  std::vector<int32_t> prompt;
  int64_t max_new_tokens = 16;
  SamplingParams sampling;   // completion i of a request draws with seed + i
  bool stop_at_eos = true;   // false: EOS is a token like any other (ignore_eos)
  // A completion ends after any of these token sequences (kept in its
  // tokens; a server strips them from the text).
  std::vector<std::vector<int32_t>> stop;
  int64_t n = 1;             // completions returned
  int64_t best_of = 0;       // ≥ n: sample best_of, return the n of best mean log-probability (0: n)
  int64_t beam_width = 0;    // ≥ n: beam search of that width, the n best beams (0: no beam search)
  double length_penalty = 1.0;  // beam search: score = logprob / length^length_penalty
  int64_t top_logprobs = 0;  // per token, the k most likely tokens (0: none; at most kMaxTopLogprobs)
  // Each prompt token's log-probability given those before it, with its k
  // most likely alternatives (−1: none; 0: the log-probabilities alone), in
  // one event before the first token (an echo with logprobs).
  int64_t prompt_logprobs = -1;
  // Speculation: `spec_tokens` drafts per verify from n-gram prompt lookup
  // (longest n-gram ngram_max) or the engine's draft model.
  enum Spec { kNoSpec, kNgram, kDraft } spec = kNoSpec;
  int64_t spec_tokens = 4;
  int64_t ngram_max = 3;
  int64_t state_budget = 0;  // bytes for this request's state (0 = no cap)
  // The prefix cache's partition (EngineOptions::prefix_cache): a request
  // reuses only what requests of the same key computed (a server's tenant).
  std::string cache_key;
};

// The most top log-probabilities a token may report.
inline constexpr int64_t kMaxTopLogprobs = 20;
// The most completions (n, best_of, beam width) one request may ask for.
inline constexpr int64_t kMaxCompletions = 256;

// The prefix cache (workloads/prefix_cache.h): what finished prompts and
// requests computed, reused by later requests that start with the same
// tokens, at any token.
struct PrefixCacheOptions {
  bool enabled = false;
  // Bytes (state + K/V) held by the cache's entries alone; over it, entries
  // are released (0: no cap of its own; the state budget still applies,
  // and the engine releases entries before refusing admission under it).
  int64_t max_bytes = 0;
  // A hit replays at most this many log entries: requests that may be
  // cached keep a checkpoint per replay_limit tokens and their whole log.
  int64_t replay_limit = 256;
  // Where a hit may start. kAnyToken: at any token (this engine's rule).
  // For comparison in benchmarks, the rules of engines that keep an SSM
  // state only at some positions: kBlockAligned — multiples of
  // `align` tokens and the ends of cached entries (vLLM's align mode);
  // kPerNode — the radix tree's nodes, a state per node (SGLang). The
  // storage kept is the same; only where a hit may start differs.
  enum Mode { kAnyToken, kBlockAligned, kPerNode } mode = kAnyToken;
  int64_t align = 512;
};

struct EngineOptions {
  StateOptions state;
  PrefixCacheOptions prefix_cache;
  int64_t max_batch_tokens = 512;  // rows of one step (every running completion's token fits first)
  int64_t prefill_chunk = 256;     // prompt tokens per request per step
  int64_t max_running = 64;        // requests admitted at once
  // The draft model for RequestParams::kDraft, a backend of the target's
  // kind with the same vocabulary (nullptr: such requests are refused).
  Backend* draft = nullptr;
  Status validate() const;
};

struct TokenEvent {
  int64_t request = 0;
  int64_t index = 0;                // which completion; −1: the prompt's event (prompt_logprobs)
  int32_t token = -1;               // -1 when the event only reports an end
  double logprob = 0.0;             // the token's log-probability (temperature 1)
  std::vector<TokenLogprob> top;    // RequestParams::top_logprobs of them, best first
  bool finished = false;            // no more events for this completion
  FinishReason reason = FinishReason::kNone;
  Status error;                     // why it ended early (kError), ok otherwise
  // The prompt's event (index −1): prompt_logprobs[i] for prompt token i
  // given those before it (NaN for the first), prompt_top[i] its
  // alternatives when asked (empty for the first).
  std::vector<double> prompt_logprobs;
  std::vector<std::vector<TokenLogprob>> prompt_top;
  // Prompt tokens taken from the prefix cache (not computed), on every
  // event of the request.
  int64_t cached_tokens = 0;
};

// One completion as it stands.
struct Completion {
  std::vector<int32_t> tokens;
  std::vector<double> logprobs;                  // per token
  std::vector<std::vector<TokenLogprob>> top;    // per token, when asked
  double score = 0.0;                            // beam: logprob / len^length_penalty; else mean logprob
  FinishReason reason = FinishReason::kNone;
};

struct EngineStats {
  int64_t steps = 0, prefill_tokens = 0, decode_tokens = 0;
  int64_t max_batch_rows = 0, max_running = 0, max_waiting = 0;
  int64_t preemptions = 0;          // requests parked because a step did not fit the budget
  int64_t finished = 0;             // requests ended, for any reason
  int64_t spec_drafted = 0, spec_accepted = 0;
  // Steps in which some request took prompt tokens, and the wall time of
  // the steps (each returns its tokens to the host, so each is timed
  // whole): where a serving run's time goes.
  int64_t prefill_steps = 0;
  double prefill_step_s = 0.0, decode_step_s = 0.0;
  // The prefix cache: prompts looked up and their tokens, hits and the
  // tokens they reused, entries released; its entries and bytes now.
  int64_t prefix_lookups = 0, prefix_lookup_tokens = 0, prefix_hits = 0, prefix_hit_tokens = 0;
  // What hits cost: log entries replayed from a checkpoint, tokens re-run
  // where the log was gone.
  int64_t prefix_replay_tokens = 0, prefix_rerun_tokens = 0;
  int64_t prefix_evictions = 0;
  int64_t prefix_entries = 0, prefix_state_bytes = 0, prefix_kv_bytes = 0;
};

class Engine {
 public:
  using RequestId = int64_t;
  using Callback = std::function<void(const TokenEvent&)>;

  // The backend (and the draft's) must outlive the engine, which holds
  // them (one session each) for its lifetime.
  static Result<std::unique_ptr<Engine>> create(Backend& backend, const EngineOptions& opt);
  ~Engine();

  // Checks a request (prompt ids in the vocabulary, sizes, sampling,
  // speculation) and queues it.
  Result<RequestId> submit(RequestParams params, Callback on_token = {});
  // Ends a waiting or running request now (each unfinished completion
  // gets a finished event, kCancelled).
  Status cancel(RequestId id);
  // The same from any thread: takes effect at the start of the next step.
  void cancel_async(RequestId id);
  // From any thread: completion `index` of a streaming request ends at the
  // start of the next step with FinishReason::kStop (a server's stop
  // string, matched in the text). Its request ends once all have.
  void stop_async(RequestId id, int64_t index);
  // One batched step (admitting waiting requests first); nothing when idle.
  // Fails only on errors that are not a request's own (those end the
  // request through its callback).
  Status step();
  // Steps until every request has finished.
  Status run();
  bool idle() const;
  int64_t running() const;
  int64_t waiting() const;
  // A request's completions as they stand (the n returned, once finished).
  Result<std::vector<Completion>> completions(RequestId id) const;
  // Completion 0's tokens.
  Result<std::vector<int32_t>> output(RequestId id) const;

  const EngineStats& stats() const { return stats_; }
  const StateManager& state() const;
  const Backend& backend() const { return backend_; }

 private:
  struct Lane;
  struct Request;
  Engine(Backend& backend, const EngineOptions& opt, std::unique_ptr<Session> s, std::unique_ptr<Session> draft);
  void end_completion(Request& r, size_t lane, int32_t token, FinishReason reason, Status error);
  void end_request(Request& r, FinishReason reason, Status error);
  void release_lanes(Request& r);
  bool admit_one(int64_t* reserved);
  void park(Request& r);
  // Appends a chosen token to a completion and reports it (or ends the
  // completion); false once it has ended.
  bool emit(Request& r, size_t lane, int32_t token, double logprob, std::vector<TokenLogprob> top);
  // The prompt is in: its last row (kept row `row`) starts the completions.
  Status start_completions(Request& r, int64_t row);
  // prompt_logprobs: the chunk at kept rows row0.. (n rows) scores the
  // prompt tokens after it.
  Status score_prompt(Request& r, int64_t row0, int64_t n);
  // A beam search's step: every live beam's candidates ranked, then forks
  // and releases; `rows` are the beams' kept rows.
  Status step_beams(Request& r, std::span<const int64_t> rows);
  Status finish_search(Request& r);
  // Ends the request once every completion has (a search: reports them).
  Status settle(Request& r);
  void drain_cancels();
  // The prefix cache: keeps `seq`'s tokens for later requests of r's key;
  // refreshes the statistics (entries released since `entries_before`).
  void cache_insert(const Request& r, int64_t seq);
  void note_cache(int64_t entries_before);

  Backend& backend_;
  EngineOptions opt_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<Session> draft_;
  std::unique_ptr<PrefixCache> cache_;  // null when off; destroyed before the session
  std::vector<std::unique_ptr<Request>> requests_;  // index = id
  std::vector<RequestId> waiting_, running_;
  EngineStats stats_;
  std::mutex cancel_mu_;
  std::vector<std::pair<RequestId, int64_t>> cancel_queue_;  // (request, completion; −1: the whole request)
  std::atomic<bool> cancel_pending_{false};
  uint64_t admissions_ = 0;
};

}  // namespace replayssm
