// Jinja's expression parser: a recursive-descent transcription of jinja2's
// Parser methods for expressions, so precedence and the odd corners agree
// with Python: `~` binds tighter than `+`, `**` is left-associative, filters
// and tests bind tighter than unary minus's operand (`-x|abs` is
// `(-x)|abs`), `a if c` without else yields Undefined. Each expression's
// height is bounded, and so is the recursion that builds it, so neither
// parsing nor evaluating it can exhaust the stack.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_token_stream.h"

namespace replayssm::chat {

// Most levels one expression may have ((((x))), a + b + ... + z).
inline constexpr int kMaxExpressionHeight = 256;

class ExprParser : public TokenStream {
 public:
  using TokenStream::TokenStream;

  // jinja2's parse_tuple: expressions separated by commas form a tuple. It
  // ends at '}}', '%}', ')' or the name 'in' ... where no more expression
  // can start.
  Result<ast::ExprPtr> parse_tuple(bool with_condexpr, bool explicit_parens);
  Result<ast::ExprPtr> parse_expression(bool with_condexpr);
  Result<std::vector<ast::Arg>> parse_args();
  // `| name(args) | name2 ...` applied to `node` (null: a block's output).
  // `first_has_pipe` false: {% filter upper | trim %}, whose first filter
  // has no '|' before it.
  Result<ast::ExprPtr> parse_filter_chain(ast::ExprPtr node, bool first_has_pipe = true);

 protected:
  // Sets `e`'s height from its children and bounds it.
  Status seal(ast::Expr* e, std::initializer_list<const ast::Expr*> children);
  Status seal_args(ast::Expr* e, const std::vector<ast::Arg>& args);
  Status check_height(const ast::Expr* e) const;
  bool tuple_end() const;
  // Counts recursion into nested expressions ("(((x)))", "not not x",
  // "- - x"): height is only known once a subtree is built, and the stack
  // must not run out before then.
  struct Nest {
    explicit Nest(ExprParser& parser) : p(parser) { ++p.nest_; }
    ~Nest() { --p.nest_; }
    ExprParser& p;
  };
  Status check_nest() const;
  Result<ast::ExprPtr> parse_condexpr();
  Result<ast::ExprPtr> binary(ast::BinaryOp op, const Token& at, ast::ExprPtr lhs, ast::ExprPtr rhs);
  Result<ast::ExprPtr> parse_or();
  Result<ast::ExprPtr> parse_and();
  Result<ast::ExprPtr> parse_not();
  Result<ast::ExprPtr> parse_compare();
  Result<ast::ExprPtr> parse_math1();
  Result<ast::ExprPtr> parse_concat();
  Result<ast::ExprPtr> parse_math2();
  Result<ast::ExprPtr> parse_pow();
  Result<ast::ExprPtr> parse_unary(bool with_filter);
  Result<ast::ExprPtr> parse_primary();
  Result<ast::ExprPtr> parse_list();
  Result<ast::ExprPtr> parse_dict();
  Result<ast::ExprPtr> parse_postfix(ast::ExprPtr node);
  Result<ast::ExprPtr> parse_filter_expr(ast::ExprPtr node);
  Result<ast::ExprPtr> parse_subscript(ast::ExprPtr node);
  Result<ast::ExprPtr> parse_call(ast::ExprPtr callee);
  Result<ast::ExprPtr> parse_test(ast::ExprPtr node);

  int nest_ = 0;  // active parse_expression / unary recursion
};

}  // namespace replayssm::chat
