// Jinja's expression parser (see jinja_expr_parser.h). Method names follow
// jinja2's Parser (parse_or, parse_math1, parse_unary, ...) so the two can
// be read side by side.
#include "chat/jinja_expr_parser.h"

#include <algorithm>

#include "chat/jinja_builtins.h"

namespace replayssm::chat {

using namespace ast;

// Sets `e`'s height from its children and bounds it.
Status ExprParser::seal(Expr* e, std::initializer_list<const Expr*> children) {
  for (const Expr* c : children)
    if (c) e->height = std::max(e->height, c->height + 1);
  return check_height(e);
}

Status ExprParser::seal_args(Expr* e, const std::vector<Arg>& args) {
  for (const Arg& a : args) e->height = std::max(e->height, a.value->height + 1);
  return check_height(e);
}

Status ExprParser::check_height(const Expr* e) const {
  if (e->height > kMaxExpressionHeight) {
    Token at;
    at.line = e->line;
    at.col = e->col;
    return error(at, "expression nested more than " + std::to_string(kMaxExpressionHeight) + " levels deep");
  }
  return Status();
}

// jinja2's parse_tuple: expressions separated by commas form a tuple. It
// ends at '}}', '%}', ')' or the name 'in' ... where no more expression
// can start.
Result<ExprPtr> ExprParser::parse_tuple(bool with_condexpr, bool explicit_parens) {
  const Token start = cur();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) RSSM_RETURN_IF_ERROR(expect_op(","));
    if (tuple_end()) break;
    RSSM_ASSIGN_OR_RETURN(ExprPtr e, parse_expression(with_condexpr));
    items.push_back(std::move(e));
    if (is_op(",")) is_tuple = true;
    else break;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) return error(cur(), "expected an expression, got " + describe_token(cur()));
  }
  auto l = make<ListExpr>(start);
  l->tuple = true;
  l->items = std::move(items);
  for (const auto& i : l->items) l->height = std::max(l->height, i->height + 1);
  RSSM_RETURN_IF_ERROR(check_height(l.get()));
  return ExprPtr(std::move(l));
}

bool ExprParser::tuple_end() const {
  const Token& t = cur();
  return t.kind == TokenKind::kVarEnd || t.kind == TokenKind::kBlockEnd || t.kind == TokenKind::kEnd ||
         (t.kind == TokenKind::kOperator && t.text == ")") ||
         (t.kind == TokenKind::kName && (t.text == "in" || t.text == "if" || t.text == "recursive"));
}

Status ExprParser::check_nest() const {
  if (nest_ > kMaxExpressionHeight)
    return error(cur(), "expression nested more than " + std::to_string(kMaxExpressionHeight) + " levels deep");
  return Status();
}

Result<ExprPtr> ExprParser::parse_expression(bool with_condexpr) {
  Nest guard(*this);
  RSSM_RETURN_IF_ERROR(check_nest());
  if (with_condexpr) return parse_condexpr();
  return parse_or();
}

Result<ExprPtr> ExprParser::parse_condexpr() {
  RSSM_ASSIGN_OR_RETURN(ExprPtr expr, parse_or());
  while (is_name("if")) {
    const Token at = cur();
    next();
    auto c = make<Condition>(at);
    c->then = std::move(expr);
    RSSM_ASSIGN_OR_RETURN(c->test, parse_or());
    if (skip_name("else")) {
      RSSM_ASSIGN_OR_RETURN(c->otherwise, parse_condexpr());
    }
    RSSM_RETURN_IF_ERROR(seal(c.get(), {c->then.get(), c->test.get(), c->otherwise.get()}));
    expr = std::move(c);
  }
  return expr;
}

Result<ExprPtr> ExprParser::binary(BinaryOp op, const Token& at, ExprPtr lhs, ExprPtr rhs) {
  auto b = make<Binary>(at);
  b->line = lhs->line;  // errors point at the start of the expression
  b->col = lhs->col;
  b->op = op;
  b->lhs = std::move(lhs);
  b->rhs = std::move(rhs);
  RSSM_RETURN_IF_ERROR(seal(b.get(), {b->lhs.get(), b->rhs.get()}));
  return ExprPtr(std::move(b));
}

