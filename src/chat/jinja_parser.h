// Jinja's parser: tokens to a syntax tree.
//
// The statements ({% for %}, {% if %}, {% set %}, {% macro %}, ...) follow
// jinja2's Parser; expressions are chat/jinja_expr_parser.h's. As in
// jinja2, the iterable of a for loop takes no conditional expression (its
// `if` filters items). Tags that chat templates never need (extends, block,
// include, import, do) are refused with an error naming the tag. Blocks
// nest at most kMaxBlockNesting deep and expressions are bounded in height,
// so a hostile template cannot exhaust the stack here or in the evaluator.
#pragma once

#include <string>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"
#include "replayssm/status.h"

namespace replayssm::chat {

// Most nested blocks ({% for %} in {% if %} in ...) a template may have.
inline constexpr int kMaxBlockNesting = 64;

// Parses the output of tokenize(). Errors read "<name>:<line>:<col>: <what>".
Result<ast::Body> parse_tokens(const std::vector<Token>& tokens, const std::string& name);

}  // namespace replayssm::chat
