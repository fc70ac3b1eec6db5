// The evaluator: walks a parsed template and writes the rendered text.
//
// Scoping is jinja2's: {% if %} opens no scope, each for-loop iteration and
// each macro call gets a fresh one (so {% set %} inside a loop body is gone
// at the next iteration; a namespace is the way out), and a macro sees the
// variables of the scope it was defined in as they are when it is called.
// Undefined names render as "" and are falsy; using one as a number, a
// container or a callee is an error naming it.
//
// One Evaluator renders once; it owns the namespaces and scopes the render
// creates and drops them all when it goes. Errors read
// "<template>:<line>:<col>: <what>", at the innermost node that failed.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_meter.h"
#include "chat/jinja_value.h"
#include "chat/render_limits.h"
#include "replayssm/status.h"

namespace replayssm::chat {

class Evaluator {
 public:
  Evaluator(const std::string& name, const RenderLimits& limits);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Renders `body` with the entries of `context` (a dict) as variables.
  Result<std::string> render(const ast::Body& body, const Value& context);

  // ---- for builtins ----
  Meter& meter() { return meter_; }
  const RenderLimits& limits() const { return limits_; }
  // A new, empty namespace owned by this render.
  Namespace* new_namespace();
  // Calls a macro, global function or bound method.
  Result<Value> call(const Value& callee, const CallArgs& args);
  // Applies a filter or test by name (for map, select, selectattr, ...).
  Result<Value> apply_filter(std::string_view name, const Value& operand, const CallArgs& args);
  Result<bool> apply_test(std::string_view name, const Value& operand, const CallArgs& args);

  struct Scope;

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Status exec_body(const ast::Body& body);
  Status exec(const ast::Stmt& s);
  Status exec_for(const ast::ForStmt& s);
  Status exec_set(const ast::SetStmt& s);
  Status exec_call_block(const ast::CallBlockStmt& s);
  Result<Value> eval(const ast::Expr& e);
  Result<Value> eval_impl(const ast::Expr& e);
  Result<Value> eval_call(const ast::Call& c);
  Result<Value> eval_compare(const ast::Compare& c);
  Result<CallArgs> eval_args(const std::vector<ast::Arg>& args);
  // Renders `body` into a string instead of the output.
  Result<std::string> capture(const ast::Body& body);
  // Applies a filter chain whose innermost operand is null to `block`.
  Result<Value> apply_block_filter(const ast::Expr& chain, Value block);
  Status assign(const ast::Target& t, const Value& v);
  Value lookup(const std::string& name) const;
  void bind(const std::string& name, Value v);
  Value make_macro(const std::string& name, const std::vector<ast::Param>* params, const ast::Body* body);
  Result<Value> invoke_macro(const std::string& name, const std::vector<ast::Param>& params,
                             const ast::Body& body, const std::shared_ptr<Scope>& closure, const CallArgs& args);
  Status write(std::string_view text);
  // Prefixes `s` with the position of `n`, unless an inner node did.
  Status at(const ast::Node& n, const Status& s);

  const std::string& name_;
  RenderLimits limits_;
  Meter meter_;
  std::string* out_ = nullptr;
  std::shared_ptr<Scope> scope_;
  Flow flow_ = Flow::kNormal;
  bool located_ = false;
  int depth_ = 0;        // eval/exec recursion
  int call_depth_ = 0;   // macro calls active
  int64_t iterations_ = 0;
  const Value* block_value_ = nullptr;  // what a null Filter operand stands for
  std::vector<std::unique_ptr<Namespace>> namespaces_;
  // Scopes that macros captured: cleared on destruction, which breaks the
  // scope -> macro -> scope reference cycles.
  std::vector<std::shared_ptr<Scope>> closures_;
};

}  // namespace replayssm::chat
