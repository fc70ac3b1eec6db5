// Decoder: batched decoding on the GPU, a batch of sequences that advance
// together, T tokens each per step (T = 1 decoding; up to max_chunk for a
// prompt) — the standard or the replay state layout (DESIGN.md §1) behind
// the same step.
//
// A step embeds each sequence's token, runs every block (fused input GEMM,
// conv, SSM decode kernel or paged attention, norm, output GEMM, residual)
// and ends with the LM head and a device argmax. The host owns the
// bookkeeping: before a step it writes the step's plan (tokens, positions,
// log lengths, folds) to one pinned buffer; the step's first node copies it
// to the device and every kernel reads it there. A step is therefore the
// same sequence of launches every time, captured once as a CUDA graph per
// (tokens per sequence, chunk scan or not, whether a log folds, verify),
// with no host synchronisation
// inside it; the host waits once per step, for the argmax.
//
//   standard — every SSM layer reads and writes each sequence's state in
//              place, every step;
//   recompute — the standard layout's live state, updated in place every
//              step (a verify too, through all its tokens), plus one
//              sparse checkpoint per sequence: its state and conv window
//              at the first position at or past each multiple of W (the
//              sparse interval). Going back (a verify not kept whole,
//              rewind()) copies the checkpoint back and re-runs the
//              sequence's tokens since, which the decoder keeps;
//   replay   — each SSM layer reads a checkpoint and the sequence's log of
//              the last < W tokens' inputs and writes no state, except on
//              the step whose log fills (and a chunk scan's: below): that
//              step folds it into the checkpoint in the same pass (Mamba2: all W entries; Gated
//              DeltaNet: the W−T before the step's T tokens, whose u is only
//              known after the step's read, so they move to the front).
//
// The DeviceModel must outlive the Decoder. One Decoder is used by one
// thread at a time, on the device that was current when it was created.
//
// A prompt goes in chunks of up to max_chunk tokens per sequence (by
// default as many as keep a step near kDefaultChunkRows rows: a whole
// 1,024-token prompt at batch 1, 8 tokens at batch 128 and more). The rows
// go through the same GEMMs, conv1d_prefill_cuda and attention_prefill_cuda
// over the pages; the SSM layers take a chunk one of two ways:
//   chunk scan — the sequential recurrence with the state in registers for
//              the whole chunk (mamba2_scan_cuda, gdn_scan_cuda): one state
//              read and one write per chunk, any length. Standard and
//              recompute update the state in place; replay applies its log
//              first and writes the state after the chunk as the new
//              checkpoint (the log is then empty);
//   log step — replay only, when the chunk fits what the decode kernels take
//              (T ≤ 8) and every log has room for it (and not under
//              options.exact with GDN layers): the chunk's entries are the
//              log's last T, folded when the log fills, as one token's are.
//
// Speculative decoding (options.spec_tokens > 0): verify() runs T tokens per
// sequence (its last token and T − 1 drafts) and commits none of them;
// accept() then keeps a prefix of each sequence's T, and the sequences go on
// from their own positions. What a rollback costs is the layouts' point:
//   standard — the verify writes one state per token (the vLLM/SGLang
//              path; spec_tokens + 1 state slots per sequence) and accept()
//              makes the accepted token's slot current;
//   replay   — the verify appends T log entries and writes no state (if the
//              log is near full it folds the committed prefix in the same
//              pass and moves the T to the front); accept() moves a cursor.
// Either way the conv windows keep the verify's pre-conv rows aside and the
// next step starts by rolling each window forward over the accepted ones.
//
// Forks (options.forks): reorder(parent) makes every sequence b continue
// from what sequence parent[b] holds — the step of a beam search, or n
// samples taking one prefilled prompt. Again the layouts differ in what
// that costs:
//   standard — each moved sequence gets a full copy of its parent's state
//              (a second state slot per sequence takes it);
//   replay   — a moved sequence reads its parent's checkpoint slot
//              (refcounted, slot_pool.h) and copies only the parent's log
//              entries; a fold writes in place only when no other sequence
//              reads the slot, else into a free one (a pool of 2 × batch);
//              on a plain step, readers of one slot whose oldest entries
//              come from the same tokens fold those once, into one slot
//              they all read (family folds), and keep the rest; and the
//              readers of one slot that do not fold decode together, each
//              Mamba2 or GDN layer reading that checkpoint once per head
//              for up to 8 of them (fork groups, options.fork_groups).
// Both copy the conv window and the K/V rows (no shared K/V pages yet).
//
// Going back (options.rewind, replay layout): rewind() takes sequences
// back to earlier positions as far as their checkpoints — restore(p) by
// log replay. Each log entry then also keeps its token's pre-conv row, and
// each sequence the conv window as it was at its checkpoint; a rewind
// moves the log's cursor and rebuilds the conv windows from those (no
// state is written: the next step replays the kept entries from the
// checkpoint, as every replay step does). A position before the
// checkpoint needs the tokens again from an older state: reset() and
// step them (a re-prefill).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "replayssm/status.h"
#include "backend/cuda/device_model.h"

