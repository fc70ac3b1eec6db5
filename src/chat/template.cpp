// Template (see template.h): lexer, parser and evaluator put together.
#include "chat/template.h"

#include "chat/jinja_ast.h"
#include "chat/jinja_eval.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_parser.h"
#include "chat/jinja_value.h"

namespace replayssm::chat {

Result<Template> Template::parse(std::string_view source, const std::string& name) {
  RSSM_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(source, name));
  RSSM_ASSIGN_OR_RETURN(ast::Body body, parse_tokens(tokens, name));
  Template t;
  t.name_ = name;
  t.body_ = std::make_shared<const ast::Body>(std::move(body));
  return t;
}

template <typename Json>
Result<std::string> Template::render_json(const Json& context, const RenderLimits& limits) const {
  if (!context.is_object() && !context.is_null())
    return invalid_argument(name_ + ": the render context must be a JSON object, not " +
                            std::string(context.type_name()));
  auto converted = value_from_json(context, limits.max_value_depth);
  if (!converted.ok()) {
    const std::string& m = converted.status().message();
    const bool has_path = m[0] == '.' || m[0] == '[';
    return Status(converted.status().code(), name_ + ": context" + (has_path ? "" : ": ") + m);
  }
  Evaluator ev(name_, limits);
  return ev.render(*body_, *converted);
}

Result<std::string> Template::render(const nlohmann::json& context, const RenderLimits& limits) const {
  return render_json(context, limits);
}

Result<std::string> Template::render(const nlohmann::ordered_json& context, const RenderLimits& limits) const {
  return render_json(context, limits);
}

}  // namespace replayssm::chat
