// Python's operators and jinja2's attribute/item access (see
// jinja_operators.h).
#include "chat/jinja_operators.h"

#include <cmath>

#include "chat/jinja_builtins.h"
#include "chat/jinja_string.h"
#include "io/utf8.h"

namespace replayssm::chat {

namespace {

using ast::BinaryOp;

// Lists built by + and * stop here: far beyond any chat template, well
// before memory runs out.
constexpr size_t kMaxListItems = size_t{1} << 22;

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "+";
    case BinaryOp::kSub: return "-";
    case BinaryOp::kMul: return "*";
    case BinaryOp::kDiv: return "/";
    case BinaryOp::kFloorDiv: return "//";
    case BinaryOp::kMod: return "%";
    case BinaryOp::kPow: return "** or pow()";
    default: return "?";
  }
}

Status type_error(BinaryOp op, const Value& a, const Value& b) {
  return invalid_argument(std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" + a.type_name() +
                          "' and '" + b.type_name() + "'");
}

Status overflow() { return invalid_argument("integer overflow: the result does not fit in 64 bits"); }

// bool and int as int64 (only for non-float numbers).
int64_t int_of(const Value& v) { return v.type() == Value::Type::kBool ? (v.as_bool() ? 1 : 0) : v.as_int(); }

Result<Value> int_op(BinaryOp op, int64_t x, int64_t y) {
  int64_t r = 0;
  switch (op) {
    case BinaryOp::kAdd:
      if (__builtin_add_overflow(x, y, &r)) return overflow();
      return Value::integer(r);
    case BinaryOp::kSub:
      if (__builtin_sub_overflow(x, y, &r)) return overflow();
      return Value::integer(r);
    case BinaryOp::kMul:
      if (__builtin_mul_overflow(x, y, &r)) return overflow();
      return Value::integer(r);
    case BinaryOp::kDiv:
      if (y == 0) return invalid_argument("division by zero");
      return Value::number(static_cast<double>(x) / static_cast<double>(y));
    case BinaryOp::kFloorDiv: {
      if (y == 0) return invalid_argument("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) return overflow();
      int64_t q = x / y;
      if (x % y != 0 && ((x < 0) != (y < 0))) --q;
      return Value::integer(q);
    }
    case BinaryOp::kMod: {
      if (y == 0) return invalid_argument("integer division or modulo by zero");
      if (y == -1) return Value::integer(0);
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::integer(m);
    }
    case BinaryOp::kPow: {
      if (y < 0) {
        if (x == 0) return invalid_argument("0.0 cannot be raised to a negative power");
        return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)));
      }
      int64_t result = 1, base = x;
      for (int64_t e = y; e > 0; e >>= 1) {
        if (e & 1) {
          if (__builtin_mul_overflow(result, base, &result)) return overflow();
        }
        if (e > 1 && __builtin_mul_overflow(base, base, &base)) return overflow();
      }
      return Value::integer(result);
    }
    default:
      return invalid_argument("not an arithmetic operator");
  }
}

Result<Value> float_op(BinaryOp op, double x, double y) {
  switch (op) {
    case BinaryOp::kAdd: return Value::number(x + y);
    case BinaryOp::kSub: return Value::number(x - y);
    case BinaryOp::kMul: return Value::number(x * y);
    case BinaryOp::kDiv:
      if (y == 0.0) return invalid_argument("float division by zero");
      return Value::number(x / y);
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod: {
      // CPython's float_divmod.
      if (y == 0.0) return invalid_argument("float modulo by zero");
      double mod = std::fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0.0) {
        if ((y < 0) != (mod < 0)) {
          mod += y;
          div -= 1.0;
        }
      } else {
        mod = std::copysign(0.0, y);
      }
      if (op == BinaryOp::kMod) return Value::number(mod);
      double floordiv = 0.0;
      if (div != 0.0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      } else {
        floordiv = std::copysign(0.0, x / y);
      }
      return Value::number(floordiv);
    }
    case BinaryOp::kPow: {
      if (x == 0.0 && y < 0.0) return invalid_argument("0.0 cannot be raised to a negative power");
      if (x < 0.0 && y != std::floor(y)) return unsupported("a negative number to a fractional power is complex");
      const double r = std::pow(x, y);
      if (std::isinf(r) && std::isfinite(x) && std::isfinite(y))
        return invalid_argument("(34, 'Numerical result out of range')");
      return Value::number(r);
    }
    default:
      return invalid_argument("not an arithmetic operator");
  }
}

