// Methods of str, dict and list as the sandbox lets templates call them,
// and Python-style argument binding (see jinja_builtins.h).
//
// `obj.name` evaluates to a bound method (a Callable holding the object),
// so `message.content.split` and `message.content.split('x')` behave as in
// Python. Methods the sandbox refuses (list.append, dict.update, ...) come
// back as an Undefined carrying jinja2's SecurityError text: falsy and
// printable as "", an error once called.
#include <unordered_map>
#include <unordered_set>

#include "chat/jinja_builtins.h"
#include "chat/jinja_eval.h"
#include "chat/jinja_operators.h"
#include "chat/jinja_string.h"

namespace replayssm::chat {

namespace {

using Args = std::vector<std::optional<Value>>;
using StrMethod = Result<Value> (*)(Evaluator& ev, const std::string& s, const CallArgs& args);

Result<std::optional<std::string>> opt_str(const char* fn, const char* param, const std::optional<Value>& v) {
  if (!v || v->is_none()) return std::optional<std::string>();
  if (!v->is_string())
    return invalid_argument(std::string(fn) + ": '" + param + "' must be str or None, not " + v->type_name());
  return std::optional<std::string>(v->as_string());
}

Result<int64_t> int_or(const char* fn, const std::optional<Value>& v, int64_t dflt) {
  if (!v || v->is_none()) return dflt;
  if (v->type() == Value::Type::kInt) return v->as_int();
  if (v->type() == Value::Type::kBool) return int64_t{v->as_bool()};
  return invalid_argument(std::string(fn) + ": expected an integer, not " + v->type_name());
}

Result<std::string> req_str(const char* fn, const std::optional<Value>& v) {
  if (!v) return invalid_argument(std::string(fn) + ": missing a required argument");
  if (!v->is_string()) return invalid_argument(std::string(fn) + ": expected a str argument, not " + v->type_name());
  return v->as_string();
}

Value str_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts) items.push_back(Value::string(std::move(p)));
  return Value::list(std::move(items));
}

// startswith / endswith: a str or a tuple of them.
Result<Value> affix(const char* fn, const std::string& s, const CallArgs& args, bool prefix) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args(fn, args, {"affix"}));
  if (!a[0]) return invalid_argument(std::string(fn) + ": missing the affix");
  std::vector<Value> options;
  if (a[0]->is_list()) options = a[0]->as_list().items;
  else options.push_back(*a[0]);
  for (const Value& o : options) {
    if (!o.is_string())
      return invalid_argument(std::string(fn) + " first arg must be str or a tuple of str, not " + o.type_name());
    const std::string& x = o.as_string();
    if (x.size() <= s.size() && (prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0))
      return Value::boolean(true);
  }
  return Value::boolean(false);
}

Result<Value> m_startswith(Evaluator&, const std::string& s, const CallArgs& a) { return affix("startswith", s, a, true); }
Result<Value> m_endswith(Evaluator&, const std::string& s, const CallArgs& a) { return affix("endswith", s, a, false); }

Result<Value> strip_impl(const char* fn, const std::string& s, const CallArgs& args, bool left, bool right) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args(fn, args, {"chars"}));
  RSSM_ASSIGN_OR_RETURN(std::optional<std::string> chars, opt_str(fn, "chars", a[0]));
  if (chars) return Value::string(py_strip(s, std::string_view(*chars), left, right));
  return Value::string(py_strip(s, std::nullopt, left, right));
}

Result<Value> m_strip(Evaluator&, const std::string& s, const CallArgs& a) { return strip_impl("strip", s, a, true, true); }
Result<Value> m_lstrip(Evaluator&, const std::string& s, const CallArgs& a) { return strip_impl("lstrip", s, a, true, false); }
Result<Value> m_rstrip(Evaluator&, const std::string& s, const CallArgs& a) { return strip_impl("rstrip", s, a, false, true); }

