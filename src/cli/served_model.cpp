// ServedModel (see served_model.h).
#include "cli/served_model.h"

#include "bench/presets.h"
#include "replayssm/make_backend.h"

namespace replayssm::cli {

Result<Tokenizer> load_tokenizer(const std::string& file, const std::string& model_dir);

void add_served_model_options(CLI::App& app, ServedModelArgs* a) {
  auto* model = app.add_option("--model", a->model, "Model directory (default: the embedded NemotronH-style model)")
                    ->capture_default_str();
  app.add_option("--preset", a->preset,
                 "Random weights at a published shape, for benchmarks (no tokenizer: token-id prompts): " +
                     bench::preset_names())
      ->excludes(model);
  app.add_option("--weights-seed", a->seed, "Seed of a --preset's random weights")->capture_default_str();
  app.add_option("--device", a->device, "cpu or cuda")->capture_default_str();
  app.add_option("--spec", a->spec, "Speculative decoding for every request: ngram:T or draft:DIR:T");
  app.add_option("--max-running", a->max_running, "Requests the engine batches at once")->capture_default_str();
  app.add_option("--max-batch-tokens", a->max_batch_tokens, "Rows of one engine step")->capture_default_str();
  app.add_option("--prefill-chunk", a->prefill_chunk, "Prompt tokens per request per step")->capture_default_str();
  app.add_flag("--no-prefix-cache", a->no_prefix_cache, "Compute every prompt whole (no reuse across requests)");
  app.add_option("--prefix-cache-bytes", a->prefix_cache_bytes,
                 "Bytes (state + K/V) the prefix cache may hold alone (0: no cap of its own; --state-budget "
                 "still applies)")
      ->capture_default_str()
      ->check(non_negative());
  app.add_option("--prefix-replay-limit", a->prefix_replay_limit,
                 "Most log entries a prefix-cache hit replays (a checkpoint kept per this many tokens)")
      ->capture_default_str();
  add_state_options(app, &a->state);
}

Status parse_spec_arg(const std::string& text, RequestParams::Spec* kind, int64_t* tokens, std::string* dir) {
  auto bad = [&] { return invalid_argument("--spec: '" + text + "' (expected ngram:T or draft:DIR:T)"); };
  const size_t last = text.rfind(':');
  if (last == std::string::npos) return bad();
  try {
    size_t used = 0;
    *tokens = std::stoll(text.substr(last + 1), &used);
    if (used != text.size() - last - 1) return bad();
  } catch (...) {
    return bad();
  }
  if (*tokens < 1 || *tokens > 64) return invalid_argument("--spec: draft length must be in [1, 64]");
  if (text.compare(0, 6, "ngram:") == 0 && last == 5) {
    *kind = RequestParams::kNgram;
    return {};
  }
  if (text.compare(0, 6, "draft:") == 0 && last > 6) {
    *kind = RequestParams::kDraft;
    *dir = text.substr(6, last - 6);
    return {};
  }
  return bad();
}

Status check_served_model_args(const ServedModelArgs& a) {
  RSSM_RETURN_IF_ERROR(check_device(a.device));
  auto positive = [](int64_t v, const char* name) -> Status {
    if (v < 1) return invalid_argument(std::string(name) + ": must be >= 1, got " + std::to_string(v));
    return {};
  };
  RSSM_RETURN_IF_ERROR(positive(a.max_running, "--max-running"));
  RSSM_RETURN_IF_ERROR(positive(a.max_batch_tokens, "--max-batch-tokens"));
  RSSM_RETURN_IF_ERROR(positive(a.prefill_chunk, "--prefill-chunk"));
  RSSM_RETURN_IF_ERROR(positive(a.prefix_replay_limit, "--prefix-replay-limit"));
  if (!a.spec.empty()) {
    RequestParams::Spec kind;
    int64_t tokens = 0;
    std::string dir;
    RSSM_RETURN_IF_ERROR(parse_spec_arg(a.spec, &kind, &tokens, &dir));
  }
  RSSM_RETURN_IF_ERROR(state_options(a.state, a.device).status());
  return {};
}

Result<std::unique_ptr<ServedModel>> load_served_model(const ServedModelArgs& a) {
  RSSM_RETURN_IF_ERROR(check_served_model_args(a));
  auto m = std::make_unique<ServedModel>();
  std::string draft_dir;
  if (!a.spec.empty()) RSSM_RETURN_IF_ERROR(parse_spec_arg(a.spec, &m->spec, &m->spec_tokens, &draft_dir));
  RSSM_ASSIGN_OR_RETURN(StateOptions sopt, state_options(a.state, a.device));
  if (!a.preset.empty()) {
    // Published shapes, random weights, no tokenizer.
    RSSM_ASSIGN_OR_RETURN(ModelConfig cfg, bench::preset_config(a.preset));
    // A device that fills matrices itself gets none on the host (an 8B
    // preset's would be 32 GB of fp32 made on the CPU).
    if (device_fills_matrices(a.device)) {
      RSSM_ASSIGN_OR_RETURN(m->model, Model::random_without_matrices(cfg, a.seed));
    } else {
      RSSM_ASSIGN_OR_RETURN(m->model, Model::random(cfg, a.seed));
    }
    m->source = a.preset;
  } else {
    RSSM_ASSIGN_OR_RETURN(m->model, Model::load(a.model));
    RSSM_ASSIGN_OR_RETURN(Tokenizer tok, load_tokenizer("", a.model));
    m->tokenizer.emplace(std::move(tok));
    m->source = a.model;
  }
  RSSM_ASSIGN_OR_RETURN(m->backend, make_backend(a.device, *m->model, a.seed));
  if (m->spec == RequestParams::kDraft) {
    RSSM_ASSIGN_OR_RETURN(m->draft_model, Model::load(draft_dir));
    RSSM_ASSIGN_OR_RETURN(m->draft_backend, make_backend(a.device, *m->draft_model));
  }
  EngineOptions eo;
  eo.state = sopt;
  eo.max_running = a.max_running;
  eo.max_batch_tokens = a.max_batch_tokens;
  eo.prefill_chunk = a.prefill_chunk;
  eo.draft = m->draft_backend.get();
  eo.prefix_cache.enabled = !a.no_prefix_cache;
  eo.prefix_cache.max_bytes = a.prefix_cache_bytes;
  eo.prefix_cache.replay_limit = a.prefix_replay_limit;
  RSSM_ASSIGN_OR_RETURN(m->engine, Engine::create(*m->backend, eo));
  return m;
}

}  // namespace replayssm::cli
