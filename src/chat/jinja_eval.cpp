// The evaluator (see jinja_eval.h).
#include "chat/jinja_eval.h"

#include <unordered_map>

#include "chat/jinja_builtins.h"
#include "chat/jinja_operators.h"

namespace replayssm::chat {

using namespace ast;

struct Evaluator::Scope {
  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;
};

namespace {

// eval/exec recursion. Expression height and block nesting are bounded by
// the parser; this bounds their product with macro recursion, keeping the
// stack well under a megabyte.
constexpr int kMaxEvalDepth = 1500;

Value str_value(const char* s) { return Value::string(s); }

}  // namespace

Evaluator::Evaluator(const std::string& name, const RenderLimits& limits)
    : name_(name), limits_(limits), meter_(limits.max_steps, limits.max_output_bytes) {}

Evaluator::~Evaluator() {
  for (auto& s : closures_) s->vars.clear();
}

Namespace* Evaluator::new_namespace() {
  namespaces_.push_back(std::make_unique<Namespace>());
  return namespaces_.back().get();
}

Result<std::string> Evaluator::render(const Body& body, const Value& context) {
  scope_ = std::make_shared<Scope>();
  if (context.is_dict()) {
    for (const auto& [k, v] : context.as_dict().entries())
      if (k.is_string()) scope_->vars[k.as_string()] = v;
  }
  std::string out;
  out_ = &out;
  Status s = exec_body(body);
  out_ = nullptr;
  if (!s.ok()) return s;
  return out;
}

Status Evaluator::at(const Node& n, const Status& s) {
  if (s.ok() || located_) return s;
  located_ = true;
  return Status(s.code(), name_ + ":" + std::to_string(n.line) + ":" + std::to_string(n.col) + ": " + s.message());
}

Status Evaluator::write(std::string_view text) {
  if (out_->size() + text.size() > limits_.max_output_bytes)
    return out_of_budget("the rendered text exceeds the limit of " + std::to_string(limits_.max_output_bytes) +
                         " bytes");
  meter_.charge(static_cast<int64_t>(text.size() / 64));
  out_->append(text);
  return Status();
}

Value Evaluator::lookup(const std::string& name) const {
  for (const Scope* s = scope_.get(); s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  if (const Value* g = find_global(name)) return *g;
  return Value::undefined("'" + name + "' is undefined");
}

void Evaluator::bind(const std::string& name, Value v) { scope_->vars[name] = std::move(v); }

// ---- statements ----

Status Evaluator::exec_body(const Body& body) {
  for (const StmtPtr& s : body) {
    RSSM_RETURN_IF_ERROR(exec(*s));
    if (flow_ != Flow::kNormal) break;
  }
  return Status();
}

Status Evaluator::exec(const Stmt& s) {
  if (depth_ >= kMaxEvalDepth) return at(s, out_of_budget("template nesting too deep to evaluate"));
  ++depth_;
  struct Leave {
    int& d;
    ~Leave() { --d; }
  } leave{depth_};
  Status st;
  switch (s.kind) {
    case StmtKind::kText:
      st = write(static_cast<const TextStmt&>(s).text);
      break;
    case StmtKind::kOutput: {
      auto v = eval(*static_cast<const OutputStmt&>(s).expr);
      if (!v.ok()) return v.status();
      if (v->is_string()) {
        st = write(v->as_string());
      } else {
        const std::string text = to_str(*v, meter_);
        st = meter_.failed() ? out_of_budget(meter_.why()) : write(text);
      }
      break;
    }
    case StmtKind::kIf: {
      const auto& is = static_cast<const IfStmt&>(s);
      for (const auto& [test, branch] : is.branches) {
        RSSM_ASSIGN_OR_RETURN(Value t, eval(*test));
        if (t.truthy()) return exec_body(branch);
      }
      return exec_body(is.otherwise);
    }
    case StmtKind::kFor:
      return exec_for(static_cast<const ForStmt&>(s));
    case StmtKind::kSet:
      return exec_set(static_cast<const SetStmt&>(s));
    case StmtKind::kSetBlock: {
      const auto& sb = static_cast<const SetBlockStmt&>(s);
      RSSM_ASSIGN_OR_RETURN(std::string text, capture(sb.body));
      Value v = Value::string(std::move(text));
      if (sb.filter) {
        RSSM_ASSIGN_OR_RETURN(v, apply_block_filter(*sb.filter, std::move(v)));
      }
      st = assign(sb.target, v);
      break;
    }
    case StmtKind::kMacro: {
      const auto& m = static_cast<const MacroStmt&>(s);
      bind(m.name, make_macro(m.name, &m.params, &m.body));
      break;
    }
    case StmtKind::kCallBlock:
      return exec_call_block(static_cast<const CallBlockStmt&>(s));
    case StmtKind::kFilterBlock: {
      const auto& fb = static_cast<const FilterBlockStmt&>(s);
      RSSM_ASSIGN_OR_RETURN(std::string text, capture(fb.body));
      RSSM_ASSIGN_OR_RETURN(Value v, apply_block_filter(*fb.filter, Value::string(std::move(text))));
      const std::string out = to_str(v, meter_);
      st = meter_.failed() ? out_of_budget(meter_.why()) : write(out);
      break;
    }
    case StmtKind::kWith: {
      const auto& w = static_cast<const WithStmt&>(s);
      std::vector<Value> values;
      for (const auto& [target, expr] : w.assignments) {
        RSSM_ASSIGN_OR_RETURN(Value v, eval(*expr));
        values.push_back(std::move(v));
      }
      auto inner = std::make_shared<Scope>();
      inner->parent = scope_;
      std::swap(scope_, inner);
      for (size_t k = 0; k < values.size() && st.ok(); ++k) st = assign(w.assignments[k].first, values[k]);
      if (st.ok()) st = exec_body(w.body);
      std::swap(scope_, inner);
      break;
    }
    case StmtKind::kBreak:
      flow_ = Flow::kBreak;
      break;
    case StmtKind::kContinue:
      flow_ = Flow::kContinue;
      break;
    case StmtKind::kGeneration:
      return exec_body(static_cast<const GenerationStmt&>(s).body);
  }
  if (!st.ok()) return at(s, st);
  return Status();
}

Status Evaluator::exec_for(const ForStmt& s) {
  RSSM_ASSIGN_OR_RETURN(Value iterable, eval(*s.iter));
  auto listed = iterate(iterable, meter_);
  if (!listed.ok()) return at(*s.iter, listed.status());
  std::vector<Value> items = std::move(listed).value();
  auto count_iteration = [&]() -> Status {
    if (++iterations_ > limits_.max_loop_iterations)
      return at(s, out_of_budget("template loops ran more than " + std::to_string(limits_.max_loop_iterations) +
                                 " iterations"));
    return Status();
  };
  if (s.filter) {
    // `for x in xs if cond`: cond sees the loop variables (not `loop`), and
    // loop.length, loop.last, ... count only the items it keeps.
    std::vector<Value> kept;
    for (Value& item : items) {
      RSSM_RETURN_IF_ERROR(count_iteration());
      auto probe = std::make_shared<Scope>();
      probe->parent = scope_;
      std::swap(scope_, probe);
      Status st = assign(s.target, item);
      Result<Value> keep = st.ok() ? eval(*s.filter) : Result<Value>(st);
      std::swap(scope_, probe);
      if (!keep.ok()) return at(s, keep.status());
      if (keep->truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_body(s.otherwise);
  const auto n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    RSSM_RETURN_IF_ERROR(count_iteration());
    auto iteration = std::make_shared<Scope>();
    iteration->parent = scope_;
    Dict loop;
    loop.set(str_value("index"), Value::integer(i + 1));
    loop.set(str_value("index0"), Value::integer(i));
    loop.set(str_value("revindex"), Value::integer(n - i));
    loop.set(str_value("revindex0"), Value::integer(n - i - 1));
    loop.set(str_value("first"), Value::boolean(i == 0));
    loop.set(str_value("last"), Value::boolean(i == n - 1));
    loop.set(str_value("length"), Value::integer(n));
    loop.set(str_value("previtem"),
             i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
    loop.set(str_value("nextitem"),
             i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
    loop.set(str_value("depth"), Value::integer(1));
    loop.set(str_value("depth0"), Value::integer(0));
    auto cycle = std::make_shared<Callable>();
    cycle->kind = Callable::Kind::kMethod;
    cycle->name = "cycle of LoopContext object";
    cycle->fn = [i](Evaluator&, const CallArgs& args) -> Result<Value> {
      if (args.positional.empty()) return invalid_argument("loop.cycle: no items for cycling given");
      return args.positional[static_cast<size_t>(i) % args.positional.size()];
    };
    loop.set(str_value("cycle"), Value::callable(std::move(cycle)));
    iteration->vars["loop"] = Value::dict(std::move(loop));
    std::swap(scope_, iteration);
    Status st = assign(s.target, items[static_cast<size_t>(i)]);
    if (st.ok()) st = exec_body(s.body);
    std::swap(scope_, iteration);
    if (!st.ok()) return at(s, st);
    const Flow f = flow_;
    flow_ = Flow::kNormal;
    if (f == Flow::kBreak) break;
  }
  return Status();
}

Status Evaluator::exec_set(const SetStmt& s) {
  RSSM_ASSIGN_OR_RETURN(Value v, eval(*s.value));
  return at(s, assign(s.target, v));
}

Status Evaluator::assign(const Target& t, const Value& v) {
  if (!t.ns_attr.empty()) {
    const Value ns = lookup(t.names[0]);
    if (ns.type() != Value::Type::kNamespace)
      return invalid_argument("cannot assign attribute '" + t.ns_attr + "' on '" + t.names[0] +
                              "': it is not a namespace");
    ns.as_namespace().attrs.set(Value::string(t.ns_attr), v);
    return Status();
  }
  if (!t.unpack) {
    bind(t.names[0], v);
    return Status();
  }
  RSSM_ASSIGN_OR_RETURN(std::vector<Value> parts, iterate(v, meter_));
  if (v.is_undefined()) return undefined_error(v);
  if (parts.size() != t.names.size()) {
    if (parts.size() < t.names.size())
      return invalid_argument("not enough values to unpack (expected " + std::to_string(t.names.size()) + ", got " +
                              std::to_string(parts.size()) + ")");
    return invalid_argument("too many values to unpack (expected " + std::to_string(t.names.size()) + ")");
  }
  for (size_t k = 0; k < parts.size(); ++k) bind(t.names[k], parts[k]);
  return Status();
}

Status Evaluator::exec_call_block(const CallBlockStmt& s) {
  const auto& call_expr = static_cast<const Call&>(*s.call);
  RSSM_ASSIGN_OR_RETURN(Value callee, eval(*call_expr.callee));
  RSSM_ASSIGN_OR_RETURN(CallArgs args, eval_args(call_expr.args));
  args.keyword.emplace_back("caller", make_macro("caller", &s.caller_params, &s.body));
  auto r = call(callee, args);
  if (!r.ok()) return at(s, r.status());
  const std::string text = to_str(*r, meter_);
  if (meter_.failed()) return at(s, out_of_budget(meter_.why()));
  return at(s, write(text));
}

Result<std::string> Evaluator::capture(const Body& body) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  Status st = exec_body(body);
  out_ = saved;
  if (!st.ok()) return st;
  return buf;
}

Result<Value> Evaluator::apply_block_filter(const Expr& chain, Value block) {
  const Value* saved = block_value_;
  block_value_ = &block;
  auto r = eval(chain);
  block_value_ = saved;
  return r;
}

// ---- macros ----

Value Evaluator::make_macro(const std::string& name, const std::vector<Param>* params, const Body* body) {
  std::shared_ptr<Scope> closure = scope_;
  closures_.push_back(closure);
  auto fn = std::make_shared<Callable>();
  fn->kind = Callable::Kind::kMacro;
  fn->name = name;
  fn->fn = [name, params, body, closure](Evaluator& ev, const CallArgs& args) {
    return ev.invoke_macro(name, *params, *body, closure, args);
  };
  return Value::callable(std::move(fn));
}

Result<Value> Evaluator::invoke_macro(const std::string& name, const std::vector<Param>& params, const Body& body,
                                      const std::shared_ptr<Scope>& closure, const CallArgs& args) {
  if (call_depth_ >= limits_.max_call_depth)
    return out_of_budget("macro calls nested more than " + std::to_string(limits_.max_call_depth) +
                         " deep (calling '" + name + "')");
  if (args.positional.size() > params.size())
    return invalid_argument("macro '" + name + "' takes not more than " + std::to_string(params.size()) +
                            " argument(s)");
  auto scope = std::make_shared<Scope>();
  scope->parent = closure;
  std::vector<bool> bound(params.size(), false);
  for (size_t k = 0; k < args.positional.size(); ++k) {
    scope->vars[params[k].name] = args.positional[k];
    bound[k] = true;
  }
  for (const auto& [key, value] : args.keyword) {
    size_t k = 0;
    while (k < params.size() && params[k].name != key) ++k;
    if (k == params.size()) {
      if (key == "caller") {
        scope->vars["caller"] = value;
        continue;
      }
      return invalid_argument("macro '" + name + "' takes no keyword argument '" + key + "'");
    }
    if (bound[k]) return invalid_argument("macro '" + name + "' got multiple values for argument '" + key + "'");
    scope->vars[key] = value;
    bound[k] = true;
  }
  std::swap(scope_, scope);
  std::string buf;
  std::string* saved_out = out_;
  out_ = &buf;
  ++call_depth_;
  Status st;
  // Defaults are evaluated at call time, in the macro's scope, so they may
  // use the parameters before them.
  for (size_t k = 0; k < params.size() && st.ok(); ++k) {
    if (bound[k]) continue;
    if (params[k].default_value) {
      auto v = eval(*params[k].default_value);
      if (!v.ok()) st = v.status();
      else scope_->vars[params[k].name] = std::move(v).value();
    } else {
      scope_->vars[params[k].name] = Value::undefined("parameter '" + params[k].name + "' was not provided");
    }
  }
  if (st.ok()) st = exec_body(body);
  --call_depth_;
  out_ = saved_out;
  std::swap(scope_, scope);
  if (!st.ok()) return st;
  return Value::string(std::move(buf));
}

// ---- expressions ----

Result<Value> Evaluator::eval(const Expr& e) {
  if (depth_ >= kMaxEvalDepth) return at(e, out_of_budget("template nesting too deep to evaluate"));
  ++depth_;
  meter_.charge(1);
  auto r = eval_impl(e);
  --depth_;
  if (!r.ok()) return at(e, r.status());
  if (meter_.failed()) return at(e, out_of_budget(meter_.why()));
  if (r->depth() > limits_.max_value_depth)
    return at(e, invalid_argument("a value nested more than " + std::to_string(limits_.max_value_depth) +
                                  " levels deep"));
  return r;
}

Result<CallArgs> Evaluator::eval_args(const std::vector<Arg>& args) {
  CallArgs out;
  for (const Arg& a : args) {
    RSSM_ASSIGN_OR_RETURN(Value v, eval(*a.value));
    if (a.name.empty()) out.positional.push_back(std::move(v));
    else out.keyword.emplace_back(a.name, std::move(v));
  }
  return out;
}

Result<Value> Evaluator::call(const Value& callee, const CallArgs& args) {
  if (callee.is_undefined()) return undefined_error(callee);
  if (callee.type() != Value::Type::kCallable)
    return invalid_argument(std::string("'") + callee.type_name() + "' object is not callable");
  return callee.as_callable().fn(*this, args);
}

Result<Value> Evaluator::apply_filter(std::string_view name, const Value& operand, const CallArgs& args) {
  FilterFn fn = find_filter(name);
  if (!fn) return invalid_argument("no filter named '" + std::string(name) + "'");
  return fn(*this, operand, args);
}

Result<bool> Evaluator::apply_test(std::string_view name, const Value& operand, const CallArgs& args) {
  TestFn fn = find_test(name);
  if (!fn) return invalid_argument("no test named '" + std::string(name) + "'");
  return fn(*this, operand, args);
}

Result<Value> Evaluator::eval_call(const Call& c) {
  RSSM_ASSIGN_OR_RETURN(Value callee, eval(*c.callee));
  RSSM_ASSIGN_OR_RETURN(CallArgs args, eval_args(c.args));
  return call(callee, args);
}

Result<Value> Evaluator::eval_compare(const Compare& c) {
  RSSM_ASSIGN_OR_RETURN(Value lhs, eval(*c.first));
  for (const auto& [op, rhs_expr] : c.rest) {
    RSSM_ASSIGN_OR_RETURN(Value rhs, eval(*rhs_expr));
    bool ok = false;
    switch (op) {
      case CompareOp::kEq: ok = py_equal(lhs, rhs, meter_); break;
      case CompareOp::kNe: ok = !py_equal(lhs, rhs, meter_); break;
      case CompareOp::kIn:
      case CompareOp::kNotIn: {
        RSSM_ASSIGN_OR_RETURN(bool in, contains(rhs, lhs, meter_));
        ok = (op == CompareOp::kIn) == in;
        break;
      }
      default: {
        if (lhs.is_undefined()) return undefined_error(lhs);
        if (rhs.is_undefined()) return undefined_error(rhs);
        const auto ord = py_compare(lhs, rhs, meter_);
        const char* sym = op == CompareOp::kLt ? "<" : op == CompareOp::kLe ? "<=" : op == CompareOp::kGt ? ">" : ">=";
        if (!ord)
          return invalid_argument(std::string("'") + sym + "' not supported between instances of '" +
                                  lhs.type_name() + "' and '" + rhs.type_name() + "'");
        switch (op) {
          case CompareOp::kLt: ok = *ord < 0; break;
          case CompareOp::kLe: ok = *ord <= 0; break;
          case CompareOp::kGt: ok = *ord > 0; break;
          default: ok = *ord >= 0; break;
        }
      }
    }
    if (!ok) return Value::boolean(false);
    lhs = std::move(rhs);
  }
  return Value::boolean(true);
}

Result<Value> Evaluator::eval_impl(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return static_cast<const Literal&>(e).value;
    case ExprKind::kName:
      return lookup(static_cast<const Name&>(e).name);
    case ExprKind::kList: {
      const auto& l = static_cast<const ListExpr&>(e);
      std::vector<Value> items;
      items.reserve(l.items.size());
      for (const ExprPtr& item : l.items) {
        RSSM_ASSIGN_OR_RETURN(Value v, eval(*item));
        items.push_back(std::move(v));
      }
      return Value::list(std::move(items), l.tuple);
    }
    case ExprKind::kDict: {
      Dict d;
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
        RSSM_ASSIGN_OR_RETURN(Value key, eval(*k));
        RSSM_ASSIGN_OR_RETURN(Value value, eval(*v));
        if (!d.set(key, std::move(value)))
          return invalid_argument(std::string("unhashable type: '") + key.type_name() + "'");
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::kGetAttr: {
      const auto& g = static_cast<const GetAttr&>(e);
      RSSM_ASSIGN_OR_RETURN(Value obj, eval(*g.object));
      if (obj.is_undefined()) return undefined_error(obj);
      return get_attr(obj, g.attr);
    }
    case ExprKind::kGetItem: {
      const auto& g = static_cast<const GetItem&>(e);
      RSSM_ASSIGN_OR_RETURN(Value obj, eval(*g.object));
      RSSM_ASSIGN_OR_RETURN(Value key, eval(*g.index));
      if (obj.is_undefined()) return undefined_error(obj);
      return get_item(obj, key);
    }
    case ExprKind::kSlice: {
      const auto& s = static_cast<const Slice&>(e);
      RSSM_ASSIGN_OR_RETURN(Value obj, eval(*s.object));
      Value parts[3];
      const Expr* exprs[3] = {s.start.get(), s.stop.get(), s.step.get()};
      for (int k = 0; k < 3; ++k) {
        if (!exprs[k]) {
          parts[k] = Value::none();
          continue;
        }
        RSSM_ASSIGN_OR_RETURN(parts[k], eval(*exprs[k]));
      }
      if (obj.is_undefined()) return undefined_error(obj);
      return get_slice(obj, parts[0], parts[1], parts[2]);
    }
    case ExprKind::kCall:
      return eval_call(static_cast<const Call&>(e));
    case ExprKind::kFilter: {
      const auto& f = static_cast<const Filter&>(e);
      Value operand;
      if (f.operand) {
        RSSM_ASSIGN_OR_RETURN(operand, eval(*f.operand));
      } else {
        operand = *block_value_;
      }
      RSSM_ASSIGN_OR_RETURN(CallArgs args, eval_args(f.args));
      return apply_filter(f.name, operand, args);
    }
    case ExprKind::kTest: {
      const auto& t = static_cast<const Test&>(e);
      RSSM_ASSIGN_OR_RETURN(Value operand, eval(*t.operand));
      RSSM_ASSIGN_OR_RETURN(CallArgs args, eval_args(t.args));
      RSSM_ASSIGN_OR_RETURN(bool r, apply_test(t.name, operand, args));
      return Value::boolean(r != t.negated);
    }
    case ExprKind::kUnary: {
      const auto& u = static_cast<const Unary&>(e);
      RSSM_ASSIGN_OR_RETURN(Value x, eval(*u.operand));
      if (u.op == UnaryOp::kNot) return Value::boolean(!x.truthy());
      return unary_op(u.op, x);
    }
    case ExprKind::kBinary: {
      const auto& b = static_cast<const Binary&>(e);
      RSSM_ASSIGN_OR_RETURN(Value lhs, eval(*b.lhs));
      if (b.op == BinaryOp::kAnd) {
        if (!lhs.truthy()) return lhs;
        return eval(*b.rhs);
      }
      if (b.op == BinaryOp::kOr) {
        if (lhs.truthy()) return lhs;
        return eval(*b.rhs);
      }
      RSSM_ASSIGN_OR_RETURN(Value rhs, eval(*b.rhs));
      return binary_op(b.op, lhs, rhs, meter_);
    }
    case ExprKind::kCompare:
      return eval_compare(static_cast<const Compare&>(e));
    case ExprKind::kCondition: {
      const auto& c = static_cast<const Condition&>(e);
      RSSM_ASSIGN_OR_RETURN(Value t, eval(*c.test));
      if (t.truthy()) return eval(*c.then);
      if (c.otherwise) return eval(*c.otherwise);
      return Value::undefined("the inline if-expression on line " + std::to_string(c.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return invalid_argument("unknown expression");
}

}  // namespace replayssm::chat
