// A Hugging Face chat template: parse once, render per request.
//
// transformers renders a model's chat_template with jinja2's
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
// extensions=[loopcontrols]), its own tojson filter, and the globals
// raise_exception(msg) and strftime_now(format). Template reproduces that
// environment, so a prompt rendered here is the one transformers would
// tokenise: Python's str() and repr() for printing, json.dumps for tojson,
// Python's arithmetic and string methods, jinja2's scoping and Undefined.
// docs/chat_templates.md maps the layers (lexer, parser, values, evaluator,
// builtins) and lists where @huggingface/jinja differs.
//
// Thread safety: a parsed Template is immutable; render() may run on many
// threads at once. Copies share the parsed tree.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/render_limits.h"
#include "replayssm/status.h"

namespace replayssm::chat {

namespace ast {
struct Stmt;
}

class Template {
 public:
  // Parses `source`. Errors read "<name>:<line>:<col>: <what>": an unclosed
  // tag or block, a syntax error, an unknown tag, filter or test.
  static Result<Template> parse(std::string_view source, const std::string& name);

  // Renders with `context`, a JSON object whose entries become variables
  // (messages, tools, add_generation_prompt, bos_token, eos_token, and any
  // chat_template_kwargs). raise_exception() in the template and evaluation
  // errors come back as a Status whose message starts
  // "<name>:<line>:<col>: "; exceeding `limits` is kOutOfBudget.
  //
  // Key order matters to tojson: nlohmann::json keeps object keys sorted,
  // nlohmann::ordered_json keeps them as given (as Python's dict does), so
  // pass ordered_json to reproduce a request's tool schemas byte for byte.
  Result<std::string> render(const nlohmann::json& context, const RenderLimits& limits = {}) const;
  Result<std::string> render(const nlohmann::ordered_json& context, const RenderLimits& limits = {}) const;

  const std::string& name() const { return name_; }

 private:
  template <typename Json>
  Result<std::string> render_json(const Json& context, const RenderLimits& limits) const;

  std::string name_;
  std::shared_ptr<const std::vector<std::unique_ptr<ast::Stmt>>> body_;
};

}  // namespace replayssm::chat
