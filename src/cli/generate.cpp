// `replayssm generate`: tokens after a prompt, greedy by default.
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "replayssm/make_backend.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "workloads/beam_search.h"
#include "workloads/generate.h"
#include "io/tokenizer.h"

namespace replayssm::cli {

Result<Tokenizer> load_tokenizer(const std::string& file, const std::string& model_dir);
std::string json_string(const std::string& s);

namespace {

struct GenerateArgs {
  std::string model = REPLAYSSM_DEFAULT_MODEL, prompt_ids, prompt, device = "cpu";
  int64_t max_new_tokens = 16;
  float temperature = 0.0f, top_p = 1.0f;
  uint64_t seed = 0;
  bool json = false, ignore_eos = false;
  std::string spec;
  std::optional<int64_t> beam, n;  // given (0 is refused), or not
  double length_penalty = 1.0;
  StateArgs state;
};

// "ngram:T" or "draft:DIR:T" (DIR may itself contain ':').
Status parse_spec(const std::string& text, SpecOptions* spec, std::string* draft_dir) {
  auto bad = [&] { return invalid_argument("--spec: '" + text + "' (expected ngram:T or draft:DIR:T)"); };
  const size_t last = text.rfind(':');
  if (last == std::string::npos) return bad();
  const std::string kind = text.substr(0, text.find(':'));
  size_t used = 0;
  long long t = 0;
  try {
    t = std::stoll(text.substr(last + 1), &used);
  } catch (...) {
    return bad();
  }
  if (used != text.size() - last - 1 || t < 1 || t > 64)
    return invalid_argument("--spec: draft length '" + text.substr(last + 1) + "' must be in [1, 64]");
  spec->tokens = t;
  if (kind == "ngram" && last == 5) {
    spec->kind = SpecOptions::kNgram;
    return {};
  }
  if (kind == "draft" && last > 6) {
    spec->kind = SpecOptions::kDraft;
    *draft_dir = text.substr(6, last - 6);
    return {};
  }
  return bad();
}

std::string token_list(const std::vector<int32_t>& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.size(); ++i) s += (i ? ", " : "") + std::to_string(t[i]);
  return s + "]";
}

std::string store_stats_json(const StateStats& st) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "\"state_bytes_peak\": %lld, \"kv_bytes_peak\": %lld, \"state_writes_bytes\": %lld, "
                "\"replayed_tokens\": %lld, \"restores\": {\"checkpoint\": %lld, \"log_replay\": %lld, "
                "\"reprefill\": %lld}, \"evictions\": %lld",
                (long long)st.state_bytes_peak, (long long)st.kv_bytes_peak, (long long)st.state_writes_bytes,
                (long long)st.replayed_tokens, (long long)st.restores_checkpoint,
                (long long)st.restores_log_replay, (long long)st.restores_reprefill, (long long)st.evictions);
  return buf;
}