Result<Value> repeat(const Value& seq, int64_t n, Meter& meter) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && static_cast<uint64_t>(n) > SIZE_MAX / s.size()) {
      meter.fail("a string of more than " + std::to_string(meter.max_string_bytes()) + " bytes exceeds the limit");
      return out_of_budget(meter.why());
    }
    if (!meter.build_string(s.size() * static_cast<size_t>(n))) return out_of_budget(meter.why());
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) out += s;
    return Value::string(std::move(out));
  }
  const List& l = seq.as_list();
  if (!l.items.empty() && static_cast<uint64_t>(n) > kMaxListItems / l.items.size())
    return out_of_budget("a list of more than " + std::to_string(kMaxListItems) + " items");
  const size_t total = l.items.size() * static_cast<size_t>(n);
  if (!meter.charge(static_cast<int64_t>(total))) return out_of_budget(meter.why());
  std::vector<Value> items;
  items.reserve(total);
  for (int64_t k = 0; k < n; ++k) items.insert(items.end(), l.items.begin(), l.items.end());
  return Value::list(std::move(items), l.tuple);
}

std::string key_repr(const Value& key) {
  std::string s;
  switch (key.type()) {
    case Value::Type::kString: append_py_repr(key.as_string(), &s); return s;
    case Value::Type::kInt: return std::to_string(key.as_int());
    case Value::Type::kBool: return key.as_bool() ? "True" : "False";
    case Value::Type::kNone: return "None";
    case Value::Type::kFloat: return format_float(key.as_float());
    default: return std::string("<") + key.type_name() + ">";
  }
}

// jinja2's hint: "has no attribute 'x'" for names, "has no element 0" for
// other keys.
Value missing(const Value& obj, const Value& key) {
  return Value::undefined(object_type_repr(obj) + (key.is_string() ? " has no attribute " : " has no element ") +
                          key_repr(key));
}

// Python's slice.indices(len).
bool slice_indices(int64_t len, const Value& start, const Value& stop, const Value& step, int64_t* b,
                   int64_t* e, int64_t* s) {
  auto as_index = [](const Value& v, std::optional<int64_t>* out) {
    if (v.is_none()) return true;
    if (v.type() == Value::Type::kInt || v.type() == Value::Type::kBool) {
      *out = int_of(v);
      return true;
    }
    return false;
  };
  std::optional<int64_t> ob, oe, os;
  if (!as_index(start, &ob) || !as_index(stop, &oe) || !as_index(step, &os)) return false;
  *s = os.value_or(1);
  const int64_t lower = *s > 0 ? 0 : -1;
  const int64_t upper = *s > 0 ? len : len - 1;
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  *b = clamp(ob, *s < 0 ? upper : lower);
  *e = clamp(oe, *s < 0 ? lower : upper);
  return true;
}

}  // namespace

Status undefined_error(const Value& v) {
  const std::string& hint = v.undefined_hint();
  return invalid_argument(hint.empty() ? "a value is undefined" : hint);
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  if (v.type() == Value::Type::kNamespace) return "'jinja2.utils.Namespace object'";
  return std::string("'") + v.type_name() + " object'";
}

Result<Value> binary_op(BinaryOp op, const Value& a, const Value& b, Meter& meter) {
  if (op == BinaryOp::kConcat) {
    std::string s = to_str(a, meter);
    append_str(b, meter, &s);
    if (!meter.build_string(s.size())) return out_of_budget(meter.why());
    return Value::string(std::move(s));
  }
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return float_op(op, a.to_double(), b.to_double());
    return int_op(op, int_of(a), int_of(b));
  }
  const bool a_seq = a.is_string() || a.is_list();
  const bool b_seq = b.is_string() || b.is_list();
  if (op == BinaryOp::kAdd && a.is_string() && b.is_string()) {
    const size_t n = a.as_string().size() + b.as_string().size();
    if (!meter.build_string(n)) return out_of_budget(meter.why());
    std::string s;
    s.reserve(n);
    s += a.as_string();
    s += b.as_string();
    return Value::string(std::move(s));
  }
  if (op == BinaryOp::kAdd && a.is_list() && b.is_list() && a.as_list().tuple == b.as_list().tuple) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    if (x.size() + y.size() > kMaxListItems)
      return out_of_budget("a list of more than " + std::to_string(kMaxListItems) + " items");
    if (!meter.charge(static_cast<int64_t>(x.size() + y.size()))) return out_of_budget(meter.why());
    std::vector<Value> items;
    items.reserve(x.size() + y.size());
    items.insert(items.end(), x.begin(), x.end());
    items.insert(items.end(), y.begin(), y.end());
    return Value::list(std::move(items), a.as_list().tuple);
  }
  if (op == BinaryOp::kMul && a_seq && (b.type() == Value::Type::kInt || b.type() == Value::Type::kBool))
    return repeat(a, int_of(b), meter);
  if (op == BinaryOp::kMul && b_seq && (a.type() == Value::Type::kInt || a.type() == Value::Type::kBool))
    return repeat(b, int_of(a), meter);
  if (op == BinaryOp::kMod && a.is_string()) {
    RSSM_ASSIGN_OR_RETURN(std::string s, percent_format(a.as_string(), b, meter));
    return Value::string(std::move(s));
  }
  return type_error(op, a, b);
}