namespace replayssm::cuda {

enum class DecodeStrategy { kStandard, kReplay, kRecompute };

constexpr int kMaxChunk = 4096;             // tokens per sequence in one step, at most
constexpr int64_t kDefaultChunkRows = 1024;  // rows of a prompt step by default (max_chunk = 0)
const char* decode_strategy_name(DecodeStrategy s);

struct DecoderOptions {
  DecodeStrategy strategy = DecodeStrategy::kReplay;
  int64_t batch = 1;           // sequences
  int64_t max_context = 2048;  // positions per sequence (prompt + new tokens)
  int window = 16;             // replay: log capacity W, 2..64
  int kv_page = 64;            // attention: rows per KV page
  bool graphs = true;          // replay each step as a captured CUDA graph
  int max_chunk = 0;           // tokens per sequence per step, 1..kMaxChunk; 0: kDefaultChunkRows / batch
                               // (at most max_context), at least what the decode kernels take (8;
                               // replay: also < window)
  bool all_logits = false;     // logits of every row of a chunk, not just each sequence's last
  int spec_tokens = 0;         // the most tokens a verify() or feed() takes, 2..8 (replay: ≤ window/2);
                               // 0: no verify (recompute: 0 means 4 — its re-prefills are feeds)
  bool forks = false;          // reorder() allowed (beams, best-of-n): room for shared or copied states
  int fork_groups = -1;        // replay with forks: sequences that read one checkpoint decode as a group
                               // on plain steps — -1 where it pays (Mamba2 layers: batch × heads ≥ 1024
                               // and a quarter of the batch's reads saved; GDN layers: ≥ 2048 and three
                               // quarters: H200, slower below), 1 wherever a group of two forms, 0
                               // never (each alone)
  bool draft_states = true;    // standard: a state slot per verified token, for verify(); false: feed()
                               // only (a continuous batch, a tree), no per-draft slots
  bool rewind = false;         // replay: rewind() allowed — each log entry's pre-conv row and the
                               // window at the checkpoint kept (W + K − 1 conv rows per layer)
  bool exact = false;          // replay: the Mamba2 and GDN logs replayed by the sequential recurrence, so
                               // every logit has the standard layout's bits (the same steps, the same
                               // kernels' per-token arithmetic; with GDN layers every chunk of 2+ tokens
                               // takes the chunk scan, as the standard layout's do, and folds every log:
                               // rewind() then reaches back only to the chunk's end)
  int replay_step = -1;        // replay, plain one-token steps: a kind's SSM layers (Mamba2, GDN) through the
                               // standard step on the checkpoint — read, stepped and written back, every
                               // token folded, the logs left empty — instead of the output-only kernels:
                               // -1 where that measured the faster decode step (Mamba2 layers where
                               // mamba2_replay_steps_faster: at 8B shapes batch 2; GDN layers' output-only
                               // kernels measured faster at every batch), 1 always (fork groups then form
                               // on no plain step: a stepped token folds), 0 never. Not with exact
                               // or rewind (-1 then never; 1 is refused), and -1 never with fork_groups 1
                               // (a stepped token folds, so it decodes in no group); verifies, chunks and
                               // ragged steps keep the replay kernels, and the first plain step after them
                               // folds the logs
};

// Device memory, by what holds it.
struct DecoderMemory {
  int64_t state_bytes = 0;      // SSM states or checkpoints, conv windows, logs
  int64_t kv_bytes = 0;         // paged K/V for max_context positions
  int64_t workspace_bytes = 0;  // activations, logits, scratch, cuBLAS workspace
};

class Decoder {
 public:
  // Allocates everything a step needs (fails with out_of_budget naming the
  // buffer when the device cannot hold it); every sequence starts empty.
  static Result<std::unique_ptr<Decoder>> create(const DeviceModel& model, const DecoderOptions& options);
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  const DecoderOptions& options() const { return opt_; }
  const DeviceModel& model() const;
  const DecoderMemory& memory() const { return mem_; }
  int64_t length(int64_t b = 0) const { return pos_[size_t(b)]; }  // tokens sequence b holds