// Beam search or best-of-n: every sequence with its score; tokens = the best.
Status run_search(const GenerateArgs& a, const Model& model, const std::vector<int32_t>& ids,
                  const StateOptions& sopt, const std::optional<Tokenizer>& tok) {
  std::vector<Hypothesis> hyps;
  SearchStats stats;
  BeamOptions bo;
  bo.width = a.beam.value_or(0);
  bo.max_new_tokens = a.max_new_tokens;
  bo.length_penalty = a.length_penalty;
  bo.stop_at_eos = !a.ignore_eos;
  bo.state = sopt;
  BestOfNOptions no;
  no.n = a.n.value_or(0);
  no.max_new_tokens = a.max_new_tokens;
  no.sampling = {a.temperature, a.top_p, a.seed};
  no.stop_at_eos = !a.ignore_eos;
  no.state = sopt;
  RSSM_ASSIGN_OR_RETURN(auto backend, make_backend(a.device, model));
  if (a.beam) {
    RSSM_ASSIGN_OR_RETURN(hyps, beam_search(*backend, ids, bo, &stats));
  } else {
    RSSM_ASSIGN_OR_RETURN(hyps, best_of_n(*backend, ids, no, &stats));
  }
  size_t best = 0;
  for (size_t i = 1; i < hyps.size(); ++i)
    if (hyps[i].score > hyps[best].score) best = i;
  if (!a.json) {
    // Every line first: a sequence the tokenizer cannot decode fails the
    // command before anything is printed.
    std::string out;
    for (const Hypothesis& h : hyps) {
      char sc[32];
      std::snprintf(sc, sizeof sc, "%.4f\t", h.score);
      if (tok) {  // with a text prompt, each sequence as text on one line
        RSSM_ASSIGN_OR_RETURN(std::string text, tok->decode(h.tokens));
        for (char& c : text)
          if (c == '\n') c = ' ';
        out += sc + a.prompt + text + "\n";
      } else {
        out += sc + token_list(h.tokens) + "\n";
      }
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return {};
  }
  std::string out = "{\"tokens\": " + (hyps.empty() ? std::string("[]") : token_list(hyps[best].tokens)) +
                    ", \"sequences\": [";
  for (size_t i = 0; i < hyps.size(); ++i) {
    char sc[96];
    std::snprintf(sc, sizeof sc, ", \"score\": %.6f, \"logprob\": %.6f}", hyps[i].score, hyps[i].logprob);
    out += (i ? ", " : "") + std::string("{\"tokens\": ") + token_list(hyps[i].tokens) + sc;
  }
  char head[160];
  std::snprintf(head, sizeof head, "], \"stats\": {\"decode_ms\": %.3f, \"strategy\": \"%s\", \"device\": \"%s\", ",
                stats.decode_s * 1e3, strategy_name(sopt.strategy), a.device.c_str());
  out += head + store_stats_json(stats.state) + "}}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return {};
}

Status run_generate(const GenerateArgs& a) {
  RSSM_RETURN_IF_ERROR(check_device(a.device));
  if (a.max_new_tokens < 0) return invalid_argument("--max-new-tokens: must be >= 0");
  if (!(a.temperature >= 0.0f)) return invalid_argument("--temperature: must be >= 0");
  if (!(a.top_p > 0.0f && a.top_p <= 1.0f)) return invalid_argument("--top-p: must be in (0, 1]");
  if (a.prompt.empty() == a.prompt_ids.empty())
    return invalid_argument("give exactly one of --prompt TEXT and --prompt-ids IDS");
  std::optional<Tokenizer> tok;
  std::vector<int32_t> ids;
  if (!a.prompt.empty()) {
    RSSM_ASSIGN_OR_RETURN(tok, load_tokenizer("", a.model));
    // As transformers' tokenizer(prompt): with the post-processor's special
    // tokens (a BOS where the tokenizer's template puts one).
    RSSM_ASSIGN_OR_RETURN(ids, tok->encode(a.prompt, /*add_special_tokens=*/true));
    if (ids.empty()) return invalid_argument("--prompt: the text has no tokens");
  } else {
    RSSM_ASSIGN_OR_RETURN(ids, parse_ids(a.prompt_ids, "--prompt-ids"));
  }
  RSSM_ASSIGN_OR_RETURN(StateOptions sopt, state_options(a.state, a.device));
  if (bool(a.beam) + bool(a.n) + !a.spec.empty() > 1)
    return invalid_argument("--beam, --n and --spec cannot be combined");
  SpecOptions spec;
  std::string draft_dir;
  if (!a.spec.empty()) RSSM_RETURN_IF_ERROR(parse_spec(a.spec, &spec, &draft_dir));
  RSSM_ASSIGN_OR_RETURN(auto model, Model::load(a.model));
  const int64_t V = model->config().vocab_size;
  for (int32_t t : ids)
    if (t >= V)
      return invalid_argument((tok ? "--prompt: the tokenizer's id " : "--prompt-ids: token id ") +
                              std::to_string(t) + " >= vocab size " + std::to_string(V));
  if (a.beam) RSSM_RETURN_IF_ERROR(check_search_size(*a.beam, V, true, "--beam"));
  if (a.n) RSSM_RETURN_IF_ERROR(check_search_size(*a.n, V, false, "--n"));
  if (a.beam || a.n) return run_search(a, *model, ids, sopt, tok);
  // The draft model runs on the target's device.
  std::unique_ptr<Model> draft;
  std::unique_ptr<Backend> draft_backend;
  if (spec.kind == SpecOptions::kDraft) {
    RSSM_ASSIGN_OR_RETURN(draft, Model::load(draft_dir));
    RSSM_ASSIGN_OR_RETURN(draft_backend, make_backend(a.device, *draft));
    spec.draft = draft_backend.get();
  }
  GenerateOptions opt;
  opt.spec = spec;
  opt.max_new_tokens = a.max_new_tokens;
  opt.sampling = {a.temperature, a.top_p, a.seed};
  opt.stop_at_eos = !a.ignore_eos;
  opt.state = sopt;
  // Plain mode streams ids — or, with --prompt, text — as tokens come;
  // --json prints one object at the end.
  std::function<void(int32_t)> stream;
  std::vector<int32_t> so_far;
  std::string printed;
  Status stream_status;  // a token the tokenizer cannot decode ends the run with its error
  if (!a.json && !tok)
    stream = [](int32_t t) {
      std::printf("%d ", t);
      std::fflush(stdout);
    };
  if (!a.json && tok) {
    std::printf("%s", a.prompt.c_str());
    stream = [&](int32_t t) {
      // Decode everything so far and print what is new; a trailing U+FFFD
      // is a character whose bytes are still arriving, so it waits.
      so_far.push_back(t);
      if (!stream_status.ok()) return;
      auto text = tok->decode(so_far);
      if (!text.ok()) {
        stream_status = text.status();
        return;
      }
      std::string full = std::move(*text);
      if (full.size() >= 3 && full.compare(full.size() - 3, 3, "\xEF\xBF\xBD") == 0) full.resize(full.size() - 3);
      if (full.size() > printed.size() && full.compare(0, printed.size(), printed) == 0) {
        std::fwrite(full.data() + printed.size(), 1, full.size() - printed.size(), stdout);
        std::fflush(stdout);
        printed = std::move(full);
      }
    };
  }
  RSSM_ASSIGN_OR_RETURN(auto backend, make_backend(a.device, *model));
  RSSM_ASSIGN_OR_RETURN(GenerateResult r, generate(*backend, ids, opt, stream));
  RSSM_RETURN_IF_ERROR(stream_status);
  const int64_t n = static_cast<int64_t>(r.tokens.size());
  const int64_t steps = n > 1 ? n - 1 : 0;  // the first token comes from the prefill
  const double tpot = steps ? r.decode_s / steps : 0.0;
  if (!a.json) {
    std::printf("\n");
    std::fflush(stdout);  // the text first, then the stats on stderr
    std::fprintf(stderr, "%lld tokens; prefill %.2f ms; decode %.3f ms/token (%.1f tokens/s)\n",
                 (long long)n, r.prefill_s * 1e3, tpot * 1e3, tpot > 0 ? 1.0 / tpot : 0.0);
    return {};
  }
  std::string out = "{\"tokens\": [";
  for (int64_t i = 0; i < n; ++i) out += (i ? ", " : "") + std::to_string(r.tokens[i]);
  if (tok) {
    RSSM_ASSIGN_OR_RETURN(std::string text, tok->decode(r.tokens));
    out += "], \"text\": " + json_string(text) + ", \"prompt_ids\": [";
    for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  }
  char stats[512];
  std::snprintf(stats, sizeof stats,
                "], \"stats\": {\"prompt_tokens\": %zu, \"new_tokens\": %lld, \"prefill_ms\": %.3f, "
                "\"decode_ms\": %.3f, \"time_per_output_token_ms\": %.4f, \"tokens_per_s\": %.2f, "
                "\"strategy\": \"%s\", \"device\": \"%s\", \"acceptance_rate\": %.4f, \"mean_accepted\": %.4f, "
                "\"rollback_us\": %.1f, ",
                ids.size(), (long long)n, r.prefill_s * 1e3, r.decode_s * 1e3, tpot * 1e3,
                tpot > 0 ? 1.0 / tpot : 0.0, strategy_name(sopt.strategy), a.device.c_str(), r.spec.acceptance_rate(),
                r.spec.mean_accepted(), r.spec.rollback_s * 1e6);
  out += stats + store_stats_json(r.state) + "}}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return {};
}

}  // namespace