Result<Value> split_impl(Evaluator& ev, const char* fn, const std::string& s, const CallArgs& args, bool from_right) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args(fn, args, {"sep", "maxsplit"}));
  RSSM_ASSIGN_OR_RETURN(std::optional<std::string> sep, opt_str(fn, "sep", a[0]));
  RSSM_ASSIGN_OR_RETURN(int64_t maxsplit, int_or(fn, a[1], -1));
  if (sep && sep->empty()) return invalid_argument("empty separator");
  ev.meter().charge(static_cast<int64_t>(s.size() / 16));
  std::optional<std::string_view> sv;
  if (sep) sv = *sep;
  return str_list(from_right ? py_rsplit(s, sv, maxsplit) : py_split(s, sv, maxsplit));
}

Result<Value> m_split(Evaluator& ev, const std::string& s, const CallArgs& a) { return split_impl(ev, "split", s, a, false); }
Result<Value> m_rsplit(Evaluator& ev, const std::string& s, const CallArgs& a) { return split_impl(ev, "rsplit", s, a, true); }

Result<Value> m_splitlines(Evaluator&, const std::string& s, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("splitlines", args, {"keepends"}));
  return str_list(py_splitlines(s, a[0] && a[0]->truthy()));
}

template <std::string (*Fn)(std::string_view)>
Result<Value> no_arg_str(Evaluator&, const std::string& s, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("str method", args, {}));
  return Value::string(Fn(s));
}

template <bool (*Fn)(std::string_view)>
Result<Value> no_arg_bool(Evaluator&, const std::string& s, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("str method", args, {}));
  return Value::boolean(Fn(s));
}

Result<Value> m_replace(Evaluator& ev, const std::string& s, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("replace", args, {"old", "new", "count"}));
  RSSM_ASSIGN_OR_RETURN(std::string old, req_str("replace", a[0]));
  RSSM_ASSIGN_OR_RETURN(std::string repl, req_str("replace", a[1]));
  RSSM_ASSIGN_OR_RETURN(int64_t count, int_or("replace", a[2], -1));
  const int64_t hits = std::min<int64_t>(py_count(s, old), count < 0 ? INT64_MAX : count);
  if (repl.size() > old.size() && !ev.meter().fits(s.size() + static_cast<size_t>(hits) * (repl.size() - old.size())))
    return out_of_budget(ev.meter().why());
  std::string out = py_replace(s, old, repl, count);
  ev.meter().build_string(out.size());
  return Value::string(std::move(out));
}

Result<Value> find_impl(const char* fn, const std::string& s, const CallArgs& args, bool from_right, bool raise) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args(fn, args, {"sub"}));
  RSSM_ASSIGN_OR_RETURN(std::string sub, req_str(fn, a[0]));
  int64_t i = -1;
  if (from_right) {
    const size_t hit = s.rfind(sub);
    if (hit != std::string::npos) i = static_cast<int64_t>(py_len(std::string_view(s).substr(0, hit)));
  } else {
    i = py_find(s, sub);
  }
  if (i < 0 && raise) return invalid_argument("substring not found");
  return Value::integer(i);
}

Result<Value> m_find(Evaluator&, const std::string& s, const CallArgs& a) { return find_impl("find", s, a, false, false); }
Result<Value> m_rfind(Evaluator&, const std::string& s, const CallArgs& a) { return find_impl("rfind", s, a, true, false); }
Result<Value> m_index(Evaluator&, const std::string& s, const CallArgs& a) { return find_impl("index", s, a, false, true); }
Result<Value> m_rindex(Evaluator&, const std::string& s, const CallArgs& a) { return find_impl("rindex", s, a, true, true); }

Result<Value> m_count(Evaluator&, const std::string& s, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("count", args, {"sub"}));
  RSSM_ASSIGN_OR_RETURN(std::string sub, req_str("count", a[0]));
  return Value::integer(py_count(s, sub));
}

Result<Value> m_join(Evaluator& ev, const std::string& s, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args("join", args, {"iterable"}));
  if (!a[0]) return invalid_argument("join: missing the iterable");
  RSSM_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(*a[0], ev.meter()));
  std::string out;
  for (size_t k = 0; k < items.size(); ++k) {
    if (!items[k].is_string())
      return invalid_argument("sequence item " + std::to_string(k) + ": expected str instance, " +
                              items[k].type_name() + " found");
    if (k) out += s;
    out += items[k].as_string();
    if (!ev.meter().fits(out.size())) return out_of_budget(ev.meter().why());
  }
  ev.meter().build_string(out.size());
  return Value::string(std::move(out));
}

