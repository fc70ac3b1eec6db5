// ServedModel: what `replayssm serve` and `replayssm bench-serve
// --in-process` run — a model (a directory, or random weights at a
// preset's shape), its tokenizer, a backend, an optional draft model, and
// the Engine over them — built from one set of options, so the in-process
// benchmark measures exactly the engine the server drives.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>

#include "cli/common.h"
#include "io/tokenizer.h"
#include "replayssm/backend.h"
#include "replayssm/engine.h"
#include "replayssm/model.h"

namespace replayssm::cli {

struct ServedModelArgs {
  std::string model = REPLAYSSM_DEFAULT_MODEL, preset, device = "cpu", spec;
  uint64_t seed = 1;  // a preset's weights
  StateArgs state;
  int64_t max_running = 256, max_batch_tokens = 1024, prefill_chunk = 256;
  // The prefix cache, on unless turned off.
  bool no_prefix_cache = false;
  int64_t prefix_cache_bytes = int64_t{2} << 30, prefix_replay_limit = 256;
};
// --model/--preset --seed --device --spec --max-running --max-batch-tokens
// --prefill-chunk, the prefix cache's and the state options.
void add_served_model_options(CLI::App& app, ServedModelArgs* a);
Status check_served_model_args(const ServedModelArgs& a);

struct ServedModel {
  // Members in the order they must be built (and in reverse, destroyed).
  std::unique_ptr<Model> model, draft_model;
  std::optional<Tokenizer> tokenizer;  // none for a preset: token-id prompts
  std::unique_ptr<Backend> backend, draft_backend;
  std::unique_ptr<Engine> engine;      // taken by whoever drives it
  RequestParams::Spec spec = RequestParams::kNoSpec;
  int64_t spec_tokens = 0;
  std::string source;                  // the model directory or the preset's name
};
Result<std::unique_ptr<ServedModel>> load_served_model(const ServedModelArgs& a);

// --spec: "ngram:T" or "draft:DIR:T".
Status parse_spec_arg(const std::string& text, RequestParams::Spec* kind, int64_t* tokens, std::string* dir);

}  // namespace replayssm::cli