Runner add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  app.add_option("--model", a->model, "Model directory (default: the embedded NemotronH-style model)")
      ->capture_default_str();
  app.add_option("--prompt", a->prompt, "Prompt text (needs the model's tokenizer.json); output is text");
  app.add_option("--prompt-ids", a->prompt_ids, "Comma-separated token ids, e.g. 3,17,5");
  app.add_option("--max-new-tokens", a->max_new_tokens, "Tokens to generate")->capture_default_str();
  app.add_option("--temperature", a->temperature, "0 = greedy")->capture_default_str();
  app.add_option("--top-p", a->top_p, "Nucleus sampling mass")->capture_default_str();
  app.add_option("--seed", a->seed, "Sampling seed")->check(non_negative())->capture_default_str();
  app.add_flag("--ignore-eos", a->ignore_eos, "Do not stop at the config's EOS token");
  app.add_flag("--json", a->json, "Print {\"tokens\": [...], \"stats\": {...}}");
  app.add_option("--spec", a->spec, "Speculative decoding: ngram:T (prompt lookup) or draft:DIR:T (draft model)");
  app.add_option("--beam", a->beam, "Beam search of width W, 1-4096 and at most the vocabulary (tokens = the best beam)");
  app.add_option("--length-penalty", a->length_penalty, "Beam score = logprob / length^P")->capture_default_str();
  app.add_option("--n", a->n, "Best-of-n: N samples (1-4096) sharing the prompt (seeds seed..seed+N-1)");
  app.add_option("--device", a->device, "Device: cpu or cuda (the same workloads and store options on either)")->capture_default_str();
  add_state_options(app, &a->state);
  return [a] { return run_generate(*a); };
}

}  // namespace replayssm::cli
