// Jinja's parser (see jinja_parser.h). Function names follow jinja2's
// Parser (parse_or, parse_math1, parse_unary, ...) so the two can be read
// side by side.
#include "chat/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

#include "chat/jinja_builtins.h"

namespace replayssm::chat {

namespace {

using namespace ast;

std::string describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::kText: return "template text";
    case TokenKind::kVarBegin: return "'{{'";
    case TokenKind::kVarEnd: return "'}}'";
    case TokenKind::kBlockBegin: return "'{%'";
    case TokenKind::kBlockEnd: return "'%}'";
    case TokenKind::kString: return "a string";
    case TokenKind::kInt:
    case TokenKind::kFloat: return "a number";
    case TokenKind::kEnd: return "the end of the template";
    default: return "'" + t.text + "'";
  }
}

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& name) : toks_(tokens), name_(name) {}

  Result<Body> parse_template() {
    Body body;
    std::string end;
    RSSM_RETURN_IF_ERROR(parse_body({}, &body, &end));
    return body;
  }

 private:
  // ---- token stream ----
  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t n = 1) const { return toks_[std::min(pos_ + n, toks_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool is_op(const char* op) const { return cur().kind == TokenKind::kOperator && cur().text == op; }
  bool is_name(const char* n) const { return cur().kind == TokenKind::kName && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }

  Status error(const Token& at, const std::string& what) const {
    return invalid_argument(name_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.col) + ": " + what);
  }
  Status expect_op(const char* op) {
    if (skip_op(op)) return Status();
    return error(cur(), std::string("expected '") + op + "', got " + describe(cur()));
  }
  Status expect_block_end() {
    if (cur().kind == TokenKind::kBlockEnd) {
      next();
      return Status();
    }
    return error(cur(), "expected '%}', got " + describe(cur()));
  }
  Result<std::string> expect_name(const char* what) {
    if (cur().kind != TokenKind::kName) return error(cur(), std::string("expected ") + what + ", got " + describe(cur()));
    std::string n = cur().text;
    next();
    return n;
  }

  template <typename T>
  std::unique_ptr<T> make(const Token& at) {
    auto n = std::make_unique<T>();
    n->line = at.line;
    n->col = at.col;
    return n;
  }

  // Sets `e`'s height from its children and bounds it.
  Status seal(Expr* e, std::initializer_list<const Expr*> children) {
    for (const Expr* c : children)
      if (c) e->height = std::max(e->height, c->height + 1);
    return check_height(e);
  }
  Status seal_args(Expr* e, const std::vector<Arg>& args) {
    for (const Arg& a : args) e->height = std::max(e->height, a.value->height + 1);
    return check_height(e);
  }
  Status check_height(const Expr* e) const {
    if (e->height > kMaxExpressionHeight) {
      Token at;
      at.line = e->line;
      at.col = e->col;
      return error(at, "expression nested more than " + std::to_string(kMaxExpressionHeight) + " levels deep");
    }
    return Status();
  }

  // ---- statements ----

  // Parses statements until one of the `end_tags` (the name after "{%") or
  // the end of the template; `*end` is the tag found ("" at the end). The
  // end tag's name is consumed, the rest of its tag is not. Reaching the end
  // while waiting for an end tag is an error at `open`, the opening tag.
  Status parse_body(std::initializer_list<const char*> end_tags, Body* body, std::string* end,
                    const Token* open = nullptr) {
    if (++block_depth_ > kMaxBlockNesting)
      return error(cur(), "blocks nested more than " + std::to_string(kMaxBlockNesting) + " deep");
    while (true) {
      const Token& t = cur();
      if (t.kind == TokenKind::kEnd) {
        if (end_tags.size() != 0 && open)
          return error(*open, "'" + open->text + "' is not closed: expected '{% " + *(end_tags.end() - 1) + " %}'");
        if (end_tags.size() != 0) return error(t, "unexpected end of template");
        *end = "";
        break;
      }
      if (t.kind == TokenKind::kText) {
        auto s = make<TextStmt>(t);
        s->text = t.text;
        body->push_back(std::move(s));
        next();
        continue;
      }
      if (t.kind == TokenKind::kVarBegin) {
        next();
        auto s = make<OutputStmt>(t);
        RSSM_ASSIGN_OR_RETURN(s->expr, parse_tuple(true, false));
        if (cur().kind != TokenKind::kVarEnd) return error(cur(), "expected '}}', got " + describe(cur()));
        next();
        body->push_back(std::move(s));
        continue;
      }
      if (t.kind != TokenKind::kBlockBegin) return error(t, "unexpected " + describe(t));
      const Token& tag = peek();
      if (tag.kind != TokenKind::kName) return error(tag, "expected a tag name, got " + describe(tag));
      if (std::any_of(end_tags.begin(), end_tags.end(), [&](const char* e) { return tag.text == e; })) {
        *end = tag.text;
        next();
        next();
        break;
      }
      next();
      RSSM_RETURN_IF_ERROR(parse_statement(body));
    }
    --block_depth_;
    return Status();
  }

  // At the tag name, after "{%".
  Status parse_statement(Body* body) {
    const Token& tag = cur();
    const std::string& t = tag.text;
    if (t == "for") return parse_for(body);
    if (t == "if") return parse_if(body);
    if (t == "set") return parse_set(body);
    if (t == "macro") return parse_macro(body);
    if (t == "call") return parse_call_block(body);
    if (t == "filter") return parse_filter_block(body);
    if (t == "with") return parse_with(body);
    if (t == "generation") {
      auto s = make<GenerationStmt>(tag);
      next();
      RSSM_RETURN_IF_ERROR(expect_block_end());
      RSSM_RETURN_IF_ERROR(parse_block_until("endgeneration", tag, &s->body));
      body->push_back(std::move(s));
      return Status();
    }
    if (t == "break" || t == "continue") {
      if (loop_depth_ == 0) return error(tag, "'" + t + "' outside of a for loop");
      StmtPtr s;
      if (t == "break") s = make<BreakStmt>(tag);
      else s = make<ContinueStmt>(tag);
      next();
      RSSM_RETURN_IF_ERROR(expect_block_end());
      body->push_back(std::move(s));
      return Status();
    }
    static const char* const kEnds[] = {"endfor", "endif", "elif", "else", "endset", "endmacro", "endcall",
                                        "endfilter", "endwith", "endgeneration", "endraw"};
    for (const char* e : kEnds)
      if (t == e) return error(tag, "unexpected '" + t + "' without a matching opening tag");
    return error(tag, "unknown tag '" + t + "'");
  }

  // Parses a body that must end with {% `end_tag` %}; `open` names the
  // opening tag in the error when it does not.
  Status parse_block_until(const char* end_tag, const Token& open, Body* body) {
    std::string end;
    RSSM_RETURN_IF_ERROR(parse_body({end_tag}, body, &end, &open));
    return expect_block_end();
  }

  Status parse_for(Body* body) {
    const Token open = cur();
    next();
    auto s = make<ForStmt>(open);
    RSSM_ASSIGN_OR_RETURN(s->target, parse_target(false));
    if (!skip_name("in")) return error(cur(), "expected 'in' in for loop, got " + describe(cur()));
    RSSM_ASSIGN_OR_RETURN(s->iter, parse_tuple(false, false));
    if (skip_name("if")) {
      RSSM_ASSIGN_OR_RETURN(s->filter, parse_expression(true));
    }
    if (is_name("recursive")) return error(cur(), "recursive for loops are not supported");
    RSSM_RETURN_IF_ERROR(expect_block_end());
    ++loop_depth_;
    std::string end;
    Status st = parse_body({"else", "endfor"}, &s->body, &end, &open);
    --loop_depth_;
    RSSM_RETURN_IF_ERROR(st);
    RSSM_RETURN_IF_ERROR(expect_block_end());
    if (end == "else") RSSM_RETURN_IF_ERROR(parse_block_until("endfor", open, &s->otherwise));
    body->push_back(std::move(s));
    return Status();
  }

  Status parse_if(Body* body) {
    const Token open = cur();
    next();
    auto s = make<IfStmt>(open);
    while (true) {
      RSSM_ASSIGN_OR_RETURN(ExprPtr test, parse_tuple(false, false));
      RSSM_RETURN_IF_ERROR(expect_block_end());
      Body branch;
      std::string end;
      RSSM_RETURN_IF_ERROR(parse_body({"elif", "else", "endif"}, &branch, &end, &open));
      s->branches.emplace_back(std::move(test), std::move(branch));
      if (end == "elif") continue;
      RSSM_RETURN_IF_ERROR(expect_block_end());
      if (end == "else") RSSM_RETURN_IF_ERROR(parse_block_until("endif", open, &s->otherwise));
      break;
    }
    body->push_back(std::move(s));
    return Status();
  }

  Status parse_set(Body* body) {
    const Token open = cur();
    next();
    RSSM_ASSIGN_OR_RETURN(Target target, parse_target(true));
    if (skip_op("=")) {
      auto s = make<SetStmt>(open);
      s->target = std::move(target);
      RSSM_ASSIGN_OR_RETURN(s->value, parse_tuple(true, false));
      RSSM_RETURN_IF_ERROR(expect_block_end());
      body->push_back(std::move(s));
      return Status();
    }
    if (target.unpack || !target.ns_attr.empty())
      return error(open, "a block {% set %} assigns one plain name");
    auto s = make<SetBlockStmt>(open);
    s->target = std::move(target);
    if (is_op("|")) {
      RSSM_ASSIGN_OR_RETURN(s->filter, parse_filter_chain(nullptr));
    }
    RSSM_RETURN_IF_ERROR(expect_block_end());
    RSSM_RETURN_IF_ERROR(parse_block_until("endset", open, &s->body));
    body->push_back(std::move(s));
    return Status();
  }

  Result<std::vector<Param>> parse_params() {
    std::vector<Param> params;
    RSSM_RETURN_IF_ERROR(expect_op("("));
    while (!is_op(")")) {
      if (!params.empty()) RSSM_RETURN_IF_ERROR(expect_op(","));
      if (is_op(")")) break;
      Param p;
      RSSM_ASSIGN_OR_RETURN(p.name, expect_name("a parameter name"));
      if (skip_op("=")) {
        RSSM_ASSIGN_OR_RETURN(p.default_value, parse_expression(true));
      } else if (!params.empty() && params.back().default_value) {
        return error(cur(), "parameter '" + p.name + "' without a default follows one with a default");
      }
      params.push_back(std::move(p));
    }
    next();
    return params;
  }

  Status parse_macro(Body* body) {
    const Token open = cur();
    next();
    auto s = make<MacroStmt>(open);
    RSSM_ASSIGN_OR_RETURN(s->name, expect_name("a macro name"));
    RSSM_ASSIGN_OR_RETURN(s->params, parse_params());
    RSSM_RETURN_IF_ERROR(expect_block_end());
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;  // break/continue cannot leave a macro
    Status st = parse_block_until("endmacro", open, &s->body);
    loop_depth_ = saved_loops;
    RSSM_RETURN_IF_ERROR(st);
    body->push_back(std::move(s));
    return Status();
  }

  Status parse_call_block(Body* body) {
    const Token open = cur();
    next();
    auto s = make<CallBlockStmt>(open);
    if (is_op("(")) {
      RSSM_ASSIGN_OR_RETURN(s->caller_params, parse_params());
    }
    RSSM_ASSIGN_OR_RETURN(s->call, parse_expression(true));
    if (s->call->kind != ExprKind::kCall) return error(open, "{% call %} needs a macro call");
    RSSM_RETURN_IF_ERROR(expect_block_end());
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    Status st = parse_block_until("endcall", open, &s->body);
    loop_depth_ = saved_loops;
    RSSM_RETURN_IF_ERROR(st);
    body->push_back(std::move(s));
    return Status();
  }

  Status parse_filter_block(Body* body) {
    const Token open = cur();
    next();
    auto s = make<FilterBlockStmt>(open);
    RSSM_ASSIGN_OR_RETURN(s->filter, parse_filter_chain(nullptr, false));
    RSSM_RETURN_IF_ERROR(expect_block_end());
    RSSM_RETURN_IF_ERROR(parse_block_until("endfilter", open, &s->body));
    body->push_back(std::move(s));
    return Status();
  }

  Status parse_with(Body* body) {
    const Token open = cur();
    next();
    auto s = make<WithStmt>(open);
    while (cur().kind != TokenKind::kBlockEnd) {
      if (!s->assignments.empty()) RSSM_RETURN_IF_ERROR(expect_op(","));
      RSSM_ASSIGN_OR_RETURN(Target t, parse_target(false));
      RSSM_RETURN_IF_ERROR(expect_op("="));
      RSSM_ASSIGN_OR_RETURN(ExprPtr v, parse_expression(true));
      s->assignments.emplace_back(std::move(t), std::move(v));
    }
    next();
    RSSM_RETURN_IF_ERROR(parse_block_until("endwith", open, &s->body));
    body->push_back(std::move(s));
    return Status();
  }

  // A name, `ns.attr` (when `allow_ns`), or names separated by commas,
  // optionally in parentheses (tuple unpacking).
  Result<Target> parse_target(bool allow_ns) {
    Target t;
    if (allow_ns && cur().kind == TokenKind::kName && peek().kind == TokenKind::kOperator && peek().text == ".") {
      t.names.push_back(cur().text);
      next();
      next();
      RSSM_ASSIGN_OR_RETURN(t.ns_attr, expect_name("an attribute name"));
      return t;
    }
    const bool paren = skip_op("(");
    while (true) {
      RSSM_ASSIGN_OR_RETURN(std::string n, expect_name("a variable name"));
      if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" || n == "None")
        return error(cur(), "cannot assign to '" + n + "'");
      t.names.push_back(std::move(n));
      if (!skip_op(",")) break;
      t.unpack = true;
      if (cur().kind != TokenKind::kName) break;  // trailing comma
    }
    if (paren) {
      RSSM_RETURN_IF_ERROR(expect_op(")"));
      t.unpack = t.unpack || t.names.size() > 1;
    }
    return t;
  }

  // ---- expressions ----

  // jinja2's parse_tuple: expressions separated by commas form a tuple. It
  // ends at '}}', '%}', ')' or the name 'in' ... where no more expression
  // can start.
  Result<ExprPtr> parse_tuple(bool with_condexpr, bool explicit_parens) {
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
      if (!explicit_parens) return error(cur(), "expected an expression, got " + describe(cur()));
    }
    auto l = make<ListExpr>(start);
    l->tuple = true;
    l->items = std::move(items);
    for (const auto& i : l->items) l->height = std::max(l->height, i->height + 1);
    RSSM_RETURN_IF_ERROR(check_height(l.get()));
    return ExprPtr(std::move(l));
  }

  bool tuple_end() const {
    const Token& t = cur();
    return t.kind == TokenKind::kVarEnd || t.kind == TokenKind::kBlockEnd || t.kind == TokenKind::kEnd ||
           (t.kind == TokenKind::kOperator && t.text == ")") ||
           (t.kind == TokenKind::kName && (t.text == "in" || t.text == "if" || t.text == "recursive"));
  }

  // Counts recursion into nested expressions ("(((x)))", "not not x",
  // "- - x"): height is only known once a subtree is built, and the stack
  // must not run out before then.
  struct Nest {
    explicit Nest(Parser& parser) : p(parser) { ++p.nest_; }
    ~Nest() { --p.nest_; }
    Parser& p;
  };
  Status check_nest() const {
    if (nest_ > kMaxExpressionHeight)
      return error(cur(), "expression nested more than " + std::to_string(kMaxExpressionHeight) + " levels deep");
    return Status();
  }

  Result<ExprPtr> parse_expression(bool with_condexpr) {
    Nest guard(*this);
    RSSM_RETURN_IF_ERROR(check_nest());
    if (with_condexpr) return parse_condexpr();
    return parse_or();
  }

  Result<ExprPtr> parse_condexpr() {
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

  Result<ExprPtr> binary(BinaryOp op, const Token& at, ExprPtr lhs, ExprPtr rhs) {
    auto b = make<Binary>(at);
    b->line = lhs->line;  // errors point at the start of the expression
    b->col = lhs->col;
    b->op = op;
    b->lhs = std::move(lhs);
    b->rhs = std::move(rhs);
    RSSM_RETURN_IF_ERROR(seal(b.get(), {b->lhs.get(), b->rhs.get()}));
    return ExprPtr(std::move(b));
  }

  Result<ExprPtr> parse_or() {
    RSSM_ASSIGN_OR_RETURN(ExprPtr left, parse_and());
    while (is_name("or")) {
      const Token at = cur();
      next();
      RSSM_ASSIGN_OR_RETURN(ExprPtr right, parse_and());
      RSSM_ASSIGN_OR_RETURN(left, binary(BinaryOp::kOr, at, std::move(left), std::move(right)));
    }
    return left;
  }

  Result<ExprPtr> parse_and() {
    RSSM_ASSIGN_OR_RETURN(ExprPtr left, parse_not());
    while (is_name("and")) {
      const Token at = cur();
      next();
      RSSM_ASSIGN_OR_RETURN(ExprPtr right, parse_not());
      RSSM_ASSIGN_OR_RETURN(left, binary(BinaryOp::kAnd, at, std::move(left), std::move(right)));
    }
    return left;
  }

  Result<ExprPtr> parse_not() {
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

  Result<ExprPtr> parse_compare() {
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

  Result<ExprPtr> parse_math1() {
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

  Result<ExprPtr> parse_concat() {
    RSSM_ASSIGN_OR_RETURN(ExprPtr left, parse_math2());
    while (is_op("~")) {
      const Token at = cur();
      next();
      RSSM_ASSIGN_OR_RETURN(ExprPtr right, parse_math2());
      RSSM_ASSIGN_OR_RETURN(left, binary(BinaryOp::kConcat, at, std::move(left), std::move(right)));
    }
    return left;
  }

  Result<ExprPtr> parse_math2() {
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

  Result<ExprPtr> parse_pow() {
    RSSM_ASSIGN_OR_RETURN(ExprPtr left, parse_unary(true));
    while (is_op("**")) {
      const Token at = cur();
      next();
      RSSM_ASSIGN_OR_RETURN(ExprPtr right, parse_unary(true));
      RSSM_ASSIGN_OR_RETURN(left, binary(BinaryOp::kPow, at, std::move(left), std::move(right)));
    }
    return left;
  }

  Result<ExprPtr> parse_unary(bool with_filter) {
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

  Result<ExprPtr> parse_primary() {
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
    return error(t, "unexpected " + describe(t));
  }

  Result<ExprPtr> parse_list() {
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

  Result<ExprPtr> parse_dict() {
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

  Result<ExprPtr> parse_postfix(ExprPtr node) {
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

  Result<ExprPtr> parse_filter_expr(ExprPtr node) {
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

  Result<ExprPtr> parse_subscript(ExprPtr node) {
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
      return error(t, "expected an attribute name after '.', got " + describe(t));
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

  Result<std::vector<Arg>> parse_args() {
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

  Result<ExprPtr> parse_call(ExprPtr callee) {
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
  Result<ExprPtr> parse_filter_chain(ExprPtr node, bool first_has_pipe = true) {
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

  Result<ExprPtr> parse_test(ExprPtr node) {
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

  const std::vector<Token>& toks_;
  const std::string& name_;
  size_t pos_ = 0;
  int block_depth_ = 0;
  int loop_depth_ = 0;
  int nest_ = 0;  // active parse_expression / unary recursion
};

}  // namespace

Result<ast::Body> parse_tokens(const std::vector<Token>& tokens, const std::string& name) {
  return Parser(tokens, name).parse_template();
}

}  // namespace replayssm::chat