Result<Value> m_format(Evaluator& ev, const std::string& s, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(std::string out, str_format(s, args, ev.meter()));
  return Value::string(std::move(out));
}

Result<Value> affix_remove(const char* fn, const std::string& s, const CallArgs& args, bool prefix) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args(fn, args, {"affix"}));
  RSSM_ASSIGN_OR_RETURN(std::string x, req_str(fn, a[0]));
  if (x.size() <= s.size()) {
    if (prefix && s.compare(0, x.size(), x) == 0) return Value::string(s.substr(x.size()));
    if (!prefix && s.compare(s.size() - x.size(), x.size(), x) == 0) return Value::string(s.substr(0, s.size() - x.size()));
  }
  return Value::string(s);
}

Result<Value> m_removeprefix(Evaluator&, const std::string& s, const CallArgs& a) { return affix_remove("removeprefix", s, a, true); }
Result<Value> m_removesuffix(Evaluator&, const std::string& s, const CallArgs& a) { return affix_remove("removesuffix", s, a, false); }

// ljust / rjust / center / zfill.
Result<Value> justify(Evaluator& ev, const char* fn, const std::string& s, const CallArgs& args, char how) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args(fn, args, {"width", "fillchar"}));
  RSSM_ASSIGN_OR_RETURN(int64_t width, int_or(fn, a[0], 0));
  std::string fill = " ";
  if (how != 'z' && a[1]) {
    if (!a[1]->is_string() || py_len(a[1]->as_string()) != 1)
      return invalid_argument(std::string(fn) + ": the fill character must be exactly one character long");
    fill = a[1]->as_string();
  }
  const auto len = static_cast<int64_t>(py_len(s));
  if (width <= len) return Value::string(s);
  if (!ev.meter().build_string(s.size() + static_cast<size_t>(width - len) * fill.size()))
    return out_of_budget(ev.meter().why());
  const int64_t pad = width - len;
  int64_t left = how == 'l' ? 0 : how == 'c' ? pad / 2 + (pad & width & 1) : pad;
  std::string out;
  if (how == 'z') {
    const bool sign = !s.empty() && (s[0] == '+' || s[0] == '-');
    out = (sign ? s.substr(0, 1) : "") + std::string(static_cast<size_t>(pad), '0') + (sign ? s.substr(1) : s);
    return Value::string(std::move(out));
  }
  for (int64_t k = 0; k < left; ++k) out += fill;
  out += s;
  for (int64_t k = left; k < pad; ++k) out += fill;
  return Value::string(std::move(out));
}

Result<Value> m_ljust(Evaluator& ev, const std::string& s, const CallArgs& a) { return justify(ev, "ljust", s, a, 'l'); }
Result<Value> m_rjust(Evaluator& ev, const std::string& s, const CallArgs& a) { return justify(ev, "rjust", s, a, 'r'); }
Result<Value> m_center(Evaluator& ev, const std::string& s, const CallArgs& a) { return justify(ev, "center", s, a, 'c'); }
Result<Value> m_zfill(Evaluator& ev, const std::string& s, const CallArgs& a) { return justify(ev, "zfill", s, a, 'z'); }

Result<Value> partition_impl(const char* fn, const std::string& s, const CallArgs& args, bool from_right) {
  RSSM_ASSIGN_OR_RETURN(Args a, bind_args(fn, args, {"sep"}));
  RSSM_ASSIGN_OR_RETURN(std::string sep, req_str(fn, a[0]));
  if (sep.empty()) return invalid_argument("empty separator");
  const size_t hit = from_right ? s.rfind(sep) : s.find(sep);
  if (hit == std::string::npos) {
    if (from_right) return Value::list({Value::string(""), Value::string(""), Value::string(s)}, true);
    return Value::list({Value::string(s), Value::string(""), Value::string("")}, true);
  }
  return Value::list({Value::string(s.substr(0, hit)), Value::string(sep), Value::string(s.substr(hit + sep.size()))},
                     true);
}

