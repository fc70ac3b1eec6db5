// Jinja's statement parser (see jinja_parser.h). Method names follow
// jinja2's Parser (parse_for, parse_if, parse_set, ...).
#include "chat/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

#include "chat/jinja_expr_parser.h"

namespace replayssm::chat {

namespace {

using namespace ast;

class Parser : public ExprParser {
 public:
  using ExprParser::ExprParser;

  Result<Body> parse_template() {
    Body body;
    std::string end;
    RSSM_RETURN_IF_ERROR(parse_body({}, &body, &end));
    return body;
  }

 private:
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
        if (cur().kind != TokenKind::kVarEnd) return error(cur(), "expected '}}', got " + describe_token(cur()));
        next();
        body->push_back(std::move(s));
        continue;
      }
      if (t.kind != TokenKind::kBlockBegin) return error(t, "unexpected " + describe_token(t));
      const Token& tag = peek();
      if (tag.kind != TokenKind::kName) return error(tag, "expected a tag name, got " + describe_token(tag));
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
    if (!skip_name("in")) return error(cur(), "expected 'in' in for loop, got " + describe_token(cur()));
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

  int block_depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Result<ast::Body> parse_tokens(const std::vector<Token>& tokens, const std::string& name) {
  return Parser(tokens, name).parse_template();
}

}  // namespace replayssm::chat
