// A cursor over a template's tokens, shared by the statement and the
// expression parser: look-ahead, expectations, and errors that read
// "<template>:<line>:<col>: <what>".
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "chat/jinja_lexer.h"
#include "replayssm/status.h"

namespace replayssm::chat {

// How a token reads in an error message: "'}}'", "a string", ...
inline std::string describe_token(const Token& t) {
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

class TokenStream {
 public:
  TokenStream(const std::vector<Token>& tokens, const std::string& name) : toks_(tokens), name_(name) {}

 protected:
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
    return error(cur(), std::string("expected '") + op + "', got " + describe_token(cur()));
  }
  Status expect_block_end() {
    if (cur().kind == TokenKind::kBlockEnd) {
      next();
      return Status();
    }
    return error(cur(), "expected '%}', got " + describe_token(cur()));
  }
  Result<std::string> expect_name(const char* what) {
    if (cur().kind != TokenKind::kName) return error(cur(), std::string("expected ") + what + ", got " + describe_token(cur()));
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

  const std::vector<Token>& toks_;
  const std::string& name_;
  size_t pos_ = 0;
};

}  // namespace replayssm::chat