Result<ExprPtr> ExprParser::parse_or() {
  RSSM_ASSIGN_OR_RETURN(ExprPtr left, parse_and());
  while (is_name("or")) {
    const Token at = cur();
    next();
    RSSM_ASSIGN_OR_RETURN(ExprPtr right, parse_and());
    RSSM_ASSIGN_OR_RETURN(left, binary(BinaryOp::kOr, at, std::move(left), std::move(right)));
  }
  return left;
}

Result<ExprPtr> ExprParser::parse_and() {
  RSSM_ASSIGN_OR_RETURN(ExprPtr left, parse_not());
  while (is_name("and")) {
    const Token at = cur();
    next();
    RSSM_ASSIGN_OR_RETURN(ExprPtr right, parse_not());
    RSSM_ASSIGN_OR_RETURN(left, binary(BinaryOp::kAnd, at, std::move(left), std::move(right)));
  }
  return left;
}

Result<ExprPtr> ExprParser::parse_not() {
  if (is_name("not")) {
    Nest guard(*this);
    RSSM_RETURN_IF_ERROR(check_nest());
    const Token at = cur();
    next();
    auto u = make<Unary>(at);
    u->op = UnaryOp::kNot;
    RSSM_ASSIGN_OR_RETURN(u->operand, parse_not());
    RSSM_RETURN_IF_ERROR(seal(u.get(), {u->operand.get()}));
    return ExprPtr(std::move(u));
  }
  return parse_compare();
}

Result<ExprPtr> ExprParser::parse_compare() {
  const Token at = cur();
  RSSM_ASSIGN_OR_RETURN(ExprPtr first, parse_math1());
  std::unique_ptr<Compare> c;
  while (true) {
    CompareOp op;
    if (is_op("==")) op = CompareOp::kEq;
    else if (is_op("!=")) op = CompareOp::kNe;
    else if (is_op("<")) op = CompareOp::kLt;
    else if (is_op("<=")) op = CompareOp::kLe;
    else if (is_op(">")) op = CompareOp::kGt;
    else if (is_op(">=")) op = CompareOp::kGe;
    else if (is_name("in")) op = CompareOp::kIn;
    else if (is_name("not") && peek().kind == TokenKind::kName && peek().text == "in") {
      op = CompareOp::kNotIn;
      next();
    } else {
      break;
    }
    next();
    RSSM_ASSIGN_OR_RETURN(ExprPtr rhs, parse_math1());
    if (!c) {
      c = make<Compare>(at);  // `at` is where the first operand starts
      c->first = std::move(first);
      c->height = c->first->height + 1;
    }
    c->height = std::max(c->height, rhs->height + 1);
    c->rest.emplace_back(op, std::move(rhs));
  }
  if (!c) return first;
  RSSM_RETURN_IF_ERROR(check_height(c.get()));
  return ExprPtr(std::move(c));
}

Result<ExprPtr> ExprParser::parse_math1() {
  RSSM_ASSIGN_OR_RETURN(ExprPtr left, parse_concat());
  while (is_op("+") || is_op("-")) {
    const Token at = cur();
    const BinaryOp op = is_op("+") ? BinaryOp::kAdd : BinaryOp::kSub;
    next();
    RSSM_ASSIGN_OR_RETURN(ExprPtr right, parse_concat());
    RSSM_ASSIGN_OR_RETURN(left, binary(op, at, std::move(left), std::move(right)));
  }
  return left;
}

Result<ExprPtr> ExprParser::parse_concat() {
  RSSM_ASSIGN_OR_RETURN(ExprPtr left, parse_math2());
  while (is_op("~")) {
    const Token at = cur();
    next();
    RSSM_ASSIGN_OR_RETURN(ExprPtr right, parse_math2());
    RSSM_ASSIGN_OR_RETURN(left, binary(BinaryOp::kConcat, at, std::move(left), std::move(right)));
  }
  return left;
}

