// Jinja's parser: tokens to a syntax tree.
//
// A recursive-descent transcription of jinja2's Parser, so precedence and
// the odd corners agree with Python: `~` binds tighter than `+`, `**` is
// left-associative, filters and tests bind tighter than unary minus's
// operand (`-x|abs` is `(-x)|abs`), `a if c` without else yields Undefined,
// and the iterable of a for loop takes no conditional expression (its `if`
// filters items). Tags that chat templates never need (extends, block,
// include, import, do) are refused with an error naming the tag. Nesting is
// bounded (blocks, and expression height) so a hostile template cannot
// exhaust the stack here or in the evaluator.
#pragma once

#include <string>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"
#include "replayssm/status.h"

namespace replayssm::chat {

// Most nested blocks ({% for %} in {% if %} in ...) a template may have.
inline constexpr int kMaxBlockNesting = 64;
// Most levels one expression may have ((((x))), a + b + ... + z).
inline constexpr int kMaxExpressionHeight = 256;

// Parses the output of tokenize(). Errors read "<name>:<line>:<col>: <what>".
Result<ast::Body> parse_tokens(const std::vector<Token>& tokens, const std::string& name);

}  // namespace replayssm::chat
