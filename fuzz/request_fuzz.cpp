// Fuzzes replayssm serve's request checks. The input is a POST body, parsed
// as the server parses it and taken both ways: as /v1/completions
// (parse_completion: a text prompt tokenized, token ids decoded) and as
// /v1/chat/completions (parse_chat_request: the messages rendered by the
// embedded model's chat template, then tokenized). The checked messages are
// also rendered by the richer test templates (tools, tool calls, reasoning,
// loop.previtem) so that the evaluator meets hostile contexts, and every
// error becomes the JSON body a client would get. Both routes are taken once
// more as a --preset server takes them: no tokenizer, no template.
//
// Refusals are expected; a finding is an exception (the server would answer
// 500), a sanitizer report, a hang, or an accepted request that breaks what
// the engine relies on (prompt ids inside the vocabulary, lengths within the
// limits).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "replayssm/model_config.h"
#include "serve/chat_template.h"
#include "serve/openai.h"

namespace replayssm::serve {
namespace {

struct Fixture {
  Tokenizer tokenizer;
  ModelConfig config;
  ChatTemplate chat;                 // the served model's
  std::vector<ChatTemplate> others;  // tests/data/chat_templates
};
const Fixture* fixture = nullptr;

void check_accepted(const ApiRequest& r, const ApiContext& ctx) {
  if (r.prompts.empty() || r.prompts.size() != r.prompt_texts.size()) std::abort();
  for (const RequestParams& p : r.prompts) {
    if (p.prompt.empty() || static_cast<int64_t>(p.prompt.size()) > ctx.limits.max_prompt_tokens) std::abort();
    for (int32_t id : p.prompt)
      if (id < 0 || id >= ctx.vocab_size) std::abort();
    if (p.max_new_tokens < 1 || p.max_new_tokens > ctx.limits.max_tokens) std::abort();
  }
  if (r.n < 1 || r.n > ctx.limits.max_n) std::abort();
}

void take(const std::optional<ApiError>& e, const ApiRequest& r, const ApiContext& ctx) {
  if (e) (void)error_body(*e);  // what send_error writes
  else check_accepted(r, ctx);
}

}  // namespace
}  // namespace replayssm::serve

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace replayssm;
  using namespace replayssm::fuzz;
  const std::string model = "models/nemotron_h_small";
  Tokenizer tok = value_or_die(Tokenizer::load(source_path(model + "/tokenizer.json")));
  ModelConfig cfg = value_or_die(load_model_config(source_path(model)));
  const std::string chat_file = model + "/chat_template.jinja";
  serve::ChatTemplate chat =
      value_or_die(serve::ChatTemplate::from_text(read_source_file(chat_file), chat_file, "", "<|endoftext|>"));
  std::vector<serve::ChatTemplate> others;
  for (const char* name : {"qwen3_style", "qwen35_style", "llama3_style", "mistral_style", "nemotron_h_style",
                           "edge_cases"}) {
    const std::string file = std::string("tests/data/chat_templates/") + name + ".jinja";
    others.push_back(value_or_die(serve::ChatTemplate::from_text(read_source_file(file), file, "<s>", "</s>")));
  }
  serve::fixture = new serve::Fixture{std::move(tok), std::move(cfg), std::move(chat), std::move(others)};
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace replayssm::serve;
  const Fixture& f = *fixture;
  Json body;
  if (auto e = parse_body(std::string(reinterpret_cast<const char*>(data), size), &body)) {
    (void)error_body(*e);
    return 0;
  }
  const ApiContext ctx{"replayssm", &f.tokenizer, f.config.vocab_size, Limits{}};
  ApiRequest r;
  take(parse_completion(body, ctx, &r), r, ctx);
  take(parse_chat_request(body, ctx, &f.chat, &r), r, ctx);
  const ApiContext preset{"replayssm", nullptr, f.config.vocab_size, Limits{}};
  take(parse_completion(body, preset, &r), r, preset);
  take(parse_chat_request(body, preset, nullptr, &r), r, preset);
  ChatInput in;
  if (!parse_chat_input(body, &in))
    for (const ChatTemplate& t : f.others) (void)t.render(in);
  return 0;
}