Result<ExprPtr> ExprParser::parse_math2() {
  RSSM_ASSIGN_OR_RETURN(ExprPtr left, parse_pow());
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token at = cur();
    const BinaryOp op = is_op("*")    ? BinaryOp::kMul
                        : is_op("/")  ? BinaryOp::kDiv
                        : is_op("//") ? BinaryOp::kFloorDiv
                                      : BinaryOp::kMod;
    next();
    RSSM_ASSIGN_OR_RETURN(ExprPtr right, parse_pow());
    RSSM_ASSIGN_OR_RETURN(left, binary(op, at, std::move(left), std::move(right)));
  }
  return left;
}

Result<ExprPtr> ExprParser::parse_pow() {
  RSSM_ASSIGN_OR_RETURN(ExprPtr left, parse_unary(true));
  while (is_op("**")) {
    const Token at = cur();
    next();
    RSSM_ASSIGN_OR_RETURN(ExprPtr right, parse_unary(true));
    RSSM_ASSIGN_OR_RETURN(left, binary(BinaryOp::kPow, at, std::move(left), std::move(right)));
  }
  return left;
}

Result<ExprPtr> ExprParser::parse_unary(bool with_filter) {
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    Nest guard(*this);
    RSSM_RETURN_IF_ERROR(check_nest());
    const Token at = cur();
    auto u = make<Unary>(at);
    u->op = is_op("-") ? UnaryOp::kNeg : UnaryOp::kPos;
    next();
    RSSM_ASSIGN_OR_RETURN(u->operand, parse_unary(false));
    RSSM_RETURN_IF_ERROR(seal(u.get(), {u->operand.get()}));
    node = std::move(u);
  } else {
    RSSM_ASSIGN_OR_RETURN(node, parse_primary());
  }
  RSSM_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
  if (with_filter) {
    RSSM_ASSIGN_OR_RETURN(node, parse_filter_expr(std::move(node)));
  }
  return node;
}

Result<ExprPtr> ExprParser::parse_primary() {
  const Token t = cur();
  switch (t.kind) {
    case TokenKind::kName: {
      next();
      auto lit = make<Literal>(t);
      if (t.text == "true" || t.text == "True") lit->value = Value::boolean(true);
      else if (t.text == "false" || t.text == "False") lit->value = Value::boolean(false);
      else if (t.text == "none" || t.text == "None") lit->value = Value::none();
      else {
        auto n = make<Name>(t);
        n->name = t.text;
        return ExprPtr(std::move(n));
      }
      return ExprPtr(std::move(lit));
    }
    case TokenKind::kString: {
      // Adjacent string literals concatenate, as in Python.
      std::string s;
      while (cur().kind == TokenKind::kString) {
        s += cur().text;
        next();
      }
      auto lit = make<Literal>(t);
      lit->value = Value::string(std::move(s));
      return ExprPtr(std::move(lit));
    }
    case TokenKind::kInt:
    case TokenKind::kFloat: {
      next();
      auto lit = make<Literal>(t);
      lit->value = t.kind == TokenKind::kInt ? Value::integer(t.int_value) : Value::number(t.float_value);
      return ExprPtr(std::move(lit));
    }
    case TokenKind::kOperator:
      if (t.text == "(") {
        next();
        RSSM_ASSIGN_OR_RETURN(ExprPtr e, parse_tuple(true, true));
        RSSM_RETURN_IF_ERROR(expect_op(")"));
        return e;
      }
      if (t.text == "[") return parse_list();
      if (t.text == "{") return parse_dict();
      break;
    default:
      break;
  }
  return error(t, "unexpected " + describe_token(t));
}

Result<ExprPtr> ExprParser::parse_list() {
  auto l = make<ListExpr>(cur());
  next();
  while (!is_op("]")) {
    if (!l->items.empty()) RSSM_RETURN_IF_ERROR(expect_op(","));
    if (is_op("]")) break;
    RSSM_ASSIGN_OR_RETURN(ExprPtr e, parse_expression(true));
    l->height = std::max(l->height, e->height + 1);
    l->items.push_back(std::move(e));
  }
  next();
  RSSM_RETURN_IF_ERROR(check_height(l.get()));
  return ExprPtr(std::move(l));
}