  // One step of T tokens per sequence: sequence b takes tokens[b·T .. b·T+T)
  // at positions length(b) .. length(b)+T−1. next[b] gets the argmax after its
  // last token; logits (host fp32), when given, get every logit — of each
  // sequence's last token (batch × vocab), or of every row (batch·T × vocab,
  // row b·T + t) with options().all_logits. Token ids, T (1..max_chunk())
  // and the context are checked first.
  Status step(std::span<const int32_t> tokens, int T, std::span<int32_t> next, float* logits = nullptr);
  Status step(std::span<const int32_t> tokens, std::span<int32_t> next, float* logits = nullptr) {
    return step(tokens, 1, next, logits);
  }
  // The most tokens per sequence a step takes: options().max_chunk.
  int max_chunk() const { return opt_.max_chunk; }

  // A ragged step: sequence b takes its next count[b] tokens (count[b] ≥
  // 0; tokens packed one sequence after another, Σ count of them, at most
  // max_step_tokens()) at positions length(b) .. and commits them; a
  // sequence with count 0 is not touched. What continuous batching runs
  // while prompts go in: a long prompt chunk beside other sequences'
  // single tokens, in one pass whose GEMMs take Σ count rows. In the SSM
  // layers a sequence of one token takes the decode kernels at its row, as
  // in a plain step (replay: its log appended, folded where it fills;
  // exact replay keeps the standard layout's bits), and every longer one
  // the chunk scans (replay: its log folded with the chunk into a new
  // checkpoint). The step runs eagerly (its rows vary, so no CUDA graph is
  // kept). next[b]
  // gets the argmax after sequence b's last token (−1 where count[b] = 0);
  // logits, when given, that row's logits (batch × vocab; zeros where
  // count[b] = 0), or with options().all_logits every row's (Σ count ×
  // vocab, in the tokens' order; top_logprobs, sample and logits_row count
  // rows the same way; without all_logits, row b of a sequence that took
  // no token holds no meaningful logits there). A sequence takes at most
  // kMaxChunk tokens.
  Status step_ragged(std::span<const int32_t> tokens, std::span<const int32_t> count, std::span<int32_t> next,
                     float* logits = nullptr);
  // The most tokens a step_ragged() takes in all: batch × max(max_chunk, spec_tokens).
  int64_t max_step_tokens() const;

  // Speculative verify of T (2..spec_tokens) tokens per sequence, laid out
  // as step()'s: argmax[b·T + t] gets the argmax after token t; logits, when
  // given, every row's (batch·T × vocab). Nothing is committed until
  // accept(), which must come before the next step or verify.
  Status verify(std::span<const int32_t> tokens, int T, std::span<int32_t> argmax, float* logits = nullptr);
  // A masked step: sequence b takes the first count[b] (0..T) of its T
  // tokens (T = 2..spec_tokens, laid out as verify()'s) and commits them
  // at once; its other rows change nothing (the standard and recompute
  // layouts write their states to a scratch slot, replay drops their log
  // entries; where replay's Mamba2 log folds, the counted rows fold with
  // it, as plain steps' do). What feeds one sequence of a batch while the others sit
  // still — a tree's expansion, a re-prefill. argmax and logits as
  // verify()'s.
  Status feed(std::span<const int32_t> tokens, int T, std::span<const int32_t> count, std::span<int32_t> argmax,
              float* logits = nullptr);

  // The k largest log-probabilities of each logits row of the last step or
  // verify (batch rows, or batch·T with a verify or all_logits), with their
  // ids, computed on the device (top_logprobs_cuda): ids and lp get
  // rows × k, row-major. What a beam step ranks, without the rows' copy.
  Status top_logprobs(int k, std::span<int32_t> ids, std::span<double> lp);

  // Samples from the last step's logits on the device: output i draws
  // from row rows[i] (as top_logprobs counts them) with the uniform r[i],
  // as decode/sampler.h sample_at does with `temperature` and `top_p`;
  // ids[i] gets the token and lp[i] its log-softmax at temperature 1.
  Status sample(float temperature, float top_p, std::span<const int32_t> rows, std::span<const double> r,
                std::span<int32_t> ids, std::span<double> lp);

  // Row `row` of the last step's logits (rows as top_logprobs counts them)
  // into out (vocabulary floats).
  Status logits_row(int64_t row, std::span<float> out);

  // Sequence b continues from sequence parent[b]'s tokens and state (all
  // committed; parent[b] = b keeps its own). Needs options.forks; not while
  // a verify awaits accept(). Runs (and waits for) its copies at once.
  Status reorder(std::span<const int32_t> parent);