Result<Value> unary_op(ast::UnaryOp op, const Value& x) {
  if (x.is_undefined()) return undefined_error(x);
  if (!x.is_number())
    return invalid_argument(std::string("bad operand type for unary ") + (op == ast::UnaryOp::kNeg ? "-" : "+") +
                            ": '" + x.type_name() + "'");
  if (x.is_float()) return Value::number(op == ast::UnaryOp::kNeg ? -x.as_float() : x.as_float());
  const int64_t i = int_of(x);
  if (op == ast::UnaryOp::kPos) return Value::integer(i);
  if (i == INT64_MIN) return overflow();
  return Value::integer(-i);
}

Result<bool> contains(const Value& container, const Value& item, Meter& meter) {
  switch (container.type()) {
    case Value::Type::kUndefined:
      return false;
    case Value::Type::kString:
      if (!item.is_string())
        return invalid_argument(std::string("'in <string>' requires string as left operand, not ") +
                                item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Type::kList:
      for (const Value& v : container.as_list().items)
        if (py_equal(v, item, meter)) return true;
      return false;
    case Value::Type::kDict:
      if (item.is_list() || item.is_dict()) return invalid_argument(std::string("unhashable type: '") + item.type_name() + "'");
      return container.as_dict().find(item) != nullptr;
    default:
      return invalid_argument(std::string("argument of type '") + container.type_name() + "' is not iterable");
  }
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.type() == Value::Type::kNamespace) {
    const Value* v = obj.as_namespace().attrs.find(std::string_view(name));
    if (v) return *v;
    return missing(obj, Value::string(name));
  }
  if (auto m = find_method(obj, name)) return *m;
  if (obj.is_dict()) {
    const Value* v = obj.as_dict().find(std::string_view(name));
    if (v) return *v;
  }
  return missing(obj, Value::string(name));
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.type()) {
    case Value::Type::kDict: {
      if (!key.is_list() && !key.is_dict()) {
        const Value* v = obj.as_dict().find(key);
        if (v) return *v;
      }
      break;
    }
    case Value::Type::kList:
    case Value::Type::kString: {
      if (key.type() != Value::Type::kInt && key.type() != Value::Type::kBool) break;
      int64_t i = int_of(key);
      if (obj.is_list()) {
        const auto& items = obj.as_list().items;
        const auto n = static_cast<int64_t>(items.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return items[static_cast<size_t>(i)];
        break;
      }
      const std::string& s = obj.as_string();
      const auto n = static_cast<int64_t>(py_len(s));
      if (i < 0) i += n;
      if (i < 0 || i >= n) break;
      return Value::string(py_slice(s, i, i + 1, 1));
    }
    default:
      break;
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return missing(obj, key);
}

Result<Value> get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (step.type() == Value::Type::kInt && step.as_int() == 0) return invalid_argument("slice step cannot be zero");
  if (!obj.is_list() && !obj.is_string()) return Value::undefined(object_type_repr(obj) + " has no attribute slice");
  const int64_t len =
      obj.is_list() ? static_cast<int64_t>(obj.as_list().items.size()) : static_cast<int64_t>(py_len(obj.as_string()));
  int64_t b = 0, e = 0, s = 1;
  if (!slice_indices(len, start, stop, step, &b, &e, &s))
    return Value::undefined("slice indices must be integers or None");
  if (obj.is_string()) return Value::string(py_slice(obj.as_string(), b, e, s));
  const auto& items = obj.as_list().items;
  std::vector<Value> out;
  if (s > 0) {
    for (int64_t k = b; k < e; k += s) out.push_back(items[static_cast<size_t>(k)]);
  } else {
    for (int64_t k = b; k > e; k += s) out.push_back(items[static_cast<size_t>(k)]);
  }
  return Value::list(std::move(out), obj.as_list().tuple);
}

Result<std::vector<Value>> iterate(const Value& v, Meter& meter) {
  std::vector<Value> out;
  switch (v.type()) {
    case Value::Type::kUndefined:
      return out;
    case Value::Type::kList:
      meter.charge(static_cast<int64_t>(v.as_list().items.size()));
      return v.as_list().items;
    case Value::Type::kDict:
      meter.charge(static_cast<int64_t>(v.as_dict().size()));
      out.reserve(v.as_dict().size());
      for (const auto& kv : v.as_dict().entries()) out.push_back(kv.first);
      return out;
    case Value::Type::kString: {
      const std::string& s = v.as_string();
      meter.charge(static_cast<int64_t>(s.size()));
      for (size_t i = 0; i < s.size();) {
        const size_t n = utf8_char_len(s, i);
        out.push_back(Value::string(s.substr(i, n)));
        i += n;
      }
      return out;
    }
    default:
      return invalid_argument(std::string("'") + v.type_name() + "' object is not iterable");
  }
}

Result<int64_t> length(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined: return int64_t{0};
    case Value::Type::kString: return static_cast<int64_t>(py_len(v.as_string()));
    case Value::Type::kList: return static_cast<int64_t>(v.as_list().items.size());
    case Value::Type::kDict: return static_cast<int64_t>(v.as_dict().size());
    default: return invalid_argument(std::string("object of type '") + v.type_name() + "' has no len()");
  }
}

}  // namespace replayssm::chat