Result<ExprPtr> ExprParser::parse_dict() {
  auto d = make<DictExpr>(cur());
  next();
  while (!is_op("}")) {
    if (!d->items.empty()) RSSM_RETURN_IF_ERROR(expect_op(","));
    if (is_op("}")) break;
    RSSM_ASSIGN_OR_RETURN(ExprPtr k, parse_expression(true));
    RSSM_RETURN_IF_ERROR(expect_op(":"));
    RSSM_ASSIGN_OR_RETURN(ExprPtr v, parse_expression(true));
    d->height = std::max({d->height, k->height + 1, v->height + 1});
    d->items.emplace_back(std::move(k), std::move(v));
  }
  next();
  RSSM_RETURN_IF_ERROR(check_height(d.get()));
  return ExprPtr(std::move(d));
}

Result<ExprPtr> ExprParser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".") || is_op("[")) {
      RSSM_ASSIGN_OR_RETURN(node, parse_subscript(std::move(node)));
    } else if (is_op("(")) {
      RSSM_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> ExprParser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) {
      RSSM_ASSIGN_OR_RETURN(node, parse_filter_chain(std::move(node)));
    } else if (is_name("is")) {
      RSSM_ASSIGN_OR_RETURN(node, parse_test(std::move(node)));
    } else if (is_op("(")) {
      RSSM_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> ExprParser::parse_subscript(ExprPtr node) {
  // Errors point at the start of the subscripted expression.
  Token at = cur();
  at.line = node->line;
  at.col = node->col;
  if (skip_op(".")) {
    const Token t = cur();
    if (t.kind == TokenKind::kName) {
      next();
      auto g = make<GetAttr>(at);
      g->object = std::move(node);
      g->attr = t.text;
      RSSM_RETURN_IF_ERROR(seal(g.get(), {g->object.get()}));
      return ExprPtr(std::move(g));
    }
    if (t.kind == TokenKind::kInt) {
      next();
      auto g = make<GetItem>(at);
      g->object = std::move(node);
      auto lit = make<Literal>(t);
      lit->value = Value::integer(t.int_value);
      g->index = std::move(lit);
      RSSM_RETURN_IF_ERROR(seal(g.get(), {g->object.get()}));
      return ExprPtr(std::move(g));
    }
    return error(t, "expected an attribute name after '.', got " + describe_token(t));
  }
  next();  // '['
  // jinja2's parse_subscribed: an expression, or a slice a:b:c with any
  // part left out.
  ExprPtr parts[3];
  bool is_slice = false;
  if (!is_op(":")) {
    RSSM_ASSIGN_OR_RETURN(parts[0], parse_expression(true));
  }
  if (skip_op(":")) {
    is_slice = true;
    if (!is_op("]") && !is_op(":")) {
      RSSM_ASSIGN_OR_RETURN(parts[1], parse_expression(true));
    }
    if (skip_op(":") && !is_op("]")) {
      RSSM_ASSIGN_OR_RETURN(parts[2], parse_expression(true));
    }
  }
  if (is_op(",")) return error(cur(), "tuple subscripts are not supported");
  RSSM_RETURN_IF_ERROR(expect_op("]"));
  if (!is_slice) {
    if (!parts[0]) return error(at, "empty subscript");
    auto g = make<GetItem>(at);
    g->object = std::move(node);
    g->index = std::move(parts[0]);
    RSSM_RETURN_IF_ERROR(seal(g.get(), {g->object.get(), g->index.get()}));
    return ExprPtr(std::move(g));
  }
  auto s = make<Slice>(at);
  s->object = std::move(node);
  s->start = std::move(parts[0]);
  s->stop = std::move(parts[1]);
  s->step = std::move(parts[2]);
  RSSM_RETURN_IF_ERROR(seal(s.get(), {s->object.get(), s->start.get(), s->stop.get(), s->step.get()}));
  return ExprPtr(std::move(s));
}

Result<std::vector<Arg>> ExprParser::parse_args() {
  std::vector<Arg> args;
  RSSM_RETURN_IF_ERROR(expect_op("("));
  bool keyword_seen = false;
  while (!is_op(")")) {
    if (!args.empty()) RSSM_RETURN_IF_ERROR(expect_op(","));
    if (is_op(")")) break;
    if (is_op("*") || is_op("**")) return error(cur(), "*args and **kwargs in calls are not supported");
    Arg a;
    if (cur().kind == TokenKind::kName && peek().kind == TokenKind::kOperator && peek().text == "=") {
      a.name = cur().text;
      next();
      next();
      keyword_seen = true;
    } else if (keyword_seen) {
      return error(cur(), "positional argument follows keyword argument");
    }
    RSSM_ASSIGN_OR_RETURN(a.value, parse_expression(true));
    args.push_back(std::move(a));
  }
  next();
  return args;
}

Result<ExprPtr> ExprParser::parse_call(ExprPtr callee) {
  auto c = make<Call>(cur());
  c->line = callee->line;  // errors point at what is called, not at '('
  c->col = callee->col;
  c->callee = std::move(callee);
  RSSM_ASSIGN_OR_RETURN(c->args, parse_args());
  c->height = c->callee->height + 1;
  RSSM_RETURN_IF_ERROR(seal_args(c.get(), c->args));
  return ExprPtr(std::move(c));
}

// `| name(args) | name2 ...` applied to `node` (null: a block's output).
// `first_has_pipe` false: {% filter upper | trim %}, whose first filter
// has no '|' before it.
Result<ExprPtr> ExprParser::parse_filter_chain(ExprPtr node, bool first_has_pipe) {
  bool need_pipe = first_has_pipe;
  while (!need_pipe || is_op("|")) {
    if (need_pipe) next();
    need_pipe = true;
    const Token at = cur();
    auto f = make<Filter>(at);
    RSSM_ASSIGN_OR_RETURN(f->name, expect_name("a filter name"));
    while (is_op(".")) {  // dotted filter names, as jinja2 allows
      next();
      RSSM_ASSIGN_OR_RETURN(std::string part, expect_name("a filter name"));
      f->name += "." + part;
    }
    // jinja2 checks filter names when it compiles, so a misspelt filter
    // fails even in a branch that never runs.
    if (!find_filter(f->name)) return error(at, "no filter named '" + f->name + "'");
    if (is_op("(")) {
      RSSM_ASSIGN_OR_RETURN(f->args, parse_args());
    }
    f->operand = std::move(node);
    if (f->operand) f->height = f->operand->height + 1;
    RSSM_RETURN_IF_ERROR(seal_args(f.get(), f->args));
    node = std::move(f);
  }
  return node;
}

Result<ExprPtr> ExprParser::parse_test(ExprPtr node) {
  const Token at = cur();
  next();  // 'is'
  auto t = make<Test>(at);
  t->negated = skip_name("not");
  RSSM_ASSIGN_OR_RETURN(t->name, expect_name("a test name"));
  while (is_op(".")) {
    next();
    RSSM_ASSIGN_OR_RETURN(std::string part, expect_name("a test name"));
    t->name += "." + part;
  }
  if (!find_test(t->name)) return error(at, "no test named '" + t->name + "'");
  if (is_op("(")) {
    RSSM_ASSIGN_OR_RETURN(t->args, parse_args());
  } else {
    // One argument without parentheses: `x is divisibleby 3`.
    const Token& c = cur();
    const bool starts_arg =
        c.kind == TokenKind::kName || c.kind == TokenKind::kString || c.kind == TokenKind::kInt ||
        c.kind == TokenKind::kFloat ||
        (c.kind == TokenKind::kOperator && (c.text == "(" || c.text == "[" || c.text == "{"));
    const bool keyword = c.kind == TokenKind::kName && (c.text == "else" || c.text == "or" || c.text == "and");
    if (starts_arg && !keyword) {
      if (c.kind == TokenKind::kName && c.text == "is") return error(c, "tests cannot be chained with 'is'");
      Arg a;
      RSSM_ASSIGN_OR_RETURN(a.value, parse_primary());
      RSSM_ASSIGN_OR_RETURN(a.value, parse_postfix(std::move(a.value)));
      t->args.push_back(std::move(a));
    }
  }
  t->operand = std::move(node);
  t->height = t->operand->height + 1;
  RSSM_RETURN_IF_ERROR(seal_args(t.get(), t->args));
  return ExprPtr(std::move(t));
}

}  // namespace replayssm::chat