  // Sequence b goes back to its first length[b] tokens (rewind_floor(b) ≤
  // length[b] ≤ length(b)), as if the rest had never been stepped. Replay
  // (needs options.rewind): a cursor move in its log and its conv windows
  // rebuilt, no state written. Recompute: its sparse checkpoint copied
  // back and the tokens since re-run (feeds). Not while a verify awaits
  // accept(). Runs (and waits for) it all at once.
  Status rewind(std::span<const int64_t> length);
  // The earliest position rewind() reaches for sequence b: its checkpoint
  // (replay: the later one of its Mamba2 and GDN layers'; recompute: its
  // sparse one, 0 after a fork until it passes the next multiple of W);
  // length(b) where the decoder cannot rewind (standard; replay without
  // options.rewind; a verify awaiting accept()).
  int64_t rewind_floor(int64_t b) const;

  // Keep the first accepted[b] (0..T) tokens of the last verify for each
  // sequence; the rest are rolled back (their positions are free again).
  // 0: the sequence sat the verify out (a finished one in a batch).
  Status accept(std::span<const int32_t> accepted);

  // Every sequence back to empty: states, checkpoints and conv windows
  // zeroed. Also what makes a decoder usable again after a failed step.
  Status reset();
  // Sequence b alone back to empty (a new request taking its place in a
  // continuous batch): its state or checkpoint (replay: a fresh slot where
  // others read its old one), sparse checkpoint and conv windows zeroed,
  // its log empty. Not while a verify awaits accept().
  Status clear(int64_t b);

  int64_t folds() const { return folds_; }  // replay steps that folded the log
  // Whether plain one-token steps take the standard step in the Mamba2 /
  // GDN layers (DecoderOptions::replay_step as it applies to this batch
  // and model; false for a kind the model lacks and outside replay).
  bool replay_steps_mamba2() const;
  bool replay_steps_gdn() const;
  // Replay with fork groups: the checkpoint reads the groups saved — per
  // step and kind of SSM layer (Mamba2, GDN), the sequences decoded in
  // groups less the groups (each a read of one checkpoint per layer
  // instead of one per member).
  int64_t checkpoint_reads_shared() const { return reads_shared_; }
  // SSM state bytes written since creation, over all sequences: fp32 states
  // (standard: every step, one per token of a verify; replay: where a log
  // folds) and bf16 conv windows (once per step or accepted verify).
  int64_t state_bytes_written() const { return state_written_; }
  // The most SSM state bytes held at once since the last reset(): the
  // standard layout's states (spec_tokens + 1 per sequence with
  // speculation) plus fork copies in flight; replay's checkpoint slots in
  // use (shared ones once) plus every sequence's log; conv windows and a
  // verify's pre-conv rows in both; with options.rewind, the kept pre-conv
  // rows and checkpoint windows; recompute: the live states and the sparse
  // checkpoints (states and windows). Allocation is memory().state_bytes.
  int64_t state_bytes_peak() const { return state_peak_; }

 private:
  struct Impl;
  friend struct Impl;
  Decoder() = default;
  DecoderOptions opt_;
  DecoderMemory mem_;
  std::vector<int64_t> pos_;  // per sequence
  int64_t folds_ = 0, state_written_ = 0, state_peak_ = 0, reads_shared_ = 0;
  bool poisoned_ = false;  // a step failed after its first launch
  int verify_T_ = 0;       // a verify awaiting accept(): its T
  const int32_t* feed_count_ = nullptr;  // the plan of a feed() being built: its counts
  // recompute: after a verify, sequences whose live state ran past what
  // they kept; after a rewind, those going back — each re-run from its
  // sparse checkpoint to target[b] tokens.
  Status rebuild(const std::vector<int64_t>& target);
  // recompute: a sparse checkpoint for each sequence that passed a multiple of W.
  Status note_checkpoints();
  Status accept_rows(std::span<const int32_t> accepted, bool masked);
  // What a step, fork, rewind or clear needs first: no failed step, no
  // verify awaiting accept().
  Status check_ready() const;
  // Replay: the most tokens a log step appends to every sequence's log (the
  // decode kernels' T, less where a log has less room before it folds);
  // longer chunks take the chunk scan.
  int log_room() const;
  // step() and verify(): the plan, the launches, the wait.
  Status run(std::span<const int32_t> tokens, int T, bool verify, std::span<int32_t> next, float* logits);
  Status launch_step(int T, bool fold, bool verify, bool commit, bool scan, float* logits);
  // launch_step(), the decoder poisoned where it fails (the device part-way through a step).
  Status launch_or_poison(int T, bool fold, bool verify, bool scan, float* logits);
  void note_state_peak(int64_t copies);  // copies: standard states copied by a reorder in flight
  std::unique_ptr<Impl> impl_;
};

}  // namespace replayssm::cuda
