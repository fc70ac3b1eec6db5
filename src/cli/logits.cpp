// `replayssm logits`: one row of logits per prompt position, as JSON. The
// prefill path runs the prompt in steps of as many tokens as the backend takes; the decode path feeds it one
// token per step — the two must agree, which is what the parity tests check.
#include <cstdio>
#include <string>
#include <vector>

#include "replayssm/make_backend.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "replayssm/model.h"
#include "workloads/session.h"

namespace replayssm::cli {

namespace {

struct LogitsArgs {
  std::string model, prompt_ids, path = "prefill", device = "cpu";
  StateArgs state;
};

Status run_logits(const LogitsArgs& a) {
  RSSM_RETURN_IF_ERROR(check_device(a.device));
  if (a.path != "prefill" && a.path != "decode")
    return invalid_argument("--path: '" + a.path + "' (expected prefill or decode)");
  RSSM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, parse_ids(a.prompt_ids, "--prompt-ids"));
  RSSM_ASSIGN_OR_RETURN(StateOptions sopt, state_options(a.state, a.device));
  RSSM_ASSIGN_OR_RETURN(auto model, Model::load(a.model));
  const int64_t V = model->config().vocab_size, n = static_cast<int64_t>(ids.size());
  for (int32_t t : ids)
    if (t >= V)
      return invalid_argument("--prompt-ids: token id " + std::to_string(t) + " >= vocab size " +
                              std::to_string(V));
  std::vector<float> logits, row;
  RSSM_ASSIGN_OR_RETURN(auto backend, make_backend(a.device, *model));
  RSSM_ASSIGN_OR_RETURN(auto session, Session::create(*backend, sopt));
  const int64_t seq = session->state().add_sequence();
  if (a.path == "prefill") {  // in chunks of what the backend takes a step
    const int64_t chunk = backend->max_step_rows();
    for (int64_t at = 0; at < n; at += chunk) {
      const StepInput in{seq, std::span<const int32_t>(ids).subspan(size_t(at), size_t(std::min(chunk, n - at))), true,
                         StepInput::kAll};
      RSSM_RETURN_IF_ERROR(session->step({&in, 1}, &row));
      logits.insert(logits.end(), row.begin(), row.end());
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const StepInput in{seq, {&ids[i], 1}};
      RSSM_RETURN_IF_ERROR(session->step({&in, 1}, &row));
      logits.insert(logits.end(), row.begin(), row.end());
    }
  }
  // Everything is computed before the first byte is printed: no partial output.
  std::string out = "{\"logits\": [";
  out.reserve(static_cast<size_t>(n * V * 14 + 32));
  for (int64_t i = 0; i < n; ++i) {
    out += i ? ", [" : "[";
    for (int64_t j = 0; j < V; ++j) {
      if (j) out += ", ";
      out += float_json(logits[i * V + j]);
    }
    out += "]";
  }
  out += "]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return {};
}

}  // namespace

Runner add_logits(CLI::App& app) {
  auto a = std::make_shared<LogitsArgs>();
  app.add_option("--model", a->model, "Model directory")->required();
  app.add_option("--prompt-ids", a->prompt_ids, "Comma-separated token ids, e.g. 3,17,5")->required();
  app.add_option("--path", a->path, "prefill (one step) or decode (one token per step)")->capture_default_str();
  app.add_option("--device", a->device, "Device: cpu or cuda (cuda: bf16 weights)")->capture_default_str();
  add_state_options(app, &a->state);
  return [a] { return run_logits(*a); };
}

}  // namespace replayssm::cli