Result<Value> m_partition(Evaluator&, const std::string& s, const CallArgs& a) { return partition_impl("partition", s, a, false); }
Result<Value> m_rpartition(Evaluator&, const std::string& s, const CallArgs& a) { return partition_impl("rpartition", s, a, true); }

const std::unordered_map<std::string_view, StrMethod>& str_methods() {
  static const std::unordered_map<std::string_view, StrMethod> kMethods = {
      {"capitalize", no_arg_str<py_capitalize>},
      {"casefold", no_arg_str<py_lower>},
      {"center", m_center},
      {"count", m_count},
      {"endswith", m_endswith},
      {"find", m_find},
      {"format", m_format},
      {"index", m_index},
      {"isalnum", no_arg_bool<py_isalnum>},
      {"isalpha", no_arg_bool<py_isalpha>},
      {"isdigit", no_arg_bool<py_isdigit>},
      {"islower", no_arg_bool<py_islower>},
      {"isspace", no_arg_bool<py_isspace_str>},
      {"isupper", no_arg_bool<py_isupper>},
      {"join", m_join},
      {"ljust", m_ljust},
      {"lower", no_arg_str<py_lower>},
      {"lstrip", m_lstrip},
      {"partition", m_partition},
      {"removeprefix", m_removeprefix},
      {"removesuffix", m_removesuffix},
      {"replace", m_replace},
      {"rfind", m_rfind},
      {"rindex", m_rindex},
      {"rjust", m_rjust},
      {"rpartition", m_rpartition},
      {"rsplit", m_rsplit},
      {"rstrip", m_rstrip},
      {"split", m_split},
      {"splitlines", m_splitlines},
      {"startswith", m_startswith},
      {"strip", m_strip},
      {"title", no_arg_str<py_title>},
      {"upper", no_arg_str<py_upper>},
      {"zfill", m_zfill},
  };
  return kMethods;
}

// Python str attributes this engine does not implement: calling one is an
// error that says so, rather than "undefined".
bool unimplemented_str_method(std::string_view name) {
  static const std::unordered_set<std::string_view> kNames = {
      "encode", "expandtabs", "format_map", "isascii", "isdecimal", "isidentifier", "isnumeric",
      "isprintable", "istitle", "maketrans", "swapcase", "translate"};
  return kNames.count(name) != 0;
}

// A bound method: `fn` holds its object.
Value bound(const std::string& name, const char* type, std::function<Result<Value>(Evaluator&, const CallArgs&)> fn) {
  auto c = std::make_shared<Callable>();
  c->kind = Callable::Kind::kMethod;
  c->name = name + " of " + type + " object";
  c->fn = std::move(fn);
  return Value::callable(std::move(c));
}

Value unsafe(const std::string& name, const char* type) {
  return Value::undefined("access to attribute '" + name + "' of '" + type + "' object is unsafe.");
}

std::optional<Value> dict_method(const Value& obj, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    const int which = name == "items" ? 0 : name == "keys" ? 1 : 2;
    return bound(name, "dict", [obj, which, name](Evaluator& ev, const CallArgs& args) -> Result<Value> {
      RSSM_ASSIGN_OR_RETURN(Args a, bind_args(name, args, {}));
      ev.meter().charge(static_cast<int64_t>(obj.as_dict().size()));
      std::vector<Value> out;
      for (const auto& [k, v] : obj.as_dict().entries()) {
        if (which == 0) out.push_back(Value::list({k, v}, true));
        else out.push_back(which == 1 ? k : v);
      }
      return Value::list(std::move(out));
    });
  }
  if (name == "get") {
    return bound(name, "dict", [obj](Evaluator&, const CallArgs& args) -> Result<Value> {
      RSSM_ASSIGN_OR_RETURN(Args a, bind_args("get", args, {"key", "default"}));
      if (!a[0]) return invalid_argument("get expected at least 1 argument, got 0");
      if (a[0]->is_list() || a[0]->is_dict())
        return invalid_argument(std::string("unhashable type: '") + a[0]->type_name() + "'");
      const Value* v = obj.as_dict().find(*a[0]);
      if (v) return *v;
      return a[1] ? *a[1] : Value::none();
    });
  }
  if (name == "copy") {
    return bound(name, "dict", [obj](Evaluator&, const CallArgs& args) -> Result<Value> {
      RSSM_ASSIGN_OR_RETURN(Args a, bind_args("copy", args, {}));
      return obj;  // immutable: a copy is indistinguishable
    });
  }
  static const std::unordered_set<std::string_view> kMutators = {"clear", "pop", "popitem", "setdefault", "update"};
  if (kMutators.count(name)) return unsafe(name, "dict");
  return std::nullopt;
}

