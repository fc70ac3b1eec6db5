// Continuous batching on the GPU with replayssm's EngineCuda: a handful of
// text prompts submitted at different times into fewer slots than
// prompts, each request's tokens streamed through its callback as they
// are chosen, then every answer printed whole.
//
// Usage: replayssm_serve_example [MODEL_DIR] [replay|snapshot|recompute]
//        (default models/nemotron_h_small, replay; needs a CUDA device)
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "io/tokenizer.h"
#include "replayssm/model.h"
#include "backend/cuda/device_model.h"
#include "runtime/cuda/engine_cuda.h"

using namespace replayssm;

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "models/nemotron_h_small";
  const std::string strategy = argc > 2 ? argv[2] : "replay";
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  };
  auto model = Model::load(dir);
  if (!model.ok()) return fail(model.status());
  auto tok = Tokenizer::load(dir + "/tokenizer.json");
  if (!tok.ok()) return fail(tok.status());
  auto dm = cuda::DeviceModel::create(**model);
  if (!dm.ok()) return fail(dm.status());
  cuda::EngineCudaOptions o;
  o.strategy = strategy == "snapshot"    ? cuda::DecodeStrategy::kStandard
               : strategy == "recompute" ? cuda::DecodeStrategy::kRecompute
                                         : cuda::DecodeStrategy::kReplay;
  o.slots = 2, o.max_context = 256, o.prefill_chunk = 8;
  auto engine = cuda::EngineCuda::create(**dm, o);
  if (!engine.ok()) return fail(engine.status());

  const std::vector<std::string> prompts = {"The Python standard library", "def fibonacci(n):",
                                            "A hybrid model interleaves", "import numpy as np"};
  std::map<int64_t, std::string> text;
  auto submit = [&](const std::string& p, float temperature) -> Status {
    RequestParams r;
    RSSM_ASSIGN_OR_RETURN(r.prompt, tok->encode(p));
    r.max_new_tokens = 24, r.sampling.temperature = temperature, r.sampling.seed = 1;
    RSSM_ASSIGN_OR_RETURN(const int64_t id, (*engine)->submit(std::move(r), [&](const TokenEvent& e) {
      if (e.token >= 0) std::printf("  request %lld: token %d\n", (long long)e.request, e.token);
      if (e.finished) std::printf("  request %lld: finished%s\n", (long long)e.request, e.error.ok() ? "" : " (error)");
    }));
    text[id] = p;
    return {};
  };
  // Two requests now, two more once decoding is under way: they wait for a slot.
  for (int i = 0; i < 2; ++i)
    if (Status s = submit(prompts[size_t(i)], 0.0f); !s.ok()) return fail(s);
  for (int i = 0; i < 4; ++i)
    if (Status s = (*engine)->step(); !s.ok()) return fail(s);
  for (int i = 2; i < 4; ++i)
    if (Status s = submit(prompts[size_t(i)], 0.8f); !s.ok()) return fail(s);
  if (Status s = (*engine)->run(); !s.ok()) return fail(s);

  for (const auto& [id, prompt] : text) {
    auto out = (*engine)->output(id);
    auto words = tok->decode(*out);
    std::printf("\n[%lld] %s|%s\n", (long long)id, prompt.c_str(), words.ok() ? words->c_str() : "?");
  }
  const EngineStats& st = (*engine)->stats();
  std::printf("\n%lld steps, %lld prompt and %lld decode tokens, %lld running at most, %lld waiting at most\n",
              (long long)st.steps, (long long)st.prefill_tokens, (long long)st.decode_tokens, (long long)st.max_running,
              (long long)st.max_waiting);
  return 0;
}
