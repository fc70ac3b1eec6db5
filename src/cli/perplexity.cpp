// `replayssm perplexity`: mean negative log-likelihood of a text file under a
// model. The file is tokenized with the model's tokenizer.json and cut into
// non-overlapping windows of --context tokens, each scored from an empty
// state: token t is predicted from the tokens before it in its window. This
// is what tools/train_tiny.py reports, so the numbers can be checked.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "replayssm/make_backend.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "ops/cpu/sampling.h"
#include "workloads/session.h"
#include "io/read_file.h"
#include "io/tokenizer.h"

namespace replayssm::cli {

Result<Tokenizer> load_tokenizer(const std::string& file, const std::string& model_dir);

namespace {

struct PplArgs {
  std::string model, file;
  int64_t context = 256;
  bool json = false;
  std::string device = "cpu";
};

Status run_perplexity(const PplArgs& a) {
  if (a.context < 2) return invalid_argument("--context: must be >= 2");
  RSSM_RETURN_IF_ERROR(check_device(a.device));
  RSSM_ASSIGN_OR_RETURN(const std::string text, read_whole_file(a.file));
  RSSM_ASSIGN_OR_RETURN(Tokenizer tok, load_tokenizer("", a.model));
  RSSM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.encode(text));
  RSSM_ASSIGN_OR_RETURN(auto model, Model::load(a.model));
  const int64_t V = model->config().vocab_size;
  if (tok.vocab_size() > V)
    return invalid_argument(a.model + ": tokenizer has " + std::to_string(tok.vocab_size()) +
                            " tokens, the model's vocabulary " + std::to_string(V));
  // The windows, each scored from an empty state.
  std::vector<std::vector<int32_t>> windows;
  for (size_t s = 0; s + 1 < ids.size(); s += static_cast<size_t>(a.context)) {
    const size_t len = std::min(ids.size() - s, static_cast<size_t>(a.context));
    if (len < 2) break;
    windows.emplace_back(ids.begin() + static_cast<int64_t>(s), ids.begin() + static_cast<int64_t>(s + len));
  }
  double nll = 0.0;
  int64_t n = 0;
  // Windows are independent: several are scored in one step, each in
  // chunks where it is longer than a step takes. A step's rows are capped
  // by the backend and by 256 MiB of logits.
  RSSM_ASSIGN_OR_RETURN(auto backend, make_backend(a.device, *model));
  RSSM_ASSIGN_OR_RETURN(auto session, Session::create(*backend, StateOptions{}));
  const int64_t cap = std::clamp<int64_t>((int64_t{256} << 20) / (V * 4), 1, backend->max_step_rows());
  struct Open {
    size_t w;
    int64_t seq, fed = 0;
  };
  std::vector<Open> open;
  size_t next = 0;
  std::vector<float> logits;
  while (next < windows.size() || !open.empty()) {
    int64_t rows = 0;
    while (rows < cap && next < windows.size() && int64_t(open.size()) < cap)
      open.push_back({next++, session->state().add_sequence()}), rows += int64_t(windows[open.back().w].size());
    std::vector<StepInput> steps;
    std::vector<size_t> which;
    rows = 0;
    for (size_t k = 0; k < open.size() && rows < cap; ++k) {
      const std::vector<int32_t>& w = windows[open[k].w];
      const int64_t take = std::min(int64_t(w.size()) - open[k].fed, cap - rows);
      steps.push_back({open[k].seq, std::span<const int32_t>(w).subspan(size_t(open[k].fed), size_t(take)), true,
                       StepInput::kAll});
      which.push_back(k), rows += take;
    }
    RSSM_RETURN_IF_ERROR(session->step(steps, &logits));
    size_t row = 0;
    for (size_t j = 0; j < steps.size(); ++j) {
      Open& o = open[which[j]];
      const std::vector<int32_t>& w = windows[o.w];
      for (size_t i = 0; i < steps[j].tokens.size(); ++i, ++row) {
        const size_t t = size_t(o.fed) + i;  // predicts w[t + 1]
        if (t + 1 < w.size())
          nll -= ops::cpu::log_prob(std::span<const float>(logits).subspan(row * size_t(V), size_t(V)), w[t + 1]);
      }
      o.fed += int64_t(steps[j].tokens.size());
    }
    for (size_t k = open.size(); k-- > 0;)
      if (open[k].fed == int64_t(windows[open[k].w].size())) {
        n += int64_t(windows[open[k].w].size()) - 1;
        RSSM_RETURN_IF_ERROR(session->release(open[k].seq));
        open.erase(open.begin() + int64_t(k));
      }
  }
  if (n == 0) return invalid_argument(a.file + ": fewer than two tokens to score");
  const double mean = nll / static_cast<double>(n);
  if (a.json)
    std::printf("{\"tokens\": %lld, \"mean_nll\": %.6f, \"perplexity\": %.4f}\n", (long long)n, mean, std::exp(mean));
  else
    std::printf("%lld tokens scored; mean NLL %.4f nats; perplexity %.3f\n", (long long)n, mean, std::exp(mean));
  return {};
}

}  // namespace

Runner add_perplexity(CLI::App& app) {
  auto a = std::make_shared<PplArgs>();
  app.add_option("--model", a->model, "Model directory (with tokenizer.json)")->required();
  app.add_option("--file", a->file, "UTF-8 text file")->required();
  app.add_option("--context", a->context, "Window length in tokens")->capture_default_str();
  app.add_option("--device", a->device, "cpu or cuda (cuda: bf16 weights)")
      ->capture_default_str();
  app.add_flag("--json", a->json, "Print one JSON object");
  return [a] { return run_perplexity(*a); };
}

}  // namespace replayssm::cli
