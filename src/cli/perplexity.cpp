// `replayssm perplexity`: mean negative log-likelihood of a text file under a
// model. The file is tokenized with the model's tokenizer.json and cut into
// non-overlapping windows of --context tokens, each scored from an empty
// state: token t is predicted from the tokens before it in its window. This
// is what tools/train_tiny.py reports, so the numbers can be checked.
#include <cmath>
#include <cstdio>
#include <string>

#include "replayssm/make_backend.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "ops/cpu/sampling.h"
#include "workloads/session.h"
#if REPLAYSSM_HAVE_CUDA
#include "runtime/cuda/prompt_logits.h"
#endif
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
  auto score = [&](const std::vector<int32_t>& w, const std::vector<float>& logits) {
    for (size_t t = 0; t + 1 < w.size(); ++t) nll -= ops::cpu::log_prob(std::span<const float>(logits).subspan(t * V, V), w[t + 1]);
    n += static_cast<int64_t>(w.size()) - 1;
  };
  if (a.device == "cuda") {
#if REPLAYSSM_HAVE_CUDA
    // Windows are independent: up to 64 of them decode together as one batch.
    RSSM_ASSIGN_OR_RETURN(auto dm, cuda::DeviceModel::create(*model));
    constexpr size_t kBatch = 64;
    for (size_t i = 0; i < windows.size(); i += kBatch) {
      const std::span<const std::vector<int32_t>> part(windows.data() + i, std::min(kBatch, windows.size() - i));
      RSSM_ASSIGN_OR_RETURN(auto rows, cuda::prompt_logits_cuda(*dm, part, cuda::DecodeStrategy::kReplay, 16));
      for (size_t j = 0; j < part.size(); ++j) score(part[j], rows[j]);
    }
#endif
  } else {
    RSSM_ASSIGN_OR_RETURN(auto backend, make_backend("cpu", *model));
    RSSM_ASSIGN_OR_RETURN(auto session, Session::create(*backend, StateOptions{}));
    std::vector<float> logits;
    for (const std::vector<int32_t>& w : windows) {
      const int64_t seq = session->state().add_sequence();
      const StepInput step{seq, w, true, StepInput::kAll};
      RSSM_RETURN_IF_ERROR(session->step({&step, 1}, &logits));
      score(w, logits);
      RSSM_RETURN_IF_ERROR(session->release(seq));
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
  app.add_option("--device", a->device, "cpu or cuda (cuda: bf16 weights, windows decoded 64 at a time)")
      ->capture_default_str();
  app.add_flag("--json", a->json, "Print one JSON object");
  return [a] { return run_perplexity(*a); };
}

}  // namespace replayssm::cli