std::optional<Value> list_method(const Value& obj, const std::string& name) {
  const char* type = obj.as_list().tuple ? "tuple" : "list";
  if (name == "count" || name == "index") {
    const bool is_count = name == "count";
    return bound(name, type, [obj, is_count, name](Evaluator& ev, const CallArgs& args) -> Result<Value> {
      RSSM_ASSIGN_OR_RETURN(Args a, bind_args(name, args, {"value"}));
      if (!a[0]) return invalid_argument(name + " takes exactly one argument");
      int64_t n = 0;
      const auto& items = obj.as_list().items;
      for (size_t k = 0; k < items.size(); ++k) {
        if (!py_equal(items[k], *a[0], ev.meter())) continue;
        if (!is_count) return Value::integer(static_cast<int64_t>(k));
        ++n;
      }
      if (!is_count) return invalid_argument("value is not in list");
      return Value::integer(n);
    });
  }
  if (name == "copy" && !obj.as_list().tuple) {
    return bound(name, type, [obj](Evaluator&, const CallArgs& args) -> Result<Value> {
      RSSM_ASSIGN_OR_RETURN(Args a, bind_args("copy", args, {}));
      return obj;
    });
  }
  static const std::unordered_set<std::string_view> kMutators = {"append", "clear", "extend", "insert",
                                                                 "pop",    "remove", "reverse", "sort"};
  if (!obj.as_list().tuple && kMutators.count(name)) return unsafe(name, "list");
  return std::nullopt;
}

}  // namespace

Result<std::vector<std::optional<Value>>> bind_args(std::string_view fn, const CallArgs& args,
                                                    std::initializer_list<std::string_view> names) {
  std::vector<std::optional<Value>> out(names.size());
  if (args.positional.size() > names.size())
    return invalid_argument(std::string(fn) + "() takes at most " + std::to_string(names.size()) +
                            " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  for (size_t k = 0; k < args.positional.size(); ++k) out[k] = args.positional[k];
  for (const auto& [key, value] : args.keyword) {
    size_t k = 0;
    for (std::string_view n : names) {
      if (n == key) break;
      ++k;
    }
    if (k == names.size()) return invalid_argument(std::string(fn) + "() got an unexpected keyword argument '" + key + "'");
    if (out[k]) return invalid_argument(std::string(fn) + "() got multiple values for argument '" + key + "'");
    out[k] = value;
  }
  return out;
}

std::optional<Value> find_method(const Value& obj, const std::string& name) {
  if (obj.is_string()) {
    const auto& methods = str_methods();
    auto it = methods.find(name);
    if (it != methods.end()) {
      const StrMethod m = it->second;
      return bound(name, "str",
                   [obj, m](Evaluator& ev, const CallArgs& args) { return m(ev, obj.as_string(), args); });
    }
    if (unimplemented_str_method(name)) {
      return bound(name, "str", [name](Evaluator&, const CallArgs&) -> Result<Value> {
        return unsupported("str." + name + "() is not supported in chat templates");
      });
    }
    return std::nullopt;
  }
  if (obj.is_dict()) return dict_method(obj, name);
  if (obj.is_list()) return list_method(obj, name);
  return std::nullopt;
}

}  // namespace replayssm::chat
