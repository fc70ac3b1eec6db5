// Fuzzes the chat-template engine (src/chat). The input is a template's
// source: lexed and parsed, and when it parses, rendered against a fixed
// chat (a system turn, a tool call and its answer, reasoning, tools,
// add_generation_prompt, bos and eos). A syntax or evaluation error is an
// answer; a finding is a crash, a sanitizer report, an exception, or a
// render that runs past its time or memory.
//
// The work limits are far below RenderLimits' defaults (1,000 loop
// iterations, 100,000 steps, 256 KiB strings), so a template looping or
// recursing forever stops within milliseconds even under the sanitizers,
// and any work the limits do not meter stands out as a timeout.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/template.h"

namespace {

const nlohmann::ordered_json* context = nullptr;

constexpr const char* kContext = R"({
  "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What's the weather in Paris? Answer in °C."},
    {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 18}"},
    {"role": "assistant", "content": "<think>\nIt is mild.\n</think>\n\nIt is 18 °C."},
    {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                            "required": ["city"]}}}],
  "add_generation_prompt": true,
  "enable_thinking": false,
  "bos_token": "<s>",
  "eos_token": "</s>"
})";

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  context = new nlohmann::ordered_json(nlohmann::ordered_json::parse(kContext));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace replayssm::chat;
  auto t = Template::parse(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.jinja");
  if (!t.ok()) return 0;
  RenderLimits limits;
  limits.max_output_bytes = size_t{256} << 10;
  limits.max_loop_iterations = 1'000;
  limits.max_steps = 100'000;
  (void)t->render(*context, limits);
  return 0;
}
