// The syntax tree of a parsed template.
//
// Plain structs with a kind tag, owned through unique_ptr: the parser builds
// the tree once, the evaluator walks it read-only (so one parsed Template
// may render on several threads at once). Every node keeps the line and
// column it started at, for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace replayssm::chat::ast {

struct Node {
  int line = 0;
  int col = 0;
};

// ---- Expressions ----

enum class ExprKind {
  kLiteral,   // a constant: number, string, true/false/none
  kName,      // a variable
  kList,      // [a, b] or (a, b)
  kDict,      // {k: v}
  kGetAttr,   // obj.name
  kGetItem,   // obj[index]
  kSlice,     // obj[start:stop:step]
  kCall,      // f(args)
  kFilter,    // operand | name(args)
  kTest,      // operand is [not] name(args)
  kUnary,     // not x, -x, +x
  kBinary,    // arithmetic, ~, and, or
  kCompare,   // a < b < c, in, not in
  kCondition  // a if cond else b
};

struct Expr : Node {
  explicit Expr(ExprKind k) : kind(k) {}
  virtual ~Expr() = default;
  ExprKind kind;
  // Levels of expressions below and including this one. The parser bounds
  // it, so evaluating (and destroying) a tree never recurses too deep.
  int height = 1;
};
using ExprPtr = std::unique_ptr<Expr>;

// A call argument: positional when `name` is empty.
struct Arg {
  std::string name;
  ExprPtr value;
};

struct Literal : Expr {
  Literal() : Expr(ExprKind::kLiteral) {}
  Value value;
};

struct Name : Expr {
  Name() : Expr(ExprKind::kName) {}
  std::string name;
};

struct ListExpr : Expr {
  ListExpr() : Expr(ExprKind::kList) {}
  std::vector<ExprPtr> items;
  bool tuple = false;
};

struct DictExpr : Expr {
  DictExpr() : Expr(ExprKind::kDict) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct GetAttr : Expr {
  GetAttr() : Expr(ExprKind::kGetAttr) {}
  ExprPtr object;
  std::string attr;
};

struct GetItem : Expr {
  GetItem() : Expr(ExprKind::kGetItem) {}
  ExprPtr object;
  ExprPtr index;
};

struct Slice : Expr {
  Slice() : Expr(ExprKind::kSlice) {}
  ExprPtr object;
  ExprPtr start, stop, step;  // each may be null
};

struct Call : Expr {
  Call() : Expr(ExprKind::kCall) {}
  ExprPtr callee;
  std::vector<Arg> args;
};

// `operand | name(args)`. In {% filter %} and {% set x | f %} the operand
// is null and stands for the rendered block.
struct Filter : Expr {
  Filter() : Expr(ExprKind::kFilter) {}
  ExprPtr operand;
  std::string name;
  std::vector<Arg> args;
};

struct Test : Expr {
  Test() : Expr(ExprKind::kTest) {}
  ExprPtr operand;
  std::string name;
  std::vector<Arg> args;
  bool negated = false;
};

enum class UnaryOp { kNot, kNeg, kPos };
struct Unary : Expr {
  Unary() : Expr(ExprKind::kUnary) {}
  UnaryOp op = UnaryOp::kNot;
  ExprPtr operand;
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat, kAnd, kOr };
struct Binary : Expr {
  Binary() : Expr(ExprKind::kBinary) {}
  BinaryOp op = BinaryOp::kAdd;
  ExprPtr lhs, rhs;
};

enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };
// Python's chained comparison: first op0 rest0 op1 rest1 ...
struct Compare : Expr {
  Compare() : Expr(ExprKind::kCompare) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct Condition : Expr {
  Condition() : Expr(ExprKind::kCondition) {}
  ExprPtr test, then, otherwise;  // otherwise may be null: Undefined
};

// ---- Statements ----

enum class StmtKind {
  kText,
  kOutput,     // {{ expr }}
  kIf,
  kFor,
  kSet,        // {% set target = expr %}
  kSetBlock,   // {% set name %}...{% endset %}
  kMacro,
  kCallBlock,  // {% call(params) macro(args) %}...{% endcall %}
  kFilterBlock,
  kWith,
  kBreak,
  kContinue,
  kGeneration  // transformers' {% generation %}: renders its body
};

struct Stmt : Node {
  explicit Stmt(StmtKind k) : kind(k) {}
  virtual ~Stmt() = default;
  StmtKind kind;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// What a for loop, set or with binds: one name, a tuple of names
// (unpacking), or a namespace attribute (`ns.attr`, set only).
struct Target {
  std::vector<std::string> names;  // one entry unless `unpack`
  bool unpack = false;
  std::string ns_attr;  // set: names[0] is the namespace, this the attribute
};

struct TextStmt : Stmt {
  TextStmt() : Stmt(StmtKind::kText) {}
  std::string text;
};

struct OutputStmt : Stmt {
  OutputStmt() : Stmt(StmtKind::kOutput) {}
  ExprPtr expr;
};

struct IfStmt : Stmt {
  IfStmt() : Stmt(StmtKind::kIf) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif, ...
  Body otherwise;
};

struct ForStmt : Stmt {
  ForStmt() : Stmt(StmtKind::kFor) {}
  Target target;
  ExprPtr iter;
  ExprPtr filter;  // `for x in xs if cond`; may be null
  Body body;
  Body otherwise;  // runs when no item was iterated
};

struct SetStmt : Stmt {
  SetStmt() : Stmt(StmtKind::kSet) {}
  Target target;
  ExprPtr value;
};

struct SetBlockStmt : Stmt {
  SetBlockStmt() : Stmt(StmtKind::kSetBlock) {}
  Target target;
  ExprPtr filter;  // a Filter chain over the block, or null
  Body body;
};

struct Param {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct MacroStmt : Stmt {
  MacroStmt() : Stmt(StmtKind::kMacro) {}
  std::string name;
  std::vector<Param> params;
  Body body;
};

struct CallBlockStmt : Stmt {
  CallBlockStmt() : Stmt(StmtKind::kCallBlock) {}
  std::vector<Param> caller_params;
  ExprPtr call;  // a Call expression
  Body body;     // the caller() macro's body
};

struct FilterBlockStmt : Stmt {
  FilterBlockStmt() : Stmt(StmtKind::kFilterBlock) {}
  ExprPtr filter;  // a Filter chain whose innermost operand is null
  Body body;
};

struct WithStmt : Stmt {
  WithStmt() : Stmt(StmtKind::kWith) {}
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
};

struct BreakStmt : Stmt {
  BreakStmt() : Stmt(StmtKind::kBreak) {}
};

struct ContinueStmt : Stmt {
  ContinueStmt() : Stmt(StmtKind::kContinue) {}
};

struct GenerationStmt : Stmt {
  GenerationStmt() : Stmt(StmtKind::kGeneration) {}
  Body body;
};

}  // namespace replayssm::chat::ast
