// jinja2's tests, the predicates of `x is name` (see jinja_builtins.h).
// Named after jinja2 3.1's tests.py; `number` is true for bools, as
// isinstance(True, Number) is, while `integer` is not.
#include <unordered_map>

#include "chat/jinja_builtins.h"
#include "chat/jinja_eval.h"
#include "chat/jinja_operators.h"
#include "chat/jinja_string.h"

namespace replayssm::chat {

namespace {

using Args = std::vector<std::optional<Value>>;

// For the tests that take no argument.
Status no_args(const char* test, const CallArgs& args) {
  auto r = bind_args(test, args, {});
  return r.ok() ? Status() : r.status();
}

Result<Value> one_arg(const char* test, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args(test, args, {"other"}));
  if (!a[0]) return invalid_argument(std::string(test) + ": missing the value to compare with");
  return *a[0];
}

template <bool (*Pred)(const Value&)>
Result<bool> simple(Evaluator&, const Value& v, const CallArgs& args) {
  RSSM_RETURN_IF_ERROR(no_args("test", args));
  return Pred(v);
}

bool is_defined(const Value& v) { return !v.is_undefined(); }
bool is_undefined(const Value& v) { return v.is_undefined(); }
bool is_none(const Value& v) { return v.is_none(); }
bool is_boolean(const Value& v) { return v.type() == Value::Type::kBool; }
bool is_true(const Value& v) { return v.type() == Value::Type::kBool && v.as_bool(); }
bool is_false(const Value& v) { return v.type() == Value::Type::kBool && !v.as_bool(); }
bool is_string(const Value& v) { return v.is_string(); }
bool is_number(const Value& v) { return v.is_number(); }
bool is_integer(const Value& v) { return v.type() == Value::Type::kInt; }
bool is_float(const Value& v) { return v.is_float(); }
bool is_mapping(const Value& v) { return v.is_dict(); }
bool is_callable(const Value& v) { return v.type() == Value::Type::kCallable; }
// iter() works: Undefined too (it iterates as empty).
bool is_iterable(const Value& v) { return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict(); }
// len() and [] work: Undefined has both.
bool is_sequence(const Value& v) { return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict(); }

Result<bool> t_lower(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_RETURN_IF_ERROR(no_args("lower", args));
  return py_islower(to_str(v, ev.meter()));
}

Result<bool> t_upper(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_RETURN_IF_ERROR(no_args("upper", args));
  return py_isupper(to_str(v, ev.meter()));
}

Result<bool> parity(const char* test, const Value& v, const CallArgs& args, int64_t want) {
  RSSM_RETURN_IF_ERROR(no_args(test, args));
  if (v.is_undefined()) return undefined_error(v);
  if (v.type() != Value::Type::kInt && v.type() != Value::Type::kBool)
    return invalid_argument(std::string(test) + ": expected an integer, not " + v.type_name());
  const int64_t i = v.type() == Value::Type::kBool ? v.as_bool() : v.as_int();
  return ((i % 2) + 2) % 2 == want;
}

Result<bool> t_odd(Evaluator&, const Value& v, const CallArgs& args) { return parity("odd", v, args, 1); }
Result<bool> t_even(Evaluator&, const Value& v, const CallArgs& args) { return parity("even", v, args, 0); }

Result<bool> t_divisibleby(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("divisibleby", args, {"num"}));
  if (!a[0]) return invalid_argument("divisibleby: missing the divisor");
  RSSM_ASSIGN_OR_RETURN(Value r, binary_op(ast::BinaryOp::kMod, v, *a[0], ev.meter()));
  return r.is_number() && r.to_double() == 0.0;
}

Result<bool> t_eq(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Value other, one_arg("eq", args));
  return py_equal(v, other, ev.meter());
}

Result<bool> t_ne(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Value other, one_arg("ne", args));
  return !py_equal(v, other, ev.meter());
}

template <int Kind>  // 0 <, 1 <=, 2 >, 3 >=
Result<bool> t_order(Evaluator& ev, const Value& v, const CallArgs& args) {
  static const char* const kNames[] = {"lt", "le", "gt", "ge"};
  RSSM_ASSIGN_OR_RETURN(Value other, one_arg(kNames[Kind], args));
  if (v.is_undefined()) return undefined_error(v);
  if (other.is_undefined()) return undefined_error(other);
  const auto o = py_compare(v, other, ev.meter());
  if (!o)
    return invalid_argument(std::string(kNames[Kind]) + ": '" + v.type_name() + "' and '" + other.type_name() +
                            "' cannot be ordered");
  switch (Kind) {
    case 0: return *o < 0;
    case 1: return *o <= 0;
    case 2: return *o > 0;
    default: return *o >= 0;
  }
}

Result<bool> t_in(Evaluator& ev, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Value seq, one_arg("in", args));
  return contains(seq, v, ev.meter());
}

Result<bool> t_sameas(Evaluator&, const Value& v, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Value other, one_arg("sameas", args));
  return v.same_object(other);
}

Result<bool> t_filter(Evaluator&, const Value& v, const CallArgs& args) {
  RSSM_RETURN_IF_ERROR(no_args("filter", args));
  return v.is_string() && find_filter(v.as_string()) != nullptr;
}

Result<bool> t_test(Evaluator&, const Value& v, const CallArgs& args) {
  RSSM_RETURN_IF_ERROR(no_args("test", args));
  return v.is_string() && find_test(v.as_string()) != nullptr;
}

}  // namespace

TestFn find_test(std::string_view name) {
  static const std::unordered_map<std::string_view, TestFn> kTests = {
      {"boolean", simple<is_boolean>},
      {"callable", simple<is_callable>},
      {"defined", simple<is_defined>},
      {"divisibleby", t_divisibleby},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"even", t_even},
      {"false", simple<is_false>},
      {"filter", t_filter},
      {"float", simple<is_float>},
      {"ge", t_order<3>},
      {">=", t_order<3>},
      {"gt", t_order<2>},
      {"greaterthan", t_order<2>},
      {">", t_order<2>},
      {"in", t_in},
      {"integer", simple<is_integer>},
      {"iterable", simple<is_iterable>},
      {"le", t_order<1>},
      {"<=", t_order<1>},
      {"lower", t_lower},
      {"lt", t_order<0>},
      {"lessthan", t_order<0>},
      {"<", t_order<0>},
      {"mapping", simple<is_mapping>},
      {"ne", t_ne},
      {"!=", t_ne},
      {"none", simple<is_none>},
      {"number", simple<is_number>},
      {"odd", t_odd},
      {"sameas", t_sameas},
      {"sequence", simple<is_sequence>},
      {"string", simple<is_string>},
      {"test", t_test},
      {"true", simple<is_true>},
      {"undefined", simple<is_undefined>},
      {"upper", t_upper},
  };
  auto it = kTests.find(name);
  return it == kTests.end() ? nullptr : it->second;
}

}  // namespace replayssm::chat
